"""`pending_wakes`: every wake a saved session waits on (engine-turn.md §6).

A pure query for rebuilding a lost queue (a flushed Redis, sessions lifted from 3.x): the
parked runs' own wakes, then the silence wakes counted from `lastAssistantAt`, judged on the
context and claims passed in. No `replaces`, no model call, nothing changed.
"""

from __future__ import annotations

from typing import Any

from .jstime import from_ms, iso_to_ms, parse_iso
from .keys import silence_wake
from .results import ScheduleEntry
from .session import Session
from .settle import silence_wakes
from .state import TurnState


def pending_wakes(agent: Any, *, session: Any, context: Any = None, anchors: Any = None, claims: Any = None,
                  silenced: Any = None) -> list[ScheduleEntry]:
    if session is None:
        return []
    if not isinstance(session, Session):
        session = Session.from_json(dict(session))
    state = TurnState.load(agent, session_id=session.id, kind="wake", what={"key": ""}, session=session,
                           context=context, history=None, silenced=silenced, anchors=anchors, claims=claims,
                           now=agent.clock())
    out: list[ScheduleEntry] = []
    for run in state.session.runs:
        waiting = run.waiting
        if run.status == "waiting" and waiting is not None and waiting.key and waiting.until:
            out.append(ScheduleEntry.model_construct(key=waiting.key, at=parse_iso(waiting.until), replaces=None))
    anchor_ms = iso_to_ms(state.session.last_assistant_at or "")
    if anchor_ms is None:  # no instant to count silence from: silence_wakes() finds none either
        return out
    for flow, at_ms in silence_wakes(state):
        key = silence_wake(flow.id, state.session.id, anchor_ms)
        out.append(ScheduleEntry.model_construct(key=key, at=from_ms(at_ms), replaces=None))
    return out
