"""`turn()`: one input in, the new state and what to send out (engine-turn.md).

Read top to bottom, a turn is the spec's eight phases, one module each, all acting on one
per-turn `TurnState`:

    1. load        TurnState.load(...)    state.py       the working session (or a fresh one)
    2. ingest      ingest(state)          ingest.py      dedupe, wakes, replies, events, starts
    3. understand  understand(...)        understand.py  ≤ 1 call, message turns only (raises ProviderError)
    4. decide      decide(state, ...)     decide.py      routing, mentions, fields, branches
    5. advance     advance(state)         advance.py     moves every run (steps.py, runs.py); picks one speaker
    6. speak       speak(...)             speak.py       1 call (+1 per tool round); never raises
    7. settle      settle(state, ...)     settle.py      asked counting, retries, silence wakes
    8. finish      finish(state)          finish.py      TurnResult with `changed`

`turn_stream` runs the same phases and yields the speak call's text deltas as they arrive;
its final `{"done": True, "result": ...}` chunk is the only authoritative output.
The async twins run the sync turn in a worker thread (the engine is CPU-light; the
provider's own I/O happens there too).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import aclosing
from datetime import datetime
from typing import Any

from falai_django.llm import recording
from falai_django.llm.calling import HOME_LOOP
from falai_django.llm.errors import classify_error
from falai_django.llm.pump import iterate_in_thread

from .advance import advance
from .compaction import compact_history
from .decide import decide
from .errors import ProviderError
from .fields import UNSET
from .finish import finish
from .ingest import ingest
from .jstime import to_iso, try_parse_iso
from .pending import pending_wakes as _pending_wakes
from .results import TurnResult
from .session import Session
from .settle import settle
from .speak import speak, speak_rounds
from .state import TurnState
from .types import Understanding
from .understand import understand, understand_request

__all__ = ["aturn", "aturn_stream", "pending_wakes", "turn", "turn_stream"]

_KINDS = ("message", "wake", "event", "start")
_KNOWN = frozenset({"session_id", "message", "id", "at", "wake", "event", "payload", "key", "hop", "start",
                    "session", "history", "context", "silenced", "anchors", "claims"})


def _input_kind(kw: Mapping[str, Any]) -> str:
    unknown = sorted(set(kw) - _KNOWN)
    if unknown:  # a typo (sessionId, silence=...) must not pass silently
        raise TypeError(f"turn() got unexpected keyword argument(s): {', '.join(unknown)}.")
    given = [k for k in _KINDS if kw.get(k) is not None]
    if len(given) != 1:
        raise TypeError(
            "turn() takes exactly one input kind: message=..., wake=..., event=... or start={...}; "
            f"got {', '.join(given) if given else 'none'}."
        )
    return given[0]


def _what(kind: str, kw: Mapping[str, Any], now_iso: str) -> dict[str, Any]:
    """The narrowed input (§1.4), with the turn's trigger key under "key"."""
    if kind == "message":
        text = kw["message"]
        if not isinstance(text, str):
            raise TypeError("turn(message=...) takes the customer's text as a string.")
        at = kw.get("at")
        if isinstance(at, datetime) or (isinstance(at, int | float) and not isinstance(at, bool)):
            at = to_iso(at)  # a datetime, or epoch milliseconds
        elif isinstance(at, str):
            parsed = try_parse_iso(at)
            at = to_iso(parsed) if parsed is not None else at  # one canonical form in the blob
        else:
            at = now_iso
        message_id = kw.get("id")
        if message_id is not None:
            message_id = str(message_id)  # `session.inputs` holds text ids
        return {"text": text, "id": message_id, "at": at, "key": message_id if message_id is not None else at}
    if kind == "wake":
        return {"key": str(kw["wake"])}
    if kind == "event":
        key = kw.get("key")
        if not isinstance(key, str) or not key:
            raise TypeError("turn(event=...) needs key=...: the host's idempotency key for this event.")
        payload = kw.get("payload")
        return {"name": kw["event"], "payload": UNSET if payload is None else copy.deepcopy(payload), "key": key,
                "hop": int(kw.get("hop") or 0)}
    start = kw["start"]
    if not isinstance(start, Mapping) or not isinstance(start.get("flow"), str) or not start.get("key"):
        raise TypeError('turn(start=...) takes {"flow": id, "key": str, "input"?: ..., "hop"?: int}.')
    value = start.get("input")  # copied: the session must not share the host's objects
    return {"flow": start["flow"], "input": UNSET if value is None else copy.deepcopy(value), "key": str(start["key"]),
            "hop": int(start.get("hop") or 0)}


