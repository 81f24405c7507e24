"""jstime: `toISOString()` text and `Date.parse` milliseconds, byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falai_django.engine.jstime import (
    from_ms,
    is_iso,
    iso_to_ms,
    ms_to_iso,
    parse_iso,
    to_iso,
    to_ms,
    try_parse_iso,
    utc_now,
)


def test_to_iso_matches_to_iso_string():
    assert to_iso(datetime(2026, 9, 24, 10, 0, tzinfo=UTC)) == "2026-09-24T10:00:00.000Z"
    assert to_iso(datetime(2026, 9, 24, 10, 0, 0, 123999, tzinfo=UTC)) == "2026-09-24T10:00:00.123Z"
    assert to_iso(datetime(2026, 9, 24, 7, 0, tzinfo=timezone(timedelta(hours=-3)))) == "2026-09-24T10:00:00.000Z"
    assert to_iso(datetime(2026, 9, 24, 10, 0)) == "2026-09-24T10:00:00.000Z"  # naive reads as UTC
    assert to_iso(1790244000000) == "2026-09-24T10:00:00.000Z"
    assert to_iso(0) == "1970-01-01T00:00:00.000Z"
    assert to_iso(-1) == "1969-12-31T23:59:59.999Z"


def test_to_iso_refuses_other_types():
    with pytest.raises(TypeError):
        to_iso("2026-09-24")
    with pytest.raises(TypeError):
        to_iso(True)


def test_date_parse_equivalents():
    assert iso_to_ms("2026-09-24T10:00:00.000Z") == 1790244000000
    assert iso_to_ms("2026-09-24T10:00:00Z") == 1790244000000
    assert iso_to_ms("2026-09-24T13:00:00+03:00") == 1790244000000
    assert iso_to_ms("2026-09-24T13:00:00+0300") == 1790244000000
    assert iso_to_ms("2026-09-24T10:00:00") == 1790244000000  # zone-less: UTC (documented choice)
    assert iso_to_ms("2026-09-24") == 1790208000000
    assert iso_to_ms("2026-09-24T10:00:00.5Z") == 1790244000500
    assert iso_to_ms("2026-09-24T10:00:00.123456Z") == 1790244000123
    # the last two leave datetime's range once moved to UTC (they raised OverflowError: a 500 in the API)
    for bad in ("", "tomorrow", "2026-13-01T00:00:00Z", "2026-02-30", None, 5, "0001-01-01T00:00:00+01:00",
                "9999-12-31T23:59:00-01:00"):
        assert iso_to_ms(bad) is None
        assert try_parse_iso(bad) is None
    with pytest.raises(ValueError, match="is not an ISO date"):
        parse_iso("tomorrow")


def test_parsed_datetimes_are_aware_utc():
    parsed = parse_iso("2026-09-24T13:00:00+03:00")
    assert parsed.tzinfo is UTC and parsed == datetime(2026, 9, 24, 10, tzinfo=UTC)
    assert from_ms(1790244000000).tzinfo is UTC
    assert utc_now().tzinfo is UTC and utc_now().microsecond % 1000 == 0


def test_is_iso_only_for_canonical_text():
    assert is_iso("2026-09-24T10:00:00.000Z")
    assert not is_iso("2026-09-24T10:00:00Z")
    assert not is_iso("2026-09-24T10:00:00.000+00:00")
    assert not is_iso(None)


@given(st.integers(min_value=0, max_value=253402300799999))
def test_ms_and_iso_round_trip(ms):
    text = ms_to_iso(ms)
    assert len(text) == 24 and text.endswith("Z")
    assert iso_to_ms(text) == ms
    assert to_ms(from_ms(ms)) == ms
    assert to_iso(parse_iso(text)) == text
