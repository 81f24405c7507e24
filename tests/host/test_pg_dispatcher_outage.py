"""The dispatcher outlives connections the server drops (what a restart does to every client):
its LISTEN connection, its loop's and its send threads' are cut with `pg_terminate_backend`;
it says so once, reconnects, LISTENs again, sweeps, and keeps sending. (A real restart of a
private cluster: tests/faults/test_dispatcher_outage.py.)"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from falai_django import host
from falai_django.models import History

from . import senders
from .helpers import texts, wait_for
from .test_outages import Lines

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

ASK = "Oi! Com quem eu falo?"


@pytest.fixture
def notify_mode(settings):
    settings.FALAI = {**settings.FALAI, "SEND_HANDOFF": "notify", "SEND_SWEEP_AFTER_S": 30}


def _cut_everyone_else() -> int:
    """Terminate every other backend on this database (the dispatcher's connections)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def test_the_dispatcher_reconnects_listens_again_and_sends_after_its_connections_are_cut(notify_mode):
    from falai_django.host.wakes import Dispatcher

    dispatcher = Dispatcher(poll_s=0.05, sweep_every_s=0.2)
    thread = threading.Thread(target=dispatcher.run, kwargs={"max_seconds": 60}, daemon=True)
    with Lines("falai_django.wakes") as log:
        thread.start()
        try:
            assert wait_for(lambda: dispatcher.sender is not None and dispatcher.sender.connected)
            host.handle_message("s1", "oi", id="wamid.1")
            assert wait_for(lambda: texts(senders.sent) == [ASK])  # the send threads hold connections now
            listen_before = dispatcher.sender.listen_conn

            assert _cut_everyone_else() >= 2  # the LISTEN connection and the loop's, at least
            assert wait_for(lambda: any("lost the database" in line for line in log.lines)), log.lines
            # Written while the dispatcher may still be reconnecting: its NOTIFY can be lost, and
            # the sweep after the reconnection (no grace period, unlike SEND_SWEEP_AFTER_S=30) sends it.
            host.handle_message("s2", "oi", id="wamid.2")
            assert wait_for(lambda: sorted(m.session_id for m in senders.sent) == ["s1", "s2"]), log.lines
            assert wait_for(lambda: any("is back after" in line for line in log.lines)), log.lines
            assert dispatcher.sender.connected and dispatcher.sender.listen_conn is not listen_before

            host.handle_message("s3", "oi", id="wamid.3")  # heard through the new LISTEN
            assert wait_for(lambda: sorted(m.session_id for m in senders.sent) == ["s1", "s2", "s3"])
            assert thread.is_alive()
        finally:
            dispatcher.stop()
            thread.join(10)
    assert not thread.is_alive()
    assert History.objects.pending_sends().count() == 0
    assert sorted(m.session_id for m in senders.sent) == ["s1", "s2", "s3"]  # each reply once
    assert sum("lost the database" in line for line in log.lines) == 1, log.lines  # one line an outage
    assert not any("Traceback" in line for line in log.lines)
