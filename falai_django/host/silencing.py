"""The handoff of a conversation to a human and back: its state and its one write path.

The state lives in the session itself (`session.metadata["handoff"] = {reason, mode, at, owner?,
since?}`), so it travels with the row and is saved by compare-and-swap like every turn; the host
reads it (`host.inputs.handoff_of` / `silenced_for`) to give each turn its `silenced`. Three
operations write it, and every caller (the admin, the desk, the API, `falai_chat`) uses them:

- `silence(session_id, reason, owner=None, mode="stop")` pauses the assistant (`mode` is the form
  the turn gets: "stop", "skip" or "understand");
- `take_over(session_id, owner, understand=None)` is a silence whose reason is `human: <owner>`;
- `give_back(session_id)` clears the handoff and resumes what it silenced (below). It is
  `host.unsilence`.

Each leaves a marker in the transcript and keeps the desk's assignment in step (`desk_rows`).

They live in `host/`, not in `handoff/`, so that the host's facade can name them (`host.silence`,
`host.unsilence`) without the host importing a domain; `falai_django.handoff` exports the same
functions (docs/DECISIONS.md H13).

Resuming on give-back, so that no lead is lost. While a conversation is silenced the engine does
what the spec says: a run that reaches a fresh talk or say step ends there (`skipped`, code
`silenced`, detail = the reason). With `understand` the customer's answers keep landing, so the
triage walks past its asking step and ends at the next one; a wake or an event can do the same
in every mode. Nothing would ever ask the rest: the flow's trigger is claimed, so after the
give-back the next message gets the catch-all reply.

`give_back` clears the handoff and, for every run that ended with a `silenced` line while the
handoff was in force (since it began, through changes of owner or form), starts its flow again
by hand (`turn(start=...)`) with a key derived from the handoff and the run: known fields are
skipped (`already-known`) and the next missing one is asked at once. A replayed give-back mints
the same keys, so a start the engine already took is refused as `already-claimed` and nothing
is asked twice. The starts are written to the durable inbox in the same transaction as the
give-back, so a crash between the two leaves them for the retry sweep, not lost. Runs started
by a silence trigger are not resumed: their premise (the customer went quiet) is stale by then.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction

from falai_django import conf
from falai_django.engine.errors import SessionConflictError
from falai_django.engine.jstime import to_iso, try_parse_iso
from falai_django.host import desk_rows, inbox, turns
from falai_django.host.inbox import HostResult
from falai_django.host.inputs import HANDOFF_MODES, InputError, UnknownConversationError, handoff_of
from falai_django.models import TurnRecord
from falai_django.models.sql import HANDOFF_KEY

HUMAN_REASON_PREFIX = "human: "
RESUME_PREFIX = "resume"


class HandoffError(ValueError):
    """The operation cannot run on this conversation (its message says why)."""


def _update_metadata(session_id: str, change: Callable[[dict[str, Any]], object]) -> Any:
    """Change `session.metadata` by compare-and-swap, replaying on a conflict."""
    store = conf.get_store()
    expected = 0
    for _ in range(conf.get("MAX_REPLAYS") + 1):
        session = store.load(session_id)  # a broken row raises InvalidSessionError: never replaced
        if session is None:
            raise UnknownConversationError(session_id)
        expected = session.version
        metadata = dict(session.metadata or {})
        change(metadata)
        try:
            return store.save(session.model_copy(update={"metadata": metadata}), expected)
        except SessionConflictError:
            continue
    raise SessionConflictError(session_id, expected, None)


def silence(session_id: str, reason: str, *, owner: str | None = None, mode: str = "stop", by: Any = None) -> Any:
    """Hand the conversation to a human (or pause it): every later input is `silenced`.

    The conversation must exist (`UnknownConversationError` otherwise; nothing is created).
    `mode` picks the form passed to the turn: "stop" (the plain string: a fresh talk step ends
    its run), "skip" (`{reason, skip: True}`: talk and say steps are skipped, `do` steps still
    run) or "understand" (`{reason, understand: True}`: fields keep landing).
    """
    if mode not in HANDOFF_MODES:
        raise InputError(f"mode must be one of {', '.join(HANDOFF_MODES)}", "mode")
    reason = (reason or "").strip()
    if not reason:
        raise InputError("a silence needs a reason", "reason")
    handoff = {"reason": reason, "mode": mode, "at": to_iso(datetime.now(UTC))}
    if owner:
        handoff["owner"] = owner
    with transaction.atomic():
        saved = _update_metadata(session_id, lambda metadata: metadata.__setitem__(
            HANDOFF_KEY, _continued(metadata.get(HANDOFF_KEY), handoff)))
        owner_user = desk_rows.user_named(owner)
        if owner_user is not None:
            desk_rows.set_assignee(session_id, owner_user)
        kind = "take_over" if owner else "silence"
        said = mode if owner and owner in reason else f"{reason} · {mode}"  # not "alice · human: alice · stop"
        # a take-over is marked with who owns it now (an assignment adds who assigned it)
        author = (owner_user or by) if owner else by
        desk_rows.mark(session_id, kind, by=author, author_name=owner or "", text=said)
    return saved


def take_over(session_id: str, owner: str, *, understand: bool | None = None, by: Any = None) -> Any:
    """A human owns the conversation: later turns are silenced with `human: <owner>`.

    With `understand` the understand call still runs, so fields keep landing while the assistant
    says nothing; its default is `FALAI["HANDOFF_UNDERSTAND"]` (False). The choice is stored per
    conversation (the handoff's `mode`), so each take-over may choose.
    """
    if not owner:
        raise HandoffError("a take-over needs the owner's name")
    if understand is None:
        understand = understand_by_default()
    return silence(session_id, human_reason(owner), owner=owner, mode="understand" if understand else "stop", by=by)


def understand_by_default() -> bool:
    """Whether a take-over keeps the understand call when the operator does not say."""
    return bool(conf.get("HANDOFF_UNDERSTAND"))


def human_reason(owner: str) -> str:
    return f"{HUMAN_REASON_PREFIX}{owner}"


def _continued(current: Any, handoff: dict[str, Any]) -> dict[str, Any]:
    """A new owner or form for a handoff already in force keeps when it began (`since`): the
    give-back resumes what was silenced during the whole of it."""
    if isinstance(current, dict) and current.get("reason"):
        return {**handoff, "since": current.get("since") or current.get("at")}
    return handoff


def give_back(session_id: str, *, by: Any = None, note: str = "", agent: Any = None,
              on_resumed: Callable[[HostResult], Any] | None = None) -> Any:
    """Give the conversation back to the agent and resume the runs its handoff silenced; returns the
    saved session (`host.unsilence`). `UnknownConversationError` for an unknown id.

    The give-back marker, the cleared assignment and the resumed starts' inbox rows are written in
    one transaction; the starts then run, and `on_resumed` (if given) sees each one's result (what
    it said is in `result.messages`). Without a handoff in force only the state is cleared.
    """
    store = conf.get_store()
    handoff = handoff_of(store.load(session_id))
    runs = resumable_runs(session_id, handoff) if handoff else []
    was: dict[str, Any] = {}

    def clear(metadata: dict[str, Any]) -> None:
        was.clear()
        was.update(metadata.pop(HANDOFF_KEY, None) or {})

    with transaction.atomic(using=store.db_alias()):  # the database the session is saved to
        saved = _update_metadata(session_id, clear)
        if was:  # back with the assistant: nobody on the desk owns it any more
            desk_rows.set_assignee(session_id, None)
            desk_rows.mark(session_id, "give_back", by=by, text=note)
        started = []
        for run in runs:
            assert handoff is not None  # runs is empty without a handoff in force
            start: dict[str, Any] = {"flow": run["flowId"], "key": resume_key(handoff, run)}
            if run.get("input") is not None:
                start["input"] = run["input"]
            started.append(inbox.receive(session_id, {"start": start}, agent=agent, claim=True))
    changed = False
    for record in started:
        result = turns.process(record, agent=agent)
        changed = changed or result.changed
        if on_resumed is not None:
            on_resumed(result)
    return (store.load(session_id) or saved) if changed else saved


def resumable_runs(session_id: str, handoff: dict[str, Any]) -> list[dict[str, Any]]:
    """The ended runs (their run-log entries) the handoff silenced, oldest first, one per flow."""
    began = handoff.get("since") or handoff.get("at")
    since = try_parse_iso(began) if isinstance(began, str) else None
    records = TurnRecord.objects.filter(conversation_id=session_id).order_by("id").only("ended", "received_at")
    if since is not None:  # a second of slack: the marker's time and the database's clock
        records = records.filter(received_at__gte=since - timedelta(seconds=1))
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        for run in record.ended or []:
            trigger = run.get("trigger") or {}
            if trigger.get("kind") == "silence" or run.get("flowId") in found:
                continue
            # any reason: the owner (and so the reason) may have changed during the handoff
            if any(line.get("code") == "silenced" for line in run.get("outcomes") or []):
                found[run["flowId"]] = run
    return list(found.values())


def resume_key(handoff: dict[str, Any], run: dict[str, Any]) -> str:
    return f"{RESUME_PREFIX}:{handoff.get('since') or handoff.get('at', '')}:{run['id']}"
