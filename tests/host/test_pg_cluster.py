"""A real django-q2 cluster (`manage.py qcluster`), with the ORM broker and with the Redis broker.

Messages are committed while no worker runs (their sends wait in the broker); one conversation
"crashes" between commit and enqueue (its send never reaches the broker); a first cluster with a
slow sender is killed (SIGKILL) mid-way. After a restart, with the dispatcher running, every
message is sent and every wake fires. A send the killed worker had already handed to the channel
(it died before recording it) goes out again under the same idempotency key, which the channel
uses to drop it: per idempotency key, the customer sees it once.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import connections

from falai_django import host
from falai_django.models import HistoryItem, Wake
from falai_django.stores.django import DjangoStore

from . import agents
from .helpers import cluster_env, drop_redis_queue, kill, start_cluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

CONVERSATIONS = 6


def _delivered(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@pytest.fixture(params=["orm", "redis"])
def broker(request, monkeypatch, tmp_path, settings):
    name = f"falai-test-{uuid.uuid4().hex[:8]}"
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    env = cluster_env(monkeypatch, name, redis_url, FALAI_TEST_SENT_LOG=str(tmp_path / "sent.jsonl"))
    settings.FALAI = {**settings.FALAI, "SEND_LEASE_S": 2.0, "SEND_SWEEP_AFTER_S": 1.0, "DISPATCH_LEASE_S": 3.0}
    yield request.param, env, tmp_path / "sent.jsonl"
    if redis_url:
        drop_redis_queue(redis_url, name)


def test_after_a_crash_and_a_restart_every_message_is_sent_and_every_wake_fires(broker, monkeypatch):
    kind, env, log = broker
    from falai_django.host import jobs

    sids = [f"c{n}" for n in range(CONVERSATIONS)]
    keys = {}
    for sid in sids:
        host.handle_message(sid, "oi", id=f"{sid}.1")
        keys[sid] = host.handle_message(sid, "meu nome é Ana", id=f"{sid}.2").result.schedule[0].key
    with monkeypatch.context() as crash:  # the process dies between commit and enqueue
        crash.setattr(jobs, "enqueue_send", lambda sid: (_ for _ in ()).throw(SystemExit("killed")))
        with pytest.raises(SystemExit):
            host.handle_message("lost", "oi", id="lost.1")
    agents.clock().advance("1h")  # the wakes are due

    slow = start_cluster({**env, "FALAI_TEST_SEND_DELAY": "0.4"})
    time.sleep(3.0)
    kill(slow)  # killed mid-way: some sends done, one maybe in flight, the rest waiting
    partial = len(_delivered(log))

    cluster = start_cluster(env)
    from falai_django.host.wakes import Dispatcher

    dispatcher = Dispatcher(poll_s=0.05, sweep_every_s=0.5)

    def run_dispatcher():
        try:
            dispatcher.run(max_seconds=90)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run_dispatcher)
    thread.start()
    try:
        deadline = time.monotonic() + 80
        while time.monotonic() < deadline:
            unsent = HistoryItem.objects.filter(role="assistant").exclude(send_status="sent").count()
            unfired = Wake.objects.exclude(state="done").count()
            if unsent == 0 and unfired == 0:
                break
            time.sleep(0.2)
    finally:
        dispatcher.stop()
        thread.join(timeout=30)
        kill(cluster, signal.SIGTERM)

    assert HistoryItem.objects.filter(role="assistant").exclude(send_status="sent").count() == 0
    assert Wake.objects.exclude(state="done").count() == 0
    store = DjangoStore()
    assert all(store.load(sid).runs == [] for sid in sids)  # every waiting run completed
    delivered = _delivered(log)
    outbox = set(HistoryItem.objects.filter(role="assistant").values_list("idempotency_key", flat=True))
    assert {d["key"] for d in delivered} == outbox  # every emission reached the channel
    duplicates = len(delivered) - len({d["key"] for d in delivered})
    assert duplicates <= 2  # at most the sends in flight in the killed cluster's two workers
    assert "Obrigado, Ana! Até logo." in [d["text"] for d in delivered]
    print(f"\n{kind}: {len(delivered)} deliveries for {len(outbox)} emissions "
          f"({partial} before the kill, {duplicates} re-sent under the same idempotency key)")
