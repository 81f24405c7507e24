"""`GET /falai/metrics`: who may read it, what every scrape holds, and counters and gauges that
follow what the host did. (Across processes: test_pg_metrics_cluster.py.)"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from falai_django import host
from falai_django.engine.errors import ProviderError
from falai_django.models import Heartbeat, History, MetricTotal, Session, Wake
from falai_django.observe import exposition, metrics
from falai_django.testing import mock_provider

from . import agents, senders
from .helpers import METRICS_TOKEN, conflict_once, moved, post, scrape, staff_client, url, value
from .test_outages import database_away

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = METRICS_TOKEN
NAMES = [
    "falai_turns_total", "falai_turn_duration_seconds", "falai_turn_replays_total", "falai_llm_calls_total",
    "falai_llm_call_duration_seconds", "falai_llm_tokens_total", "falai_sends_total", "falai_outbox_pending",
    "falai_outbox_oldest_pending_seconds", "falai_wakes_overdue", "falai_wake_lateness_seconds",
    "falai_dispatcher_heartbeat_age_seconds", "falai_conversations",
]


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": TOKEN}


# ---------------------------------------------------------------------------------------------
# Who may read it
# ---------------------------------------------------------------------------------------------


def test_without_a_credential_it_is_a_401_asking_for_the_bearer_token_never_a_redirect():
    response = Client().get("/falai/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"falai_turns_total" not in response.content


@pytest.mark.parametrize("header", [f"Bearer {TOKEN}x", "Bearer ", f"Token {TOKEN}", TOKEN])
def test_a_wrong_or_misplaced_token_is_a_401(header):
    assert Client().get("/falai/metrics", HTTP_AUTHORIZATION=header).status_code == 401


def test_with_no_token_configured_a_bearer_header_opens_nothing(settings):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": ""}
    assert Client().get("/falai/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401
    assert Client().get("/falai/metrics", HTTP_AUTHORIZATION="Bearer None").status_code == 401


def test_a_user_without_the_api_permission_is_a_403_and_one_with_it_reads_the_metrics():
    user = User.objects.create_user("visitor", password="pw")
    client = Client()
    client.force_login(user)
    refused = client.get("/falai/metrics")
    assert refused.status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="change_conversation"))
    allowed = Client()
    allowed.force_login(User.objects.get(pk=user.pk))
    response = allowed.get("/falai/metrics")
    assert response.status_code == 200 and b"# TYPE falai_turns_total counter" in response.content
    assert staff_client().get("/falai/metrics").status_code == 200  # the API's token authentication


def test_a_project_with_login_required_middleware_still_gets_a_401_not_a_login_redirect(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.contrib.auth.middleware.LoginRequiredMiddleware"]
    assert Client().get("/falai/metrics").status_code == 401
    assert Client().get("/falai/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_a_scraper_accepting_only_text_gets_its_refusal_as_text():
    response = Client().get("/falai/metrics", HTTP_ACCEPT="text/plain")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("text/plain") and b"credentials" in response.content


def test_while_the_database_is_away_the_scrape_is_a_503(tmp_path):
    with database_away(tmp_path):
        response = Client().get("/falai/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert Client().get("/falai/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


# ---------------------------------------------------------------------------------------------
# What every scrape holds
# ---------------------------------------------------------------------------------------------


def test_a_fresh_install_shows_every_named_metric_with_a_sample():
    response = Client().get("/falai/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    for name in NAMES:
        family_name = name.removesuffix("_total")
        assert family_name in families, name
        assert families[family_name].samples, f"{name} has no sample"
    samples = scrape()
    assert value(samples, "falai_turns_total", kind="message", status="done") == 0
    assert value(samples, "falai_outbox_pending") == 0
    assert value(samples, "falai_sends_total", channel="record", result="sent") == 0
    assert value(samples, "falai_llm_calls_total", provider="mock", model="", result="ok") == 0
    assert value(samples, "falai_dispatcher_heartbeat_age_seconds") == math.inf  # never beat
    assert value(samples, "falai_wake_lateness_seconds_count") == 0
    assert {labels for (name, labels) in samples if name == "falai_conversations"} == {
        (("state", state),) for state in ("asking", "waiting", "silenced", "human")}


# ---------------------------------------------------------------------------------------------
# Counters follow what the host did
# ---------------------------------------------------------------------------------------------


def test_a_turn_moves_the_turn_model_token_and_send_counters():
    counting = mock_provider(understand=[agents.understand_reply] * 9, speak=[agents.speak_reply] * 9, usage=True)
    agents.use(agents.ana(provider=counting, clock=agents.clock()))
    before = scrape()
    host.handle_message("s1", "oi", id="wamid.1")
    host.handle_message("s1", "oi", id="wamid.1")  # the same id again: unchanged
    after = scrape()
    assert moved(before, after, "falai_turns_total", kind="message", status="done") == 1
    assert moved(before, after, "falai_turns_total", kind="message", status="unchanged") == 1
    assert moved(before, after, "falai_turn_duration_seconds_count") == 2
    assert 0 < moved(before, after, "falai_turn_duration_seconds_sum") < 5
    calls = moved(before, after, "falai_llm_calls_total", provider="mock", model="mock", result="ok")
    assert calls >= 1  # the greeting is spoken (nothing to understand yet)
    assert moved(before, after, "falai_llm_call_duration_seconds_count", provider="mock", model="mock") == calls
    assert moved(before, after, "falai_llm_tokens_total", provider="mock", model="mock", type="prompt") > 0
    assert moved(before, after, "falai_llm_tokens_total", provider="mock", model="mock", type="completion") > 0
    assert moved(before, after, "falai_sends_total", channel="record", result="sent") == 1
    assert [m.text for m in senders.sent] == ["Oi! Com quem eu falo?"]


def test_a_failing_model_counts_its_error_kind_and_the_parked_turn_as_retry():
    host.handle_message("s1", "oi", id="wamid.1")
    failing = agents.scripted_provider(understand=[ProviderError("mock", "overload", "busy")] * 3)
    agents.use(agents.ana(provider=failing, clock=agents.clock()))
    before = scrape()
    result = host.handle_message("s1", "meu nome é Ana", id="wamid.2")
    after = scrape()
    assert result.status == "retry"
    assert moved(before, after, "falai_turns_total", kind="message", status="retry") == 1
    assert moved(before, after, "falai_llm_calls_total", provider="mock", model="", result="overload") >= 1
    assert moved(before, after, "falai_turns_total", kind="message", status="done") == 0


def test_a_replayed_conflict_is_counted(monkeypatch):
    conflict_once(monkeypatch)
    before = scrape()
    assert host.handle_message("s1", "oi", id="wamid.1").replays == 1
    after = scrape()
    assert moved(before, after, "falai_turn_replays_total") == 1


def test_a_send_the_channel_refuses_is_counted_as_retry_then_sent(settings):
    from falai_django.host import delivery

    senders.fail_next(1)
    before = scrape()
    host.handle_message("s1", "oi", id="wamid.1")
    History.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    delivery.sweep_unsent(older_than_s=0)
    after = scrape()
    assert moved(before, after, "falai_sends_total", channel="record", result="retry") == 1
    assert moved(before, after, "falai_sends_total", channel="record", result="sent") == 1


def test_a_wake_fired_late_observes_its_lateness():
    from falai_django.host.wakes import dispatch_once

    client = staff_client()
    post(client, url("s1", "messages"), {"text": "oi", "id": "wamid.1"})
    post(client, url("s1", "messages"), {"text": "meu nome é Ana", "id": "wamid.2"})
    before = scrape()
    agents.clock().advance("1h")
    agents.clock().advance("90s")
    assert dispatch_once() == 1
    after = scrape()
    assert moved(before, after, "falai_turns_total", kind="wake", status="done") == 1
    assert moved(before, after, "falai_wake_lateness_seconds_count") == 1
    assert 90 <= moved(before, after, "falai_wake_lateness_seconds_sum") < 120
    assert moved(before, after, "falai_wake_lateness_seconds_bucket", le="60.0") == 0
    assert moved(before, after, "falai_wake_lateness_seconds_bucket", le="300.0") == 1


def test_counts_written_by_another_process_are_added_not_replaced():
    """What a worker flushed sits in the table; this process's scrape adds its own to it."""
    MetricTotal.objects.create(name="falai_turns_total", labels=metrics.series_key({"kind": "event", "status": "done"}),
                               value=41)
    metrics.inc("falai_turns_total", kind="event", status="done")
    assert value(scrape(), "falai_turns_total", kind="event", status="done") == 42
    assert value(scrape(), "falai_turns_total", kind="event", status="done") == 42  # flushed once


