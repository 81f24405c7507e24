"""Test doubles (persistence note §3.1–§3.3, README "Test doubles"). Written from the spec alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from falai_django import MemoryStore, Session
from falai_django.testing import MemoryScheduler, fake_clock

T0 = datetime(2026, 9, 20, 10, tzinfo=UTC)


# ----------------------------------------------------------------------------- fake_clock

def test_fake_clock_now_and_call():
    clock = fake_clock("2026-09-20T10:00:00Z")
    assert clock.now() == T0
    assert clock() == T0
    assert clock.now().tzinfo is not None and clock.now().utcoffset() == timedelta(0)


def test_fake_clock_accepts_millis_form():
    assert fake_clock("2026-09-20T10:00:00.000Z").now() == T0


def test_advance_duration_and_ms():
    clock = fake_clock("2026-09-20T10:00:00Z")
    assert clock.advance("24h") == T0 + timedelta(hours=24)
    assert clock.now() == T0 + timedelta(hours=24)
    assert clock.advance(1500) == T0 + timedelta(hours=24, milliseconds=1500)
    assert clock.advance(-1500) == T0 + timedelta(hours=24)  # no sign check
    assert clock.advance("1.5h") == T0 + timedelta(hours=25.5)


def test_advance_bad_duration_raises():
    from falai_django import FlowConfigurationError

    clock = fake_clock("2026-09-20T10:00:00Z")
    with pytest.raises(FlowConfigurationError):
        clock.advance("1 day")


def test_set():
    clock = fake_clock("2026-09-20T10:00:00Z")
    assert clock.set("2026-09-22T09:00:00.000Z") == datetime(2026, 9, 22, 9, tzinfo=UTC)
    assert clock() == datetime(2026, 9, 22, 9, tzinfo=UTC)


def test_returned_value_does_not_move_with_clock():
    clock = fake_clock("2026-09-20T10:00:00Z")
    before = clock.now()
    clock.advance("1h")
    assert before == T0


@pytest.mark.parametrize("bad", ["nope", "", "2026-13-45T99:00:00Z"])
def test_unparseable_iso(bad):
    expected = (f'"{bad}" is not a date: Date.parse cannot read it. Pass ISO text, e.g. '
                '"2026-09-20T10:00:00.000Z".')
    with pytest.raises(Exception) as exc:
        fake_clock(bad)
    assert expected in str(exc.value)
    assert str(exc.value).startswith("[fakeClock] ")
    clock = fake_clock("2026-09-20T10:00:00Z")
    with pytest.raises(Exception) as exc:
        clock.set(bad)
    assert expected in str(exc.value)
    assert clock.now() == T0


# ----------------------------------------------------------------------------- MemoryScheduler

def entry(key, at, replaces=None):
    e = {"key": key, "at": at}
    if replaces is not None:
        e["replaces"] = replaces
    return e


def test_due_sorted_and_removed():
    s = MemoryScheduler()
    s.add("s1", entry("b", T0 + timedelta(minutes=2)))
    s.add("s1", entry("a", T0 + timedelta(minutes=1)))
    s.add("s1", entry("c", T0 + timedelta(hours=1)))
    s.add("s1", entry("tie", T0 + timedelta(minutes=2)))
    assert s.size == 4
    due = s.due(T0 + timedelta(minutes=2))
    assert [d.key for d in due] == ["a", "b", "tie"]
    assert due[0]["key"] == "a" and due[0]["at"] == T0 + timedelta(minutes=1)
    assert s.size == 1
    assert s.due(T0 + timedelta(minutes=2)) == []
    assert [d.key for d in s.due(T0 + timedelta(days=1))] == ["c"]
    assert s.size == 0


def test_due_at_exact_time_inclusive():
    s = MemoryScheduler()
    s.add("s1", entry("k", T0))
    assert [d.key for d in s.due(T0)] == ["k"]


def test_same_key_replaces_and_moves_to_end():
    s = MemoryScheduler()
    s.add("s1", entry("a", T0))
    s.add("s1", entry("b", T0))
    s.add("s1", entry("a", T0))
    assert s.size == 2
    assert [d.key for d in s.due(T0)] == ["b", "a"]


def test_replaces_removes_old_key():
    s = MemoryScheduler()
    s.add("s1", entry("silence:f:s1:1", T0 + timedelta(hours=1)))
    s.add("s1", entry("silence:f:s1:2", T0 + timedelta(hours=2), replaces="silence:f:s1:1"))
    assert s.size == 1
    assert [d.key for d in s.due(T0 + timedelta(days=1))] == ["silence:f:s1:2"]


def test_remove():
    s = MemoryScheduler()
    s.add("s1", entry("a", T0))
    s.remove("a")
    assert s.size == 0
    s.remove("never-there")


def test_at_normalised_to_datetime():
    s = MemoryScheduler()
    s.add("s1", entry("a", "2026-09-20T10:00:00.000Z"))
    d = s.due(T0)
    assert d[0].at == T0 and isinstance(d[0].at, datetime)


def test_nothing_fires_on_its_own():
    s = MemoryScheduler()
    s.add("s1", entry("a", T0 - timedelta(days=1)))
    assert s.size == 1


def test_schedule_entry_objects_accepted():
    from falai_django import ScheduleEntry  # noqa: F401 - part of the session module exports
    s = MemoryScheduler()
    s.add("s1", ScheduleEntry(key="k", at=T0))
    assert [d.key for d in s.due(T0)] == ["k"]


# ----------------------------------------------------------------------------- MemoryStore double

def test_memory_store_is_a_real_store():
    store = MemoryStore()
    s = Session.from_json({"id": "s1", "v": 4, "version": 0, "data": {}, "runs": [], "claims": {}, "inputs": [],
                           "metadata": {}})
    saved = store.save(s, 0)
    loaded = store.load("s1")
    assert loaded is not saved and loaded.to_json() == saved.to_json()
    loaded.data["x"] = 1
    assert store.load("s1").data == {}
