"""What a turn took from the outside world, noted while it runs, so it can be replayed.

    with recording.tape() as taped:
        result = agent.turn(...)
    taped.clock, taped.replies, taped.effects

A turn is pure but for its clock, its model calls and what its actions and tools answered. The
engine notes each of them here (`note_clock`, `note_reply`, `note_effect`) when a tape is
running in the current context and does nothing otherwise (one context-variable read). The host
keeps the tape on the turn's run-log row; `falai_django.replay` plays it back.

Everything noted is plain JSON (`plain`): a value JSON cannot hold is written as its text.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

__all__ = ["Tape", "current", "note_clock", "note_effect", "note_reply", "plain", "schema_of", "tape"]

_TAPE: contextvars.ContextVar[Tape | None] = contextvars.ContextVar("falai_tape", default=None)


@dataclass
class Tape:
    """One turn's outside answers, in the order they came."""

    clock: datetime | None = None  # the engine's `now` for the turn (its first clock read)
    replies: list[dict[str, Any]] = field(default_factory=list)  # {"schema", "reply"} | {"schema", "error"}
    effects: list[dict[str, Any]] = field(default_factory=list)  # {"action", ...} | {"tool", ...}
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # tools run in threads


@contextlib.contextmanager
def tape(taped: Tape | None = None) -> Iterator[Tape]:
    """Note what the turn run inside takes from outside, on `taped` (default: a fresh tape)."""
    taped = taped if taped is not None else Tape()
    token = _TAPE.set(taped)
    try:
        yield taped
    finally:
        _TAPE.reset(token)


def current() -> Tape | None:
    return _TAPE.get()


def note_clock(now: datetime) -> None:
    taped = _TAPE.get()
    if taped is not None and taped.clock is None:
        taped.clock = now


def schema_of(request: Any) -> str:
    """The schema a model call answers: "understand", "speak", or "summary" (compaction's call,
    which asks for no schema)."""
    parameters = getattr(request, "parameters", None)
    name = getattr(parameters, "schema_name", None)
    return name if isinstance(name, str) and name else "summary"


def note_reply(request: Any, output: Any = None, error: BaseException | None = None) -> None:
    """A model call's answer (a `GenerateOutput`) or its failure, under the schema it answered."""
    taped = _TAPE.get()
    if taped is None:
        return
    entry: dict[str, Any] = {"schema": schema_of(request)}
    if error is not None:
        entry["error"] = {"kind": getattr(error, "kind", None) or "unknown",
                          "message": str(error) or type(error).__name__}
    else:
        entry["reply"] = {"message": getattr(output, "message", ""),
                          "structured": plain(getattr(output, "structured", None)),
                          "metadata": plain(getattr(output, "metadata", None) or {})}
    with taped._lock:
        taped.replies.append(entry)


def note_effect(entry: Mapping[str, Any]) -> None:
    """What an action or a tool answered: `{"action": name, "result", "set"}` or `{"tool": name,
    "text", "data"}`."""
    taped = _TAPE.get()
    if taped is None:
        return
    with taped._lock:
        taped.effects.append(plain(dict(entry)))


def plain(value: Any) -> Any:
    """`value` as plain JSON data: mappings with text keys, lists, text, numbers, booleans, None;
    dates as ISO text; anything else as its text."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    dump = getattr(value, "model_dump", None)  # a pydantic model (a Session in a context, say)
    if callable(dump):
        try:
            return plain(dump(mode="json"))
        except Exception:  # noqa: BLE001 - its text will do
            pass
    return str(value)