def test_a_flush_that_fails_keeps_its_counts_for_the_next(monkeypatch):
    metrics.flush()
    metrics.inc("falai_turn_replays_total", 3)

    def refuse(taken, alias):
        raise RuntimeError("database away")

    monkeypatch.setattr(metrics, "_write", refuse)
    with pytest.raises(RuntimeError):
        metrics.flush()
    monkeypatch.undo()
    assert metrics.flush() == 1
    assert MetricTotal.objects.get(name="falai_turn_replays_total").value == 3


# ---------------------------------------------------------------------------------------------
# Gauges read from the tables
# ---------------------------------------------------------------------------------------------


def test_the_backlog_gauges_show_unsent_replies_and_overdue_wakes():
    now = timezone.now()
    host.handle_message("s1", "oi", id="wamid.1")
    History.objects.create(conversation_id="s1", role="assistant", content="late", at=now - timedelta(seconds=90),
                           send_status="pending")
    History.objects.create(conversation_id="s1", role="assistant", content="later", at=now - timedelta(seconds=5),
                           send_status="pending")
    Wake.objects.create(conversation_id="s1", key="w-late", at=now - timedelta(seconds=120))
    Wake.objects.create(conversation_id="s1", key="w-queued", at=now - timedelta(seconds=30), state="queued")
    Wake.objects.create(conversation_id="s1", key="w-done", at=now - timedelta(seconds=600), state="done")
    Wake.objects.create(conversation_id="s1", key="w-future", at=now + timedelta(hours=1))
    samples = scrape()
    assert value(samples, "falai_outbox_pending") == 2
    assert 90 <= value(samples, "falai_outbox_oldest_pending_seconds") < 100
    assert value(samples, "falai_wakes_overdue") == 2
    assert 120 <= value(samples, "falai_wakes_oldest_overdue_seconds") < 130


