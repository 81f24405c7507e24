"""The host: the turn pipeline around the pure engine, and its public functions (the README's API).

An input travels: `inputs` (checked) → `inbox` (its durable row) → `turns` (load, `turn()`,
replay on conflict) → `writer` (one transaction: session, transcript, outbox, wakes, run log)
→ `jobs` (hand the sends and wakes over) → `delivery` (the sender, in order) and `wakes` (the
dispatcher fires them later).

- `inputs`         one validated turn input (`parse_turn_input`, `InputError`); the handoff in force
                   as the turn's `silenced` (`handoff_of`, `silenced_for`)
- `inbox`          the durable inbox and run log: `receive`, `HostResult`, park / fail / retry
- `turns`          running a turn: `handle`, `stream`, `process`; the load statement
- `writer`         the one writer of a turn (one statement on PostgreSQL)
- `outbox`         outbox rows (turns and human replies), emission and idempotency keys
- `jobs`           the one place that queues django-q2 tasks or NOTIFYs the sender
- `delivery`       sending the outbox: the send lock, order, `after_ms`, retries, the sweep
- `sandbox`        the playground's conversations never reach `FALAI["SENDER"]`
- `wakes`          the dispatcher (due wakes → tasks, the NOTIFY sender pool); `requeue_wakes`
- `conversations`  the one read model people see a conversation through; the list's status rules
- `silencing`      the handoff's one write path: `silence`, `take_over`, `give_back` (`unsilence`),
                   which resumes the runs the handoff silenced; `desk_rows` its markers and the
                   desk's assignment
- `erasure`        erasing a conversation everywhere with an audit row (`erase`, `audit_hash`)
- `retention`      deleting what `FALAI["RETENTION"]` no longer keeps (`purge`), in short batches

`host/` imports `models/`, `engine/`, `stores/`, `channels/`, the SENDER contract (`sending`) and
the settings; it never imports a domain above it (`handoff/`, `flows/`, `admin/`, `playground/`)
nor an entry point, not even inside a function or by a dotted path. The handoff's write path
lives here rather than in `handoff/` because the turn pipeline and the facade need it and it needs
only the host (docs/DECISIONS.md H13); `handoff/` exports the same functions.
"""

from __future__ import annotations

from typing import Any

from falai_django.conf import agent_now
from falai_django.host.conversations import read_conversation, session_state
from falai_django.host.erasure import ConversationBusyError, audit_hash, erase
from falai_django.host.inbox import HostResult, receive, retry_delay_s
from falai_django.host.inputs import (
    HANDOFF_MODES,
    INPUT_KINDS,
    InputError,
    TurnInput,
    UnknownConversationError,
    handoff_of,
    parse_turn_input,
    silenced_for,
)
from falai_django.host.outbox import emission_key, idempotency_key
from falai_django.host.retention import purge
from falai_django.host.silencing import give_back as unsilence
from falai_django.host.silencing import silence
from falai_django.host.turns import (
    context_for,
    handle,
    load_history,
    load_session_and_history,
    process,
    process_record,
    stream,
)
from falai_django.host.wakes import requeue_wakes

__all__ = [
    "HANDOFF_MODES", "INPUT_KINDS", "ConversationBusyError", "HostResult", "InputError", "TurnInput", "UnknownConversationError",
    "agent_now", "audit_hash", "context_for", "emission_key", "erase", "handle", "handle_event", "handle_message", "handle_start",
    "handle_wake", "handoff_of", "idempotency_key", "load_history", "load_session_and_history",
    "parse_turn_input", "process", "process_record", "purge", "read_conversation", "receive", "requeue_wakes",
    "retry_delay_s", "session_state", "silence", "silenced_for", "stream", "unsilence",
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
