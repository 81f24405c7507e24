"""Metrics across processes, out of the box: turns run by a real django-q2 cluster's workers and
replies sent by a real dispatcher (each its own process, started with nothing but the project's
settings) show on this web process's `GET /falai/metrics` within 10 s, and the dispatcher's
heartbeat is young while it runs and ages once it is gone."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest
from django.test import Client
from django.utils import timezone

from falai_django.models import TurnRecord

from .helpers import (
    METRICS_TOKEN,
    ROOT,
    cluster_env,
    drop_redis_queue,
    kill,
    moved,
    scrape,
    start_cluster,
    value,
    whatsapp_configured,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]

CUSTOMERS = 3
MESSAGES = 2


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}


@pytest.fixture
def processes(monkeypatch, settings, redis_url, tmp_path):
    """A qcluster (two workers, Redis broker) and a dispatcher, named for this test."""
    name = f"falai-metrics-{uuid.uuid4().hex[:8]}"
    env = cluster_env(monkeypatch, name, redis_url, FALAI_TEST_SENT_LOG=str(tmp_path / "sent.jsonl"))
    whatsapp_configured(settings)
    cluster = start_cluster(env)
    dispatcher = subprocess.Popen([sys.executable, "manage.py", "falai_dispatch_wakes"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    yield cluster, dispatcher
    kill(cluster)
    kill(dispatcher)
    drop_redis_queue(redis_url, name)


def _until(predicate, seconds: float, what: str) -> float:
    """Seconds until `predicate()` held (fails after `seconds`)."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > seconds:
            pytest.fail(f"{what}: not within {seconds} s")
        time.sleep(0.1)
    return time.monotonic() - started


def test_turns_on_workers_and_sends_by_the_dispatcher_show_on_the_web_scrape_within_10s(processes):
    from whatsapp import payloads

    cluster, dispatcher = processes
    before = scrape()
    customers = [f"55118{n:08d}" for n in range(CUSTOMERS)]
    client = Client()
    for i in range(MESSAGES):
        for wa_id in customers:
            text = "oi" if i == 0 else "meu nome é Ana"
            message = payloads.text(text, f"wamid.{wa_id}.{i}", "2026-12-06T10:00:00Z", wa_id=wa_id)
            assert payloads.deliver(client, payloads.envelope([message], wa_id=wa_id)).status_code == 200
    turns = CUSTOMERS * MESSAGES

    def all_done() -> bool:
        assert cluster.poll() is None and dispatcher.poll() is None, "a process exited"
        return TurnRecord.objects.filter(conversation_id__in=customers, status="done").count() == turns

    _until(all_done, 60, "the workers running every turn")
    from falai_django.models import History

    _until(lambda: not History.objects.filter(conversation_id__in=customers, send_status__in=["pending", "sending"])
           .exists() and History.objects.filter(conversation_id__in=customers, role="assistant").exists(),
           30, "the dispatcher sending every reply")
    replies = History.objects.filter(conversation_id__in=customers, role="assistant", send_status="sent").count()

    seen: dict = {}

    def counted() -> bool:
        seen["after"] = after = scrape()
        return (moved(before, after, "falai_turns_total", kind="message", status="done") == turns
                and moved(before, after, "falai_sends_total", channel="file", result="sent") == replies)

    waited = _until(counted, 10, "the workers' and the dispatcher's counts on this process's scrape")
    after = seen["after"]
    assert waited <= 10
    assert moved(before, after, "falai_turn_duration_seconds_count") == turns
    assert moved(before, after, "falai_llm_calls_total", provider="mock", model="mock", result="ok") >= turns
    assert value(after, "falai_outbox_pending") == 0
    assert value(after, "falai_dispatcher_heartbeat_age_seconds") < 10

    # The workers' daily totals are what the admin's Operations page reads (PostgreSQL's upsert of
    # falai_metric_day, its day truncation in the project's time zone).
    from falai_django.observe import operations

    report = operations.report()
    [mock_today] = [m for m in report.model_days if m.model == "mock"]
    assert mock_today.day == timezone.localdate()
    assert mock_today.calls == value(after, "falai_llm_calls_total", provider="mock", model="mock", result="ok")
    assert mock_today.p50 is not None and mock_today.p95 >= mock_today.p50
    assert report.days[-1].conversations == CUSTOMERS
    assert report.turns["hour"]["done"] == turns

    kill(dispatcher)  # gone: its heartbeat ages
    time.sleep(3)
    assert value(scrape(), "falai_dispatcher_heartbeat_age_seconds") >= 2
