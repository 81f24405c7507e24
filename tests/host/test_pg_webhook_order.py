"""Issue 44 end to end: WhatsApp webhooks in, a real django-q2 cluster of eight workers, and each
customer's messages understood in the order they were sent.

Ten customers write at once, each sending twenty messages one after another, every message its
own signed webhook (as Meta delivers them: the next one after the last was answered). The
webhook stores the input and queues its task; `manage.py qcluster` with eight worker processes
(Redis broker, as the README recommends for load) runs them. Before issue 44, two workers could
take two inputs of one conversation at once and the later one could be understood first.
Afterwards every input is done, and each conversation's transcript, the session's `inputs` and
the run log's saved versions follow the send order.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
from django.db import connections
from django.test import Client

from falai_django.models import TurnRecord

from .helpers import cluster_env, drop_redis_queue, kill, start_cluster, whatsapp_configured
from .order_burst import assert_in_order

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

CUSTOMERS = 10
MESSAGES = 20
WORKERS = 8


@pytest.fixture
def cluster(monkeypatch, settings, redis_url):
    """A real `qcluster` of WORKERS processes on the Redis broker, named for this test."""
    name = f"falai-order-{uuid.uuid4().hex[:8]}"
    env = cluster_env(monkeypatch, name, redis_url, FALAI_TEST_Q_WORKERS=str(WORKERS), FALAI_TEST_SENT_LOG=os.devnull)
    whatsapp_configured(settings)
    process = start_cluster(env)
    yield process
    kill(process)
    drop_redis_queue(redis_url, name)


def _customer(wa_id: str, failures: list[str]) -> None:
    """One customer: twenty messages, each its own webhook, each sent once the last was answered."""
    from whatsapp import payloads

    client = Client()
    try:
        for i in range(MESSAGES):
            message = payloads.text(f"mensagem {i:02d}", f"wamid.{wa_id}.{i:02d}", "2026-12-06T10:00:00Z",
                                    wa_id=wa_id)
            response = payloads.deliver(client, payloads.envelope([message], wa_id=wa_id))
            if response.status_code != 200:
                failures.append(f"{wa_id} message {i}: {response.status_code} {response.content[:200]!r}")
    except Exception as exc:  # noqa: BLE001 - asserted on below
        failures.append(f"{wa_id}: {exc!r}")
    finally:
        connections.close_all()


def test_ten_customers_twenty_webhooks_each_at_eight_workers_are_understood_in_order(cluster):
    customers = [f"55119{n:08d}" for n in range(CUSTOMERS)]
    failures: list[str] = []
    threads = [threading.Thread(target=_customer, args=(wa_id, failures)) for wa_id in customers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    assert TurnRecord.objects.filter(conversation_id__in=customers).count() == CUSTOMERS * MESSAGES

    deadline = time.monotonic() + 120
    while TurnRecord.objects.filter(conversation_id__in=customers).exclude(status="done").exists():
        assert cluster.poll() is None, "the cluster exited"
        if time.monotonic() > deadline:
            left = dict(TurnRecord.objects.filter(conversation_id__in=customers).exclude(status="done")
                        .values_list("input_key", "status")[:20])
            pytest.fail(f"inputs not processed after 120 s: {left}")
        time.sleep(0.2)

    assert_in_order({wa_id: [f"wamid.{wa_id}.{i:02d}" for i in range(MESSAGES)] for wa_id in customers})
