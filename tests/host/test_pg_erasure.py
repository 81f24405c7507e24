"""Issue 51 on PostgreSQL only: an erasure waits at most LOCK_TIMEOUT_MS for a row another
transaction holds, then refuses (busy) with nothing erased, and counts the refusal."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections, transaction

from falai_django import host
from falai_django.host import erasure
from falai_django.models import Erasure, History, Session

from .helpers import METRICS_TOKEN, moved, scrape

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = "5511987654321"


def test_a_row_held_by_another_transaction_makes_the_erasure_busy_within_its_lock_timeout(settings):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}
    host.handle_message(PHONE, "oi", id="w.1")
    held, release = threading.Event(), threading.Event()

    def sender_recording_a_send() -> None:  # holds the conversation's transcript rows, as a send does
        try:
            with transaction.atomic():
                list(History.objects.select_for_update().filter(conversation_id=PHONE))
                held.set()
                release.wait(20)
        finally:
            connections.close_all()

    thread = threading.Thread(target=sender_recording_a_send)
    thread.start()
    before = scrape()
    try:
        assert held.wait(10)
        started = time.monotonic()
        with pytest.raises(host.ConversationBusyError, match="being written"):
            host.erase(PHONE)
        waited = time.monotonic() - started
    finally:
        release.set()
        thread.join(20)
    assert erasure.LOCK_TIMEOUT_MS / 1000 - 0.5 < waited < erasure.LOCK_TIMEOUT_MS / 1000 + 5
    assert Session.objects.filter(pk=PHONE).exists() and History.objects.filter(conversation_id=PHONE).exists()
    assert not Erasure.objects.exists()
    assert moved(before, scrape(), "falai_erasures_total", result="busy") == 1
    host.erase(PHONE)  # the sender is done: erasable
    assert not Session.objects.filter(pk=PHONE).exists()
