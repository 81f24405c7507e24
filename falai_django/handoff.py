"""Handing a conversation to a human and back: the service functions the admin calls.

Built on the host's service modules, so the admin, the API and a management command can share
them. The handoff state itself has one write path, `silence.silence` / `silence.unsilence`
(they refuse an unknown conversation with `UnknownConversationError` and an empty reason with
`InputError`); `take_over`, `silence` and `give_back` only add the owner's reason and the
understand default on top.

- `take_over(session_id, owner)` — the conversation gets an owner and every later turn runs
  with `silenced = "human: <owner>"` (the plain string: zero model calls, nothing said, `do`
  steps still run, waits still resolve). With `understand=True` the form is
  `{"reason": "human: <owner>", "understand": True}`: the understand call still runs, so
  fields keep landing while the assistant says nothing. The default for `understand` is the
  setting `FALAI["HANDOFF_UNDERSTAND"]` (False); the choice is stored per conversation (the
  handoff's `mode`), so each take-over may choose.
- `silence(session_id, reason, mode=...)` — pause the assistant with a reason and no owner.
- `give_back(session_id)` — the assistant answers again, and the runs the handoff silenced are
  resumed (`falai_django.resume`: their flow starts again, known fields skipped).
- `reply_as_human(session_id, text, author=...)` — the text goes out through the sender, is
  kept in the transcript as the human's (`role="assistant"`, `kind="human"`,
  `message_key="human:<author>"`), and is fed to the engine as the agent's outbound event
  (engine-authoring §6.2: it sets `lastAssistantAt`, so silence timers re-arm). The event is
  `FALAI["HUMAN_REPLY_EVENT"]` when set, else the first event the agent registers with
  `direction="outbound"`; with neither, the reply is still sent and stored, and the result
  says no event was fed.
- `fire_wake_now(session_id, key)` — run `turn(wake=key)` now (a stale key changes nothing).
- `requeue_wakes(session_id)` — rebuild the conversation's wakes from `agent.pending_wakes`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from . import conf, inbox, loop, outbox, requeue, resume
from . import silence as handoff_state
from .enqueue import hand_over_sends
from .inbox import HostResult

HUMAN_KIND = "human"  # History.kind of a message a person wrote (the engine's are 'ai' | 'verbatim')
HUMAN_REASON_PREFIX = "human: "


class HandoffError(ValueError):
    """The operation cannot run on this conversation (its message says why)."""


@dataclass
class HumanReply:
    """What `reply_as_human` did: the stored item, and the outbound event turn (None without one)."""

    item_id: int
    event: str | None
    turn: HostResult | None


def understand_by_default() -> bool:
    """Whether a take-over keeps the understand call when the operator does not say."""
    return bool(conf.falai_settings().get("HANDOFF_UNDERSTAND", False))


def human_reason(owner: str) -> str:
    return f"{HUMAN_REASON_PREFIX}{owner}"


def load_session(session_id: str) -> Any:
    """The conversation's session; raises `InvalidSessionError` for a broken blob (never fixed)."""
    from .stores.django import DjangoStore

    session = DjangoStore().load(session_id)
    if session is None:
        raise HandoffError(f"conversation {session_id!r} does not exist")
    return session


def take_over(session_id: str, owner: str, *, understand: bool | None = None, by: Any = None) -> Any:
    """A human owns the conversation: later turns are silenced with `human: <owner>`."""
    if not owner:
        raise HandoffError("a take-over needs the owner's name")
    if understand is None:
        understand = understand_by_default()
    mode = "understand" if understand else "stop"
    return handoff_state.silence(session_id, human_reason(owner), owner=owner, mode=mode, by=by)


def silence(session_id: str, reason: str, *, mode: str = "stop", by: Any = None) -> Any:
    """Pause the assistant with a reason (no owner). `mode`: stop | skip | understand."""
    return handoff_state.silence(session_id, reason, mode=mode, by=by)


def give_back(session_id: str, *, by: Any = None, note: str = "", agent: Any = None) -> Any:
    """The assistant answers again, and resumes the runs the handoff silenced (`resume`)."""
    return resume.unsilence(session_id, by=by, note=note, agent=agent)


def outbound_event(agent: Any = None) -> str | None:
    """The event a human's reply is fed to the engine as (see the module docstring)."""
    configured = conf.falai_settings().get("HUMAN_REPLY_EVENT")
    if configured:
        return str(configured)
    agent = agent or conf.get_agent()
    for name, event in (getattr(agent, "events", None) or {}).items():
        if getattr(event, "direction", None) == "outbound":
            return name
    return None


def reply_as_human(session_id: str, text: str, *, author: str, agent: Any = None) -> HumanReply:
    """Send `text` as the human `author`, keep it in the transcript, and tell the engine."""
    text = (text or "").strip()
    if not text:
        raise HandoffError("a reply needs text")
    load_session(session_id)
    agent = agent or conf.get_agent()
    event = outbound_event(agent)
    key = f"{HUMAN_KIND}:{uuid.uuid4().hex}"
    now = timezone.now()
    with transaction.atomic():
        record = inbox.receive(session_id, {"event": event, "key": key}, agent=agent) if event else None
        row = outbox.outbox_row(session_id, text=text, emission=key, now=now, kind=HUMAN_KIND,
                                message_key=f"{HUMAN_KIND}:{author}"[:1024],
                                turn_id=record.pk if record is not None else None)
        (item,) = outbox.write_outbox([row])
        hand_over_sends(session_id)
    turn = loop.process(record, agent=agent) if record is not None else None
    return HumanReply(item_id=item.pk, event=event, turn=turn)


def fire_wake_now(session_id: str, key: str, *, agent: Any = None) -> HostResult:
    """Run the wake now instead of at its time. The engine drops a stale one (`changed: false`)."""
    if not key:
        raise HandoffError("a wake needs its key")
    load_session(session_id)
    return loop.handle(session_id, {"wake": key}, agent=agent)


def requeue_wakes(session_id: str, *, agent: Any = None) -> dict[str, int]:
    """Rebuild this conversation's wakes from `agent.pending_wakes` (safe to run twice)."""
    load_session(session_id)
    return requeue.requeue_wakes(session_ids=[session_id], agent=agent)
