"""The outbox: once per emission, in order, after_ms honoured, failures retried and recorded."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from falai_django.engine.session import Session
from falai_django.host import emission_key, idempotency_key
from falai_django.host.delivery import send_pending, sweep_unsent
from falai_django.models import HistoryItem
from falai_django.stores.django import DjangoStore

from . import senders

pytestmark = pytest.mark.django_db(transaction=True)


def outbox(session_id: str, *messages: tuple[str, int], input_key: str = "message:m1") -> list[HistoryItem]:
    if DjangoStore().load(session_id) is None:
        DjangoStore().save(Session.fresh(session_id), 0)
    rows = []
    for i, (text, after_ms) in enumerate(messages):
        emission = emission_key(f"t#m1:s{i}:1", 0, *input_key.split(":", 1))
        rows.append(HistoryItem.objects.create(
            conversation_id=session_id, role="assistant", content=text, message_key=f"t#m1:s{i}:1",
            at=timezone.now(), kind="verbatim", after_ms=after_ms, emission_key=emission,
            idempotency_key=idempotency_key(session_id, emission), send_status="pending", queued_at=timezone.now(),
        ))
    return rows


def test_messages_go_out_in_order_once_each_honouring_after_ms():
    outbox("s1", ("A", 0), ("B", 3000), ("C", 0))
    slept = []
    assert send_pending("s1", sleep=slept.append) == 3
    assert [m.text for m in senders.sent] == ["A", "B", "C"]
    assert len(slept) == 1 and 2.5 < slept[0] <= 3.0
    assert send_pending("s1") == 0  # already sent: never again
    assert len(senders.sent) == 3
    assert set(HistoryItem.objects.values_list("send_status", flat=True)) == {"sent"}
    assert [m.channel_message_id for m in HistoryItem.objects.order_by("id")] == ["ch-1", "ch-2", "ch-3"]


def test_the_sender_gets_a_stable_idempotency_key_per_emission():
    rows = outbox("s1", ("A", 0))
    send_pending("s1")
    message = senders.sent[0]
    assert message.idempotency_key == rows[0].idempotency_key
    assert len(message.idempotency_key) == 64
    assert message.emission_key.endswith("@message:m1")


def test_the_same_message_key_from_another_input_is_another_emission():
    assert emission_key("t#m1:q:1", 0, "message", "m2") != emission_key("t#m1:q:1", 0, "message", "m3")
    assert emission_key("t#m1:q:1", 0, "message", "m2") != emission_key("t#m1:q:1", 1, "message", "m2")
    assert emission_key("t#m1:q:1", 0, "message", "m2") == emission_key("t#m1:q:1", 0, "message", "m2")


def test_a_unique_emission_cannot_be_queued_twice():
    from django.db import IntegrityError

    outbox("s1", ("A", 0))
    with pytest.raises(IntegrityError):
        outbox("s1", ("A", 0))


def test_a_failed_send_is_recorded_retried_and_blocks_later_messages(settings):
    settings.FALAI = {**settings.FALAI, "SEND_RETRY_BASE_S": 60}
    outbox("s1", ("A", 0), ("B", 0))
    senders.fail_next(1)
    assert send_pending("s1") == 0
    first = HistoryItem.objects.order_by("id").first()
    assert first.send_status == "pending" and first.send_attempts == 1
    assert "channel down" in first.send_error and first.next_attempt_at is not None
    assert senders.sent == []  # B waits behind A: order holds
    HistoryItem.objects.filter(pk=first.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert sweep_unsent() == 1  # the dispatcher's sweep hands the retry back (sync: sent in-line)
    assert [m.text for m in senders.sent] == ["A", "B"]
    assert HistoryItem.objects.get(pk=first.pk).send_attempts == 2


def test_a_send_that_keeps_failing_is_marked_failed_and_the_rest_go_on(settings):
    settings.FALAI = {**settings.FALAI, "SEND_RETRY_MAX": 2, "SEND_RETRY_BASE_S": 60}
    outbox("s1", ("A", 0), ("B", 0))
    senders.fail_next(2)
    send_pending("s1")
    HistoryItem.objects.filter(content="A").update(next_attempt_at=timezone.now())
    send_pending("s1")
    assert HistoryItem.objects.get(content="A").send_status == "failed"
    assert [m.text for m in senders.sent] == ["B"]


def test_sends_whose_hand_off_was_lost_are_swept_up():
    outbox("s1", ("A", 0))
    HistoryItem.objects.update(queued_at=timezone.now() - timedelta(minutes=5))
    assert sweep_unsent() == 1
    assert [m.text for m in senders.sent] == ["A"]
    assert sweep_unsent() == 0


def test_a_conversation_being_sent_by_another_worker_is_left_to_it(settings):
    from falai_django.models import Conversation

    settings.FALAI = {**settings.FALAI, "SEND_LOCK": "lease"}
    outbox("s1", ("A", 0))
    Conversation.objects.filter(pk="s1").update(send_lease_until=timezone.now() + timedelta(seconds=30))
    assert send_pending("s1") == 0
    Conversation.objects.filter(pk="s1").update(send_lease_until=timezone.now() - timedelta(seconds=1))
    assert send_pending("s1") == 1


def test_on_postgresql_the_send_lock_is_an_advisory_lock_another_session_holds():
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (the PostgreSQL run covers it)")
    import psycopg

    db = connection.settings_dict
    other = psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], password=db["PASSWORD"],
                            dbname=db["NAME"], autocommit=True)
    outbox("s1", ("A", 0))
    other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", ["falai-send:s1"])
    assert send_pending("s1") == 0  # another worker is sending this conversation
    other.close()  # that worker dies: the server frees its lock as soon as it sees the disconnect
    deadline = time.monotonic() + 10
    while send_pending("s1") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [m.text for m in senders.sent] == ["A"]
