"""What a person does to a conversation besides handing it over (`host.silencing` has that):

- `reply_as_human(session_id, text, author=...)` — the text goes out through the sender, is
  kept in the transcript as the human's (`role="assistant"`, `kind="human"`,
  `message_key="human:<author>"`), and is fed to the engine as the agent's outbound event
  (engine-authoring §6.2: it sets `lastAssistantAt`, so silence timers re-arm). The event is
  `FALAI["HUMAN_REPLY_EVENT"]` when set, else the first event the agent registers with
  `direction="outbound"`; with neither, the reply is still sent and stored, and the result
  says no event was fed.
- `fire_wake_now(session_id, key)` — run `turn(wake=key)` now (a stale key changes nothing).

The admin, the desk and the API call these; each refuses an unknown conversation with
`HandoffError`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from falai_django import conf
from falai_django.host import inbox, outbox, turns
from falai_django.host.inbox import HostResult
from falai_django.host.jobs import hand_over_sends
from falai_django.host.silencing import HandoffError

HUMAN_KIND = "human"  # History.kind of a message a person wrote (the engine's are 'ai' | 'verbatim')


@dataclass
class HumanReply:
    """What `reply_as_human` did: the stored item, and the outbound event turn (None without one)."""

    item_id: int
    event: str | None
    turn: HostResult | None


def load_session(session_id: str) -> Any:
    """The conversation's session; raises `InvalidSessionError` for a broken blob (never fixed)."""
    session = conf.get_store().load(session_id)
    if session is None:
        raise HandoffError(f"conversation {session_id!r} does not exist")
    return session


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
        record = inbox.receive(session_id, {"event": event, "key": key}, agent=agent, claim=True) if event else None
        row = outbox.outbox_row(session_id, text=text, emission=key, now=now, kind=HUMAN_KIND,
                                message_key=f"{HUMAN_KIND}:{author}"[:1024],
                                turn_id=record.pk if record is not None else None)
        (item,) = outbox.write_outbox([row])
        hand_over_sends(session_id)
    turn = turns.process(record, agent=agent) if record is not None else None
    return HumanReply(item_id=item.pk, event=event, turn=turn)


def fire_wake_now(session_id: str, key: str, *, agent: Any = None) -> HostResult:
    """Run the wake now instead of at its time. The engine drops a stale one (`changed: false`)."""
    if not key:
        raise HandoffError("a wake needs its key")
    load_session(session_id)
    return turns.handle(session_id, {"wake": key}, agent=agent)

