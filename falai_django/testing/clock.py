"""`fake_clock`: a clock the test moves by hand (persistence-and-LLM note §3.1).

    clock = fake_clock("2026-09-20T10:00:00Z")
    agent = f.agent(..., clock=clock)
    clock.advance("24h")          # or milliseconds: clock.advance(90_000)
    clock.set("2026-09-22T09:00:00.000Z")

Calling the clock (or `clock.now()`) gives the current instant as an aware UTC datetime.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from falai_django.engine.durations import parse_duration
from falai_django.engine.jstime import UTC, to_iso, try_parse_iso

__all__ = ["FakeClock", "fake_clock"]


def _instant(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    parsed = try_parse_iso(value) if isinstance(value, str) else None
    if parsed is None:
        raise ValueError(
            # the upstream text, verbatim (persistence note §3.1)
            f'[fakeClock] "{value}" is not a date: Date.parse cannot read it. '
            'Pass ISO text, e.g. "2026-09-20T10:00:00.000Z".'
        )
    return parsed


class FakeClock:
    """A zero-argument callable returning the current (fake) instant, plus `advance` and `set`."""

    __slots__ = ("_now",)

    def __init__(self, start: str | datetime) -> None:
        self._now = _instant(start)

    def __call__(self) -> datetime:
        return self._now  # datetimes are immutable: handing out the same one is a copy

    def now(self) -> datetime:
        """The current instant (same as calling the clock)."""
        return self._now

    def advance(self, by: str | int | float | timedelta) -> datetime:
        """Move forward by a duration (`"24h"`), milliseconds (added as given) or a timedelta."""
        if isinstance(by, timedelta):
            step = by
        elif isinstance(by, str):
            step = timedelta(milliseconds=parse_duration(by, "fake_clock.advance"))
        elif isinstance(by, int | float) and not isinstance(by, bool):
            step = timedelta(milliseconds=by)
        else:
            raise TypeError(f"fake_clock.advance takes a duration, milliseconds or a timedelta, not {by!r}")
        self._now = self._now + step
        return self._now

    def set(self, when: str | datetime) -> datetime:
        """Jump to an absolute instant (ISO text or a datetime)."""
        self._now = _instant(when)
        return self._now

    def iso(self) -> str:
        """The current instant as `toISOString()` text."""
        return to_iso(self._now)

    def __repr__(self) -> str:
        return f"fake_clock({to_iso(self._now)!r})"


def fake_clock(start: str | datetime) -> FakeClock:
    """A clock starting at `start`; pass it as the agent's `clock=`."""
    return FakeClock(start)
