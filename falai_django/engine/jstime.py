"""Time the way the upstream blob writes it: JavaScript's `toISOString()` and `Date.parse`.

Every time inside a session, an outcome line or a key is either ISO text in the exact
`toISOString()` form (`2026-09-24T10:00:00.000Z`: UTC, milliseconds, trailing `Z`) or an
integer of epoch milliseconds. Datetimes handed out by this module are timezone-aware UTC.
A naive datetime or a zone-less ISO string is read as UTC (JavaScript would read a zone-less
date-time as local time; a server's local zone must not change keys).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

__all__ = [
    "UTC",
    "from_ms",
    "iso_to_ms",
    "is_iso",
    "ms_to_iso",
    "parse_iso",
    "to_iso",
    "to_ms",
    "try_parse_iso",
    "utc_now",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
# What Date.parse reads that fromisoformat might not: a bare date, a date-time with or without
# seconds / fraction, with `Z`, `+hh:mm`, `+hhmm` or no zone.
_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
    r"\s*(Z|z|[+-]\d{2}(?::?\d{2})?)?$",
    re.ASCII,
)


def utc_now() -> datetime:
    """The wall clock as an aware UTC datetime, truncated to whole milliseconds like a JS Date."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond - now.microsecond % 1000)


def _as_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    if value.tzinfo is not UTC:
        return value.astimezone(UTC)
    return value


def to_iso(value: datetime | int | float) -> str:
    """`Date.prototype.toISOString()`: `YYYY-MM-DDTHH:MM:SS.mmmZ`. Numbers are epoch ms."""
    if isinstance(value, datetime):
        return _as_utc(value).isoformat(timespec="milliseconds")[:23] + "Z"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"to_iso takes a datetime or epoch milliseconds, not {type(value).__name__}")
    return ms_to_iso(value)


def to_ms(value: datetime) -> int:
    """Epoch milliseconds of a datetime (`Date.getTime()`); naive means UTC."""
    return (_as_utc(value) - EPOCH) // _ONE_MS


def from_ms(ms: int | float) -> datetime:
    """An aware UTC datetime for epoch milliseconds (fractions floored, as `new Date(ms)`)."""
    return EPOCH + timedelta(milliseconds=int(ms // 1))


def ms_to_iso(ms: int | float) -> str:
    return from_ms(ms).isoformat(timespec="milliseconds")[:23] + "Z"


def try_parse_iso(text: object) -> datetime | None:
    """`Date.parse` for ISO text: an aware UTC datetime at millisecond precision, or None."""
    if not isinstance(text, str):
        return None
    if len(text) == 24 and text[23] == "Z" and text[10] == "T":  # the canonical form: fast path
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
        return parsed if parsed.tzinfo is UTC else parsed.astimezone(UTC)
    match = _ISO.match(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        if hour is None:  # a bare date is UTC midnight in JS too
            return datetime.combine(date(int(year), int(month), int(day)), datetime.min.time(), UTC)
        millis = int((fraction or "0")[:3].ljust(3, "0"))
        parsed = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0),
                          millis * 1000, tzinfo=UTC)
    except ValueError:
        return None
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
        try:
            parsed -= sign * offset
        except OverflowError:  # before year 1 or after 9999 in UTC: no date, as JS's range ends too
            return None
    return parsed


def parse_iso(text: str) -> datetime:
    """Like `try_parse_iso` but raises ValueError when the text is not a date."""
    parsed = try_parse_iso(text)
    if parsed is None:
        raise ValueError(f'"{text}" is not an ISO date: expected text like "2026-09-20T10:00:00.000Z"')
    return parsed


def iso_to_ms(text: str) -> int | None:
    """`Date.parse(text)` as integer epoch ms, or None where JS would give NaN."""
    parsed = try_parse_iso(text)
    return None if parsed is None else (parsed - EPOCH) // _ONE_MS


def is_iso(text: object) -> bool:
    """True when `text` is exactly what `toISOString()` would write for its own instant."""
    if not isinstance(text, str) or len(text) != 24:
        return False
    parsed = try_parse_iso(text)
    return parsed is not None and to_iso(parsed) == text
