"""`MemoryScheduler`: an in-memory wake queue for tests (persistence-and-LLM note §3.2).

Nothing fires by itself: the test asks for what is due and turns each wake.

    scheduler = MemoryScheduler()
    for entry in r.schedule:
        scheduler.add(session_id, entry)
    clock.advance("24h")
    for wake in scheduler.due(clock.now()):
        agent.turn(session_id=wake.session_id, wake=wake.key, session=store.load(wake.session_id))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from falai_django.engine.jstime import UTC, from_ms, parse_iso, to_iso

__all__ = ["MemoryScheduler", "ScheduledWake"]


@dataclass(frozen=True, slots=True)
class ScheduledWake:
    """A queued wake: the schedule entry's `key`, `at`, `replaces`, and whose session it wakes."""

    session_id: str | None
    key: str
    at: datetime
    replaces: str | None = None

    def __getitem__(self, name: str) -> Any:
        """`wake["key"]`, `wake["at"]`, `wake["replaces"]`: upstream's entries are plain objects."""
        if name in ("key", "at", "replaces", "session_id"):
            return getattr(self, name)
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "at": to_iso(self.at)}
        if self.replaces is not None:
            out["replaces"] = self.replaces
        return out


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, str):
        return parse_iso(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return from_ms(value)
    if callable(value):  # a clock
        return _as_datetime(value())
    raise TypeError(f"expected a datetime, ISO text, epoch ms or a clock, got {value!r}")


def _field(entry: Any, name: str) -> Any:
    if isinstance(entry, Mapping):
        return entry.get(name)
    return getattr(entry, name, None)


class MemoryScheduler:
    """Schedule entries by key, in insertion order; `due(now)` pops what is due, earliest first.

    Entries are kept per session (two sessions may mint the same run key); `replaces` removes
    the superseded wake of the same session.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[str | None, str], ScheduledWake] = {}

    def add(self, session_id: Any, entry: Any = None) -> ScheduledWake:
        """Queue `entry` (a ScheduleEntry or `{key, at, replaces?}`) for `session_id`.

        `add(entry)` alone (upstream's form) queues it without a session id.
        """
        if entry is None:
            session_id, entry = None, session_id
        key = _field(entry, "key")
        if not isinstance(key, str):
            raise TypeError(f"a schedule entry needs a text key, got {entry!r}")
        replaces = _field(entry, "replaces")
        if replaces is not None:
            self._entries.pop((session_id, replaces), None)
        wake = ScheduledWake(session_id, key, _as_datetime(_field(entry, "at")), replaces)
        self._entries.pop((session_id, key), None)  # a re-added key moves to the end
        self._entries[(session_id, key)] = wake
        return wake

    def remove(self, key: str, session_id: str | None = None) -> bool:
        """Drop the wake with `key` (of every session unless `session_id` is given)."""
        doomed = [k for k in self._entries if k[1] == key and (session_id is None or k[0] == session_id)]
        for k in doomed:
            del self._entries[k]
        return bool(doomed)

    def due(self, now: datetime | str | int | Callable[[], datetime]) -> list[ScheduledWake]:
        """Remove and return every wake with `at <= now`, earliest first (ties in insertion order)."""
        limit = _as_datetime(now)
        ready = [w for w in self._entries.values() if w.at <= limit]
        ready.sort(key=lambda w: w.at)
        for wake in ready:
            del self._entries[(wake.session_id, wake.key)]
        return ready

    def next_at(self) -> datetime | None:
        """When the earliest wake is due, or None when nothing is queued."""
        return min((w.at for w in self._entries.values()), default=None)

    def entries(self) -> list[ScheduledWake]:
        """Everything queued, in insertion order (nothing removed)."""
        return list(self._entries.values())

    def clear(self) -> None:
        self._entries.clear()

    @property
    def size(self) -> int:
        return len(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[ScheduledWake]:
        return iter(list(self._entries.values()))

    def __contains__(self, key: object) -> bool:
        return any(k[1] == key for k in self._entries)
