"""The 24-hour window: a silenced on every input but a customer message once the customer has been
quiet for more than a day; "skip" lets do steps run, "stop" passes the plain reason, None turns it off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from falai_django import conf
from falai_django.channels import silenced_by_channel
from falai_django.channels.whatsapp.window import REASON, window_silenced
from falai_django.engine.session import Session
from falai_django.models import History, Wake

from . import agents
from .payloads import WA_ID, deliver, envelope, text

NOW = datetime(2026, 9, 21, 12, 0, tzinfo=UTC)


def session(last_user_at: str | None) -> Session:
    return Session.fresh(WA_ID).model_copy(update={"last_user_at": last_user_at})


def test_inside_24_hours_nothing_is_silenced():
    assert window_silenced("wake", session("2026-09-20T12:00:00.000Z"), NOW, "skip") is None


@pytest.mark.parametrize(("mode", "expected"), [("skip", {"reason": REASON, "skip": True}), ("stop", REASON)])
def test_after_24_hours_the_window_is_closed(mode, expected):
    assert window_silenced("wake", session("2026-09-20T11:59:59.000Z"), NOW, mode) == expected
    assert window_silenced("event", session(None), NOW, mode) == expected  # never wrote: closed


def test_a_customer_message_is_never_silenced_by_the_window():
    assert window_silenced("message", session("2026-01-01T00:00:00.000Z"), NOW, "skip") is None


def test_the_rule_reads_the_setting(settings):
    settings.FALAI = {"AGENT": "whatsapp.agents.current_agent",
                      "WHATSAPP": {**settings.FALAI["WHATSAPP"], "WINDOW": None}}
    conf.clear_cache()
    assert silenced_by_channel("wake", session(None)) is None
    settings.FALAI = {"AGENT": "whatsapp.agents.current_agent"}
    conf.clear_cache()
    assert silenced_by_channel("wake", session(None)) is None
    settings.FALAI = {"AGENT": "whatsapp.agents.current_agent",
                      "WHATSAPP": {**settings.FALAI.get("WHATSAPP", {}), "WINDOW": "stop"}}
    conf.clear_cache()
    assert silenced_by_channel("wake", session(None)) == REASON


def park(graph) -> str:
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    deliver(Client(), envelope([text("meu nome é Bia", "wamid.IN2", agents.START)]))
    return Wake.objects.get(conversation_id=WA_ID).key


@pytest.mark.django_db(transaction=True)
def test_a_new_customer_message_reopens_the_window(graph):
    from falai_django import host

    key = park(graph)
    agents.clock().advance("25h")
    deliver(Client(), envelope([text("voltei", "wamid.IN3", "2026-09-21T11:00:00Z")]))

    result = host.handle_wake(WA_ID, key)

    says = [(line.status, line.code) for line in result.result.outcomes if line.kind == "say"]
    assert says == [("ok", None)]
    assert graph.texts()[-1] == "Ainda por aí, Bia?"


@pytest.mark.django_db(transaction=True)
def test_stop_mode_ends_the_run_without_the_template(graph, settings):
    from falai_django import host

    settings.FALAI = {**settings.FALAI, "WHATSAPP": {**settings.FALAI["WHATSAPP"], "WINDOW": "stop"}}
    conf.clear_cache()
    key = park(graph)
    requests = len(graph.requests)
    agents.clock().advance("25h")
    result = host.handle_wake(WA_ID, key)
    lines = [(line.kind, line.status, line.code) for line in result.result.outcomes]
    assert lines == [("wait", "ok", "no-reply"), ("say", "skipped", "silenced")]  # the run ends at the say
    assert result.result.ended and result.result.ended[0].flow_id == "triagem"
    assert len(graph.requests) == requests  # a plain reason: nothing goes out, not even the template
    assert not History.objects.filter(kind="template").exists()


@pytest.mark.django_db(transaction=True)
def test_with_the_rule_off_the_say_goes_out_after_25_hours(graph, settings):
    from falai_django import host

    settings.FALAI = {**settings.FALAI, "WHATSAPP": {**settings.FALAI["WHATSAPP"], "WINDOW": None}}
    conf.clear_cache()
    key = park(graph)
    agents.clock().advance("25h")
    host.handle_wake(WA_ID, key)
    assert graph.texts()[-1] == "Ainda por aí, Bia?"


def test_the_window_is_24_hours_on_the_agent_clock():
    last = NOW - timedelta(hours=24)
    assert window_silenced("wake", session(last.isoformat().replace("+00:00", "Z")), NOW, "skip") is None
