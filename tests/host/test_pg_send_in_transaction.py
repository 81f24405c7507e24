"""Sending inside a caller's transaction on PostgreSQL (the advisory-lock send path).

A worker sends in autocommit: the last "sent" mark is committed on its own, before the lock is
released. Inside a caller's `transaction.atomic` it must join the caller's transaction instead:
a bare COMMIT there committed everything the caller had written so far, which its rollback could
then no longer undo (the desk tests, which run the sends in the test's transaction, leaked their
users into the next tests that way). These tests run inside pytest-django's test transaction.
"""

from __future__ import annotations

import pytest
from django.db import connection

from falai_django import host
from falai_django.host import delivery
from falai_django.models import History

from . import senders
from .helpers import texts

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SID = "in-a-transaction"
ASK = "Oi! Com quem eu falo?"  # tests/host/agents.py: Ana's first message


def seen_from_another_connection(sql: str, params: list) -> list:
    """What a second, autocommit connection sees: only committed rows."""
    other = connection.get_new_connection(connection.get_connection_params())
    other.autocommit = True
    try:
        return other.execute(sql, params).fetchall()
    finally:
        other.close()


def committed_history_rows() -> int:
    return seen_from_another_connection(
        f"SELECT count(*) FROM {History._meta.db_table} WHERE conversation_id = %s", [SID])[0][0]


def lock_is_free() -> bool:
    key = f"falai-send:{SID}"
    got = seen_from_another_connection("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [key])[0][0]
    return bool(got)  # the probing connection closes at once, so a lock it took goes with it


def test_a_send_in_the_callers_transaction_commits_none_of_it():
    assert connection.in_atomic_block  # the test's transaction
    host.handle_message(SID, "oi", id="wamid.1")  # the turn's rows: written, not committed

    assert delivery.send_pending(SID) == 1

    assert texts(senders.sent, SID) == [ASK]
    assert History.objects.get(conversation_id=SID, role="assistant").send_status == "sent"
    assert committed_history_rows() == 0  # the caller's rollback still undoes it all
    assert lock_is_free()


def test_a_failed_sent_mark_leaves_the_callers_transaction_usable(monkeypatch):
    host.handle_message(SID, "oi", id="wamid.1")
    rows_before = History.objects.filter(conversation_id=SID).count()
    real = delivery._committed
    # The "sent" mark fails on the server (the statement after it divides by zero).
    monkeypatch.setattr(delivery, "_committed", lambda conn, statements: real(conn, statements + "SELECT 1/0; "))

    with pytest.raises(Exception, match="division by zero"):
        delivery.send_pending(SID)

    # The caller's transaction goes on, with its rows: only the send's savepoint was rolled back.
    assert History.objects.filter(conversation_id=SID).count() == rows_before > 0
    assert History.objects.get(conversation_id=SID, role="assistant").send_status == "pending"
    assert committed_history_rows() == 0
    assert lock_is_free()


def test_a_batch_send_in_the_callers_transaction_commits_none_of_it():
    host.handle_message(SID, "oi", id="wamid.1")
    assert delivery.send_many([SID]) == (1, [])
    assert History.objects.get(conversation_id=SID, role="assistant").send_status == "sent"
    assert committed_history_rows() == 0
    assert lock_is_free()


def test_a_failed_batch_mark_leaves_the_callers_transaction_usable(monkeypatch):
    host.handle_message(SID, "oi", id="wamid.1")
    real = delivery._committed
    monkeypatch.setattr(delivery, "_committed", lambda conn, statements: real(conn, statements + "SELECT 1/0; "))
    with pytest.raises(Exception, match="division by zero"):
        delivery.send_many([SID])
    assert History.objects.get(conversation_id=SID, role="assistant").send_status == "pending"
    assert committed_history_rows() == 0
    assert lock_is_free()