def _session_of(value: Any, session_id: str) -> Session | None:
    if value is None:
        return None
    if isinstance(value, Session):
        return value
    if isinstance(value, Mapping):
        return Session.from_json(dict(value))
    raise TypeError("session must be a Session (or its JSON dict), or None on a first turn.")


def load(agent: Any, kw: dict[str, Any]) -> tuple[TurnState, list[Any]]:
    """Phase 1: the input checked, the history compacted, the per-turn state built."""
    session_id = kw.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise TypeError("turn() needs session_id=...: the conversation's id (a phone number, a chat id).")
    kind = _input_kind(kw)
    now = agent.clock()
    recording.note_clock(now)
    now_iso = to_iso(now)
    session = _session_of(kw.get("session"), session_id)
    history = kw.get("history")
    if history is None:
        history = (session.history if session is not None else None) or []
    history = list(history)
    calls, usage = 0, None
    if agent.compaction is not None and history:
        history, calls, usage = compact_history(agent, history, kw.get("context"))
    state = TurnState.load(
        agent,
        session_id=session_id,
        kind=kind,
        what=_what(kind, kw, now_iso),
        session=session,
        context=kw.get("context"),
        history=history,
        silenced=kw.get("silenced"),
        anchors=kw.get("anchors"),
        claims=kw.get("claims"),
        now=now,
    )
    state.llm_calls += calls
    state.usage = usage
    return state, history


def understood(state: TurnState, history: list[Any]) -> Understanding | None:
    """Phase 3: the understand call, when the message needs one; any failure is a ProviderError."""
    request = understand_request(state)
    try:
        return understand(state, request, history)
    except ProviderError:
        raise
    except Exception as exc:  # ruling 9: anything else is classified into a ProviderError
        raise classify_error(exc, getattr(state.agent.provider, "name", "provider")) from exc


def turn(agent: Any, **kw: Any) -> TurnResult:
    """Run one turn (keyword arguments as README.md shows). Raises ProviderError only when the
    understand call fails; nothing was applied then, so the host retries the same input."""
    state, history = load(agent, kw)
    ingest(state)
    decide(state, understood(state, history))
    speaker = advance(state)
    outcome = speak(state, speaker, history) if speaker is not None else None
    settle(state, speaker, outcome)
    return finish(state)


def turn_stream(agent: Any, **kw: Any) -> Iterator[dict[str, Any]]:
    """The same turn, yielding `{"delta": str}` while the speaker writes, then one
    `{"done": True, "result": TurnResult}`. Only the final result is authoritative."""
    state, history = load(agent, kw)
    ingest(state)
    decide(state, understood(state, history))
    speaker = advance(state)
    outcome = None
    if speaker is not None:
        rounds = speak_rounds(state, speaker, history, stream=True)
        while True:
            try:
                delta = next(rounds)
            except StopIteration as stop:
                outcome = stop.value
                break
            yield {"delta": delta}
    settle(state, speaker, outcome)
    yield {"done": True, "result": finish(state)}


async def aturn(agent: Any, **kw: Any) -> TurnResult:
    """See turn(). Async handlers and the provider's async calls run back on this loop."""
    token = HOME_LOOP.set(asyncio.get_running_loop())
    try:
        return await asyncio.to_thread(turn, agent, **kw)
    finally:
        HOME_LOOP.reset(token)


async def aturn_stream(agent: Any, **kw: Any) -> AsyncIterator[dict[str, Any]]:
    """See turn_stream(). The sync stream runs in a worker thread; chunks cross over a queue."""
    token = HOME_LOOP.set(asyncio.get_running_loop())
    context = contextvars.copy_context()
    HOME_LOOP.reset(token)
    chunks = iterate_in_thread(lambda: turn_stream(agent, **kw), context=context)
    async with aclosing(chunks):
        async for chunk in chunks:
            yield chunk


def pending_wakes(agent: Any, session: Any = None, context: Any = None, anchors: Any = None, claims: Any = None,
                  **kw: Any) -> list[Any]:
    """Every wake a saved session waits on (§6). Changes nothing, spends no model call."""
    return _pending_wakes(agent, session=session, context=context, anchors=anchors, claims=claims,
                          silenced=kw.get("silenced"))
