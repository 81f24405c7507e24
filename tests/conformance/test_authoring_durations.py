"""Durations (authoring note §8, persistence note §7). Written from the spec alone."""

from __future__ import annotations

import pytest

from falai_django import FlowConfigurationError, parse_duration
from falai_django.engine.durations import assert_duration, is_duration


@pytest.mark.parametrize(("text", "ms"), [
    ("30s", 30_000), ("5m", 300_000), ("24h", 86_400_000), ("3d", 259_200_000), ("1.5h", 5_400_000),
    ("0s", 0), ("0.5s", 500), ("0.0005s", 1), ("0.0004s", 0), ("0.0015s", 2), ("0.0025s", 3),
    ("1.0001s", 1000), ("0.25m", 15_000), ("10s", 10_000), ("007s", 7000), ("2.5d", 216_000_000),
])
def test_parse(text, ms):
    assert parse_duration(text) == ms
    assert isinstance(parse_duration(text), int)
    assert is_duration(text)


@pytest.mark.parametrize("text", [
    "5 min", "1w", "-1h", "+1h", "1H", "1h30m", "100ms", "1y", "", " 5m", "5m ", "5m\n", ".5s", "5.s", "s",
    "1,5h", "five", "1e3s", "１s",
])
def test_invalid(text):
    assert not is_duration(text)
    with pytest.raises(FlowConfigurationError) as exc:
        parse_duration(text)
    msg = str(exc.value)
    assert msg.startswith(f'[FlowConfigurationError] duration "{text}" is not a duration: expected a number '
                          "followed by s, m, h or d.")


@pytest.mark.parametrize("value", [5, None, 1.5, True, ["5m"]])
def test_non_strings(value):
    assert not is_duration(value)
    with pytest.raises(FlowConfigurationError):
        parse_duration(value)


def test_assert_duration_where():
    with pytest.raises(FlowConfigurationError) as exc:
        assert_duration("amanhã", "defer")
    assert str(exc.value).startswith('[FlowConfigurationError] defer "amanhã" is not a duration: '
                                     "expected a number followed by s, m, h or d. ")
    assert_duration("5m")
