"""Give-back that never loses a lead: resume what the handoff silenced.

While a conversation is silenced the engine does what the spec says: a run that reaches a fresh
talk or say step ends there (`skipped`, code `silenced`, detail = the reason). With
`understand` the customer's answers keep landing, so the triage walks past its asking step and
ends at the next one; a wake or an event can do the same in every mode. Nothing would ever ask
the rest: the flow's trigger is claimed, so after the give-back the next message gets the
catch-all reply.

`unsilence` clears the handoff and, for every run that ended with a `silenced` line while the
handoff was in force (since it began, through changes of owner or form), starts its flow again
by hand (`turn(start=...)`) with a key derived from the handoff and the run: known fields are
skipped (`already-known`) and the next missing one is asked at once. A replayed give-back mints
the same keys, so a start the engine already took is refused as `already-claimed` and nothing
is asked twice. The starts are written to the durable inbox in the same transaction as the
give-back, so a crash between the two leaves them for the retry sweep, not lost. Runs started
by a silence trigger are not resumed: their premise (the customer went quiet) is stale by then.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction

from . import inbox, loop
from . import silence as handoff_state
from .engine.jstime import try_parse_iso
from .inbox import HostResult
from .models import TurnRecord
from .stores.django import DjangoStore

RESUME_PREFIX = "resume"


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


def give_back(session_id: str, *, by: Any = None, note: str = "", agent: Any = None) -> tuple[Any, list[HostResult]]:
    """Give the conversation back and resume the runs its handoff silenced: the saved session and
    the resumed starts' results (what they said is in their `result.messages`).

    `UnknownConversationError` for an unknown id. Without a handoff in force this is
    `silence.unsilence` alone.
    """
    store = DjangoStore()
    session = store.load(session_id)
    handoff = handoff_state.handoff_of(session)
    runs = resumable_runs(session_id, handoff) if handoff else []
    with transaction.atomic(using=store.db_alias()):  # the database the session is saved to
        saved = handoff_state.unsilence(session_id, by=by, note=note)
        records = []
        for run in runs:
            start: dict[str, Any] = {"flow": run["flowId"], "key": resume_key(handoff, run)}
            if run.get("input") is not None:
                start["input"] = run["input"]
            records.append(inbox.receive(session_id, {"start": start}, agent=agent))
    results = [loop.process(record, agent=agent) for record in records]
    if any(result.changed for result in results):
        saved = store.load(session_id) or saved
    return saved, results


def unsilence(session_id: str, *, by: Any = None, note: str = "", agent: Any = None) -> Any:
    """`host.unsilence`: give back (see `give_back`) and return the saved session."""
    return give_back(session_id, by=by, note=note, agent=agent)[0]
