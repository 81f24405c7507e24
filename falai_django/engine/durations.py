"""Durations: `"30s"`, `"5m"`, `"1.5h"`, `"3d"` (authoring note §8, persistence note §7).

One number, one unit, nothing else: no spaces, no sign, no `ms`/`w`, no compound `1h30m`.
Milliseconds are rounded half up, as JavaScript's `Math.round` does.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

from .errors import FlowConfigurationError

__all__ = ["DURATION_RE", "UNIT_MS", "assert_duration", "is_duration", "parse_duration"]

DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$", re.ASCII)  # JS \d is ASCII only

UNIT_MS: dict[str, int] = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def is_duration(value: Any) -> TypeGuard[str]:
    """True when `value` is a string written as a duration."""
    # fullmatch semantics without `$` accepting a trailing newline
    return isinstance(value, str) and DURATION_RE.fullmatch(value) is not None


def assert_duration(value: Any, where: str = "duration") -> str:
    """Return `value` unchanged, or raise FlowConfigurationError naming `where`."""
    if not is_duration(value):
        shown = value if isinstance(value, str) else repr(value)
        raise FlowConfigurationError(
            f'{where} "{shown}" is not a duration: expected a number followed by s, m, h or d. '
            'Write it like "30s", "5m", "24h" or "3d".'
        )
    return value


def parse_duration(text: Any, where: str = "duration") -> int:
    """Milliseconds in a duration string; raises FlowConfigurationError when it does not parse."""
    assert_duration(text, where)
    match = DURATION_RE.fullmatch(text)
    assert match is not None
    amount, unit = match.groups()
    # JS Math.round is floor(x + 0.5), never banker's rounding
    return int(math.floor(float(amount) * UNIT_MS[unit] + 0.5))
