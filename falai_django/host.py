"""The host's public functions, in one place (the README's API). Each lives in its own module:

- `inputs`   one validated turn input (`parse_turn_input`, `InputError`)
- `inbox`    the durable inbox and run log: `receive`, `HostResult`, park / retry
- `loop`     the turn loop and its hand-off: `handle`, `stream`, `process`
- `writer`   the one writer of a turn (one transaction; one statement on PostgreSQL)
- `outbox`   outbox rows (turns and human replies), emission and idempotency keys
- `silence`  the handoff state: `silence`, `handoff_of`; `resume.unsilence` gives back and resumes
- `readmodel` what the API and admin show: `session_state`
- `requeue`  rebuilding wakes: `requeue_wakes`

The entry points (DRF views, django-q2 `tasks`, the admin, management commands) call these;
nothing here imports them.
"""

from __future__ import annotations

from typing import Any

from .conf import agent_now
from .inbox import HostResult, receive, retry_delay_s
from .inputs import HANDOFF_MODES, INPUT_KINDS, InputError, TurnInput, parse_turn_input
from .loop import context_for, handle, load_history, load_session_and_history, process, process_record, stream
from .outbox import emission_key, idempotency_key
from .readmodel import session_state
from .requeue import requeue_wakes
from .resume import unsilence  # gives back and resumes what the handoff silenced
from .silence import UnknownConversationError, handoff_of, silence, silenced_for

__all__ = [
    "HANDOFF_MODES", "INPUT_KINDS", "HostResult", "InputError", "TurnInput", "UnknownConversationError",
    "agent_now", "context_for", "emission_key", "handle", "handle_event", "handle_message", "handle_start",
    "handle_wake", "handoff_of", "idempotency_key", "load_history", "load_session_and_history",
    "parse_turn_input", "process", "process_record", "receive", "requeue_wakes", "retry_delay_s",
    "session_state", "silence", "silenced_for", "stream", "unsilence",
]



def handle_message(session_id: str, text: str, *, id: str | None = None, at: str | None = None,
                   **kw: Any) -> HostResult:
    return handle(session_id, {"message": text, "id": id, "at": at}, **kw)


def handle_wake(session_id: str, key: str, **kw: Any) -> HostResult:
    return handle(session_id, {"wake": key}, **kw)


def handle_event(session_id: str, event: str, *, key: str, payload: Any = None, hop: int | None = None,
                 **kw: Any) -> HostResult:
    return handle(session_id, {"event": event, "key": key, "payload": payload, "hop": hop}, **kw)


def handle_start(session_id: str, flow: str, *, key: str, input: Any = None, hop: int | None = None,
                 **kw: Any) -> HostResult:
    return handle(session_id, {"start": {"flow": flow, "key": key, "input": input, "hop": hop}}, **kw)
