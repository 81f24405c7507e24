"""Durations (authoring note §8, persistence note §7)."""

from __future__ import annotations

import pytest

from falai_django.engine.durations import assert_duration, is_duration, parse_duration
from falai_django.engine.errors import FlowConfigurationError


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("30s", 30_000),
        ("5m", 300_000),
        ("24h", 86_400_000),
        ("3d", 259_200_000),
        ("1.5h", 5_400_000),
        ("0s", 0),
        ("0.0005s", 1),  # 0.5 ms rounds half up, as JS Math.round
        ("0.0015s", 2),  # banker's rounding would give 2 as well; the next one tells them apart
        ("0.0025s", 3),  # JS: Math.round(2.5) = 3, Python round(2.5) = 2
        ("0.0004s", 0),
        ("10s", 10_000),
    ],
)
def test_parse_duration(text, ms):
    assert parse_duration(text) == ms
    assert is_duration(text)


@pytest.mark.parametrize("text", ["5 min", "1w", "-1h", "1h30m", "10ms", "1H", " 1h", "1h\n", ".5h", "1.h", "", 5, None])
def test_invalid_durations(text):
    assert not is_duration(text)
    with pytest.raises(FlowConfigurationError) as err:
        parse_duration(text)
    assert "is not a duration: expected a number followed by s, m, h or d." in str(err.value)


def test_assert_duration_names_where():
    assert assert_duration("2h") == "2h"
    with pytest.raises(FlowConfigurationError) as err:
        assert_duration("tomorrow", "defer")
    assert str(err.value).startswith(
        '[FlowConfigurationError] defer "tomorrow" is not a duration: expected a number followed by s, m, h or d. '
    )
    with pytest.raises(FlowConfigurationError) as err:
        parse_duration("1w")
    assert str(err.value).startswith('[FlowConfigurationError] duration "1w" is not a duration')