def test_the_heartbeat_age_is_the_time_since_the_dispatcher_last_beat():
    from falai_django.host.wakes import Dispatcher

    Dispatcher(poll_s=0.01).run(max_seconds=0.2)
    beat = Heartbeat.objects.get(process="dispatcher")
    assert (timezone.now() - beat.at).total_seconds() < 5 and beat.pid
    assert value(scrape(), "falai_dispatcher_heartbeat_age_seconds") < 5
    Heartbeat.objects.update(at=timezone.now() - timedelta(seconds=42))
    assert 42 <= value(scrape(), "falai_dispatcher_heartbeat_age_seconds") < 50


def test_conversations_are_counted_by_state():
    client = staff_client()
    post(client, url("asks", "messages"), {"text": "oi", "id": "a.1"})  # asks the name
    post(client, url("waits", "messages"), {"text": "oi", "id": "w.1"})
    post(client, url("waits", "messages"), {"text": "meu nome é Ana", "id": "w.2"})  # waits an hour
    post(client, url("human", "messages"), {"text": "oi", "id": "h.1"})
    assert post(client, url("human", "silence"), {"reason": "human", "owner": "maria"}).status_code == 200
    rows = dict(Session.objects.values_list("id", "silenced_reason"))
    samples = scrape()
    expected = {
        "asking": Session.objects.filter(asking_flow__isnull=False).count(),
        "waiting": Session.objects.filter(waiting_until__isnull=False).count(),
        "silenced": Session.objects.filter(silenced_reason__isnull=False).count(),
        "human": Session.objects.filter(human_owner__isnull=False).count(),
    }
    assert expected["waiting"] == 1 and expected["silenced"] == 1 and expected["human"] == 1, rows
    assert expected["asking"] >= 1, rows
    for state, count in expected.items():
        assert value(samples, "falai_conversations", state=state) == count, state


def test_the_exposition_renders_without_a_request():
    body, content_type = exposition.render()
    assert content_type.startswith("text/plain") and b"falai_wakes_overdue 0.0" in body


def test_a_scraper_asking_for_openmetrics_gets_it():
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    response = Client().get("/falai/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    families = {f.name for f in openmetrics_families(response.content.decode())}
    assert {"falai_turns", "falai_outbox_pending", "falai_wake_lateness_seconds"} <= families


def test_a_streamed_turn_is_counted_once_with_the_readers_time_left_out():
    import time

    before = scrape()
    events = []
    for event in host.stream("s1", {"message": "oi", "id": "wamid.1"}):
        events.append(event)
        time.sleep(0.3)  # a slow reader: its time is not the host's
    after = scrape()
    assert events[-1]["done"] and events[-1]["host"].status == "done"
    assert moved(before, after, "falai_turns_total", kind="message", status="done") == 1
    assert moved(before, after, "falai_turn_duration_seconds_count") == 1
    assert moved(before, after, "falai_turn_duration_seconds_sum") < 0.3


def test_a_senders_channel_label():
    from falai_django.channels import whatsapp
    from falai_django.channels.whatsapp import sender as whatsapp_sender
    from falai_django.sending import channel_name, log_sender

    def sms_sender(message):
        return None

    def push(message):
        return None

    push.channel = "firebase"
    assert [channel_name(s) for s in (whatsapp.send, whatsapp_sender.send, log_sender, sms_sender, push)] == [
        "whatsapp", "whatsapp", "log", "sms", "firebase"]
