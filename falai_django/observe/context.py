"""Which conversation and turn this thread works for.

The host enters a scope around each turn (`turn_scope`) and each conversation's sends
(`scope_for`); `observe.logs` puts the scope's ids on every log record made meanwhile.
While a turn's scope is current, so is its trace span (`observe.tracing`): model calls and sends
made inside are its children.
The scope is a mutable object in a context variable: the model calls a turn makes (on this
thread, or on another with a copied context) add their time to it, which is how the turn's host
time is told apart from the model's (`falai_turn_duration_seconds`).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from falai_django.observe import tracing


@dataclass
class Scope:
    """One turn (or one conversation's sends) in progress."""

    conversation_id: str
    record: Any = None  # the turn's run-log row (its id is read when a line is logged: set once saved)
    started: float = field(default_factory=time.perf_counter)
    model_s: float = 0.0  # time spent waiting for the model, added by each call
    llm_calls: int = 0  # model calls made (the turn span's count when the turn has no result)
    span: Any = None  # the turn's trace span (observe.tracing), current while the scope is

    @property
    def turn_id(self) -> int | None:
        return getattr(self.record, "pk", None)


CURRENT: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("falai_scope", default=None)


def current() -> Scope | None:
    return CURRENT.get()


@contextlib.contextmanager
def within(scope: Scope) -> Iterator[Scope]:
    """`scope` is the current one until the block ends (scopes stack: a turn run while another
    waits for earlier inputs has its own)."""
    token = CURRENT.set(scope)
    try:
        with tracing.activate(scope.span):
            yield scope
    finally:
        CURRENT.reset(token)


def turn_scope(conversation_id: str, record: Any = None) -> contextlib.AbstractContextManager[Scope]:
    """The scope of one turn, with its trace span started (`host.turns` ends it)."""
    return within(new_turn(conversation_id, record))


def new_turn(conversation_id: str, record: Any = None) -> Scope:
    """A turn's scope, not entered yet, its span started."""
    kind = str(getattr(record, "kind", "") or "")
    return Scope(conversation_id=conversation_id, record=record, span=tracing.start_turn(conversation_id, kind))


def scope_for(conversation_id: str) -> contextlib.AbstractContextManager[Scope]:
    """The conversation's scope for work outside a turn (its sends; no turn id): the current one
    when it is this conversation's already (a send right after its turn keeps the turn's id)."""
    scope = CURRENT.get()
    if scope is not None and scope.conversation_id == conversation_id:
        return contextlib.nullcontext(scope)
    return within(Scope(conversation_id=conversation_id))


def waited(seconds: float) -> None:
    """Time a turn spent waiting on a service that is not the model (a channel downloading a
    customer's voice note): the network's, not the host's, like the model's own."""
    scope = CURRENT.get()
    if scope is not None:
        scope.model_s += seconds


def model_called(provider: Any, output: Any, error: BaseException | None, seconds: float) -> None:
    """`llm.calling`'s observer: the call's time belongs to the model, not the host."""
    scope = CURRENT.get()
    if scope is not None:
        scope.model_s += seconds
        scope.llm_calls += 1
