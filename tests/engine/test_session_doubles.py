"""Test doubles: fake_clock and MemoryScheduler (persistence note §3.1, §3.2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from falai_django.engine.errors import FlowConfigurationError
from falai_django.engine.results import ScheduleEntry
from falai_django.testing import MemoryScheduler, fake_clock


def test_fake_clock_is_a_callable_with_now_advance_and_set():
    clock = fake_clock("2026-09-20T10:00:00Z")
    assert clock() == clock.now() == datetime(2026, 9, 20, 10, tzinfo=UTC)
    assert clock().tzinfo is UTC
    assert clock.advance("24h") == datetime(2026, 9, 21, 10, tzinfo=UTC)
    assert clock.advance(1500) == datetime(2026, 9, 21, 10, 0, 1, 500000, tzinfo=UTC)
    assert clock.advance(-500) == datetime(2026, 9, 21, 10, 0, 1, tzinfo=UTC)  # no sign check
    assert clock.advance(timedelta(minutes=1)) == datetime(2026, 9, 21, 10, 1, 1, tzinfo=UTC)
    assert clock.set("2026-09-22T09:00:00.000Z") == datetime(2026, 9, 22, 9, tzinfo=UTC)
    assert clock.iso() == "2026-09-22T09:00:00.000Z"


def test_fake_clock_refuses_what_is_not_a_date():
    with pytest.raises(ValueError, match=r'^\[fakeClock\] "tomorrow" is not a date: Date.parse cannot read it'):
        fake_clock("tomorrow")
    clock = fake_clock("2026-09-20T10:00:00.000Z")
    with pytest.raises(ValueError, match="is not a date"):
        clock.set("nope")
    with pytest.raises(FlowConfigurationError):
        clock.advance("1 day")
    assert clock.iso() == "2026-09-20T10:00:00.000Z"


def at(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def test_scheduler_pops_due_entries_earliest_first():
    scheduler = MemoryScheduler()
    scheduler.add("s1", ScheduleEntry(key="b", at=at("2026-09-21T10:00:00+00:00")))
    scheduler.add("s1", {"key": "a", "at": "2026-09-20T10:00:00.000Z"})
    scheduler.add("s2", ScheduleEntry(key="c", at=at("2026-09-21T10:00:00+00:00")))
    scheduler.add("s1", ScheduleEntry(key="later", at=at("2026-09-25T10:00:00+00:00")))
    assert scheduler.size == len(scheduler) == 4
    assert scheduler.due(at("2026-09-19T00:00:00+00:00")) == []
    due = scheduler.due(fake_clock("2026-09-21T10:00:00Z").now())
    assert [(w.session_id, w.key) for w in due] == [("s1", "a"), ("s1", "b"), ("s2", "c")]  # ties: insertion
    assert due[0].at.tzinfo is UTC and due[0].to_json() == {"key": "a", "at": "2026-09-20T10:00:00.000Z"}
    assert scheduler.size == 1 and "later" in scheduler
    assert scheduler.due(at("2026-09-21T10:00:00+00:00")) == []  # popped once


def test_scheduler_replaces_and_re_adds():
    scheduler = MemoryScheduler()
    scheduler.add("s1", {"key": "silence:retomar:s1:1", "at": "2026-09-21T10:00:00.000Z"})
    scheduler.add("s1", {"key": "x", "at": "2026-09-20T10:00:00.000Z"})
    scheduler.add("s1", ScheduleEntry(key="silence:retomar:s1:2", at=at("2026-09-22T10:00:00+00:00"),
                                      replaces="silence:retomar:s1:1"))
    assert [w.key for w in scheduler.entries()] == ["x", "silence:retomar:s1:2"]
    scheduler.add("s1", {"key": "x", "at": "2026-09-23T10:00:00.000Z"})  # same key: replaced, moved to the end
    assert [(w.key, w.at.day) for w in scheduler.entries()] == [("silence:retomar:s1:2", 22), ("x", 23)]
    assert scheduler.remove("x") and not scheduler.remove("x")
    assert scheduler.size == 1
    scheduler.add({"key": "bare", "at": "2026-09-20T10:00:00.000Z"})  # upstream's one-argument form
    assert scheduler.due("2026-09-20T10:00:00.000Z")[0].session_id is None
    scheduler.clear()
    assert scheduler.next_at() is None


def test_the_same_key_in_two_sessions_stays_apart():
    scheduler = MemoryScheduler()
    scheduler.add("s1", {"key": "triagem#m1:w1:1", "at": "2026-09-20T10:00:00.000Z"})
    scheduler.add("s2", {"key": "triagem#m1:w1:1", "at": "2026-09-20T11:00:00.000Z"})
    assert scheduler.size == 2
    assert scheduler.next_at() == at("2026-09-20T10:00:00+00:00")
    scheduler.remove("triagem#m1:w1:1", session_id="s2")
    assert [w.session_id for w in scheduler.entries()] == ["s1"]


def test_testing_exports_mock_provider_lazily():
    import falai_django.testing as testing

    assert callable(testing.mock_provider)
    with pytest.raises(AttributeError):
        testing.nothing_here  # noqa: B018
