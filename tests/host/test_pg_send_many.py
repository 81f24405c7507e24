"""Sending several conversations at once (PostgreSQL, advisory locks): `delivery.send_many` and
the dispatcher's `SendListener`, which hands it the notified conversations in batches."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from falai_django.host.delivery import send_many
from falai_django.models import History

from . import senders
from .test_sending import outbox

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def sent_by_conversation() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for message in senders.sent:
        out.setdefault(message.session_id, []).append(message.text)
    return out


def statuses(session_id: str) -> list[str]:
    return list(History.objects.filter(conversation_id=session_id).order_by("id").values_list("send_status", flat=True))


@pytest.fixture
def other_connection(pg_dsn):
    """A second session on the test database (locks held there are another worker's)."""
    settings = connection.settings_dict
    conn = psycopg.connect(dbname=settings["NAME"], host=settings["HOST"] or None, port=settings["PORT"] or None,
                           user=settings["USER"] or None, autocommit=True)
    yield conn
    conn.close()


def lock(conn, session_id: str) -> None:
    conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", [f"falai-send:{session_id}"])


def test_a_batch_sends_every_conversation_in_order_in_two_round_trips():
    outbox("a", ("a1", 0))
    outbox("b", ("b1", 0))
    outbox("c", ("c1", 0), ("c2", 0))
    with CaptureQueriesContext(connection) as queries:
        sent, again = send_many(["a", "b", "c", "b"])
    assert sent == 4 and again == []
    assert sent_by_conversation() == {"a": ["a1"], "b": ["b1"], "c": ["c1", "c2"]}
    # take the locks and read; c1's own mark (not the last of its conversation); mark, release, re-read
    assert len(queries.captured_queries) == 3, [q["sql"][:80] for q in queries.captured_queries]
    for sid in ("a", "b", "c"):
        assert set(statuses(sid)) == {"sent"}
    rows = History.objects.filter(conversation_id="c").order_by("id")
    assert [r.channel_message_id for r in rows] == ["ch-3", "ch-4"] and all(r.sent_at for r in rows)
    assert [r.send_attempts for r in rows] == [1, 1]
    assert send_many(["a", "b", "c"]) == (0, [])  # nothing is sent twice


def test_a_conversation_another_worker_holds_is_left_to_it(other_connection):
    outbox("a", ("a1", 0))
    outbox("b", ("b1", 0))
    lock(other_connection, "b")
    assert send_many(["a", "b"]) == (1, [])
    assert sent_by_conversation() == {"a": ["a1"]} and statuses("b") == ["pending"]
    other_connection.execute("SELECT pg_advisory_unlock_all()")
    assert send_many(["b"]) == (1, [])
    assert sent_by_conversation() == {"a": ["a1"], "b": ["b1"]}


def test_every_lock_is_released_after_a_batch(other_connection):
    outbox("a", ("a1", 0))
    outbox("b", ("b1", 0))
    send_many(["a", "b", "empty"])
    taken = other_connection.execute(
        "SELECT pg_try_advisory_lock(hashtextextended('falai-send:' || s, 0)) FROM unnest(%s::text[]) s",
        [["a", "b", "empty"]]).fetchall()
    assert [row[0] for row in taken] == [True, True, True]


def test_a_delayed_message_is_handed_back_unsent_and_unlocked(other_connection):
    outbox("a", ("a1", 0))
    outbox("d", ("d1", 0), ("d2", 40))
    assert send_many(["a", "d"]) == (1, ["d"])
    assert statuses("d") == ["pending", "pending"]
    [[free]] = other_connection.execute("SELECT pg_try_advisory_lock(hashtextextended('falai-send:d', 0))").fetchall()
    assert free is True


def test_a_failing_send_is_recorded_and_the_others_go_out():
    outbox("a", ("a1", 0))
    outbox("b", ("b1", 0))
    senders.fail_next(1)  # "a" is sent first (the batch's order)
    assert send_many(["a", "b"]) == (1, [])
    failed = History.objects.get(conversation_id="a")
    assert failed.send_status == "pending" and failed.send_attempts == 1 and failed.next_attempt_at is not None
    assert "channel down" in failed.send_error
    assert sent_by_conversation() == {"b": ["b1"]} and statuses("b") == ["sent"]


def test_the_listener_sends_its_queue_in_batches_and_forgets_what_it_sent():
    from falai_django.host.wakes import SendListener

    ids = [f"q{n}" for n in range(7)]
    for sid in ids:
        outbox(sid, (f"{sid}-1", 0))
    outbox("d", ("d1", 0), ("d2", 30))
    calls: list[list[str]] = []
    from falai_django.host import delivery

    original = delivery.send_many

    def counting(taken, **kwargs):
        calls.append(list(taken))
        return original(taken, **kwargs)

    delivery.send_many = counting
    listener = SendListener(threads=1, batch=3)
    try:
        submitted = sum(listener.submit(sid) for sid in [*ids, "d", "q0"])
        assert submitted <= 9  # "q0" a second time is dropped while it is queued or being sent
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (listener.busy or listener.drains):
            time.sleep(0.02)
    finally:
        delivery.send_many = original
        listener.stop()
    assert not listener.busy and listener.drains == 0
    assert all(len(batch) <= 3 for batch in calls) and sorted(s for b in calls for s in b).count("q0") <= 2
    got = sent_by_conversation()
    assert {sid: got.get(sid) for sid in ids} == {sid: [f"{sid}-1"] for sid in ids}
    assert got["d"] == ["d1", "d2"]  # the delayed one through send_pending, in order
    assert listener.sent == 9
