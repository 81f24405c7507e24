"""The whatsapp_template action: a template in the outbox under the action's key, sent once as
`type: "template"`, even when the turn that ran it is replayed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import Client

from falai_django import channels
from falai_django.channels.whatsapp.templates import run_template, template_action, template_of
from falai_django.engine.session import Session
from falai_django.models import Conversation, History, Wake
from falai_django.stores.django import DjangoStore

from . import agents
from .payloads import WA_ID, deliver, envelope, text


def test_the_action_is_registered_with_the_binding_names():
    from falai_django import falai

    definition = template_action()
    assert {"name", "language", "components"} <= set(definition["parameters"])
    action = falai().action(**definition)
    assert action.run is run_template


def test_components_may_be_json_text_and_body_a_shorthand():
    template = template_of({"name": "pedido", "language": "pt_BR",
                            "components": '[{"type": "header", "parameters": [{"type": "text", "text": "Oi"}]}]',
                            "body": ["Bia", "3"]})
    assert template == {"name": "pedido", "language": {"code": "pt_BR"}, "components": [
        {"type": "header", "parameters": [{"type": "text", "text": "Oi"}]},
        {"type": "body", "parameters": [{"type": "text", "text": "Bia"}, {"type": "text", "text": "3"}]}]}


@pytest.mark.parametrize(("params", "problem"), [
    ({}, "template name"),
    ({"name": " "}, "template name"),
    ({"name": "x", "components": "{not json"}, "not JSON"),
    ({"name": "x", "components": '{"type": "body"}'}, "JSON array"),
])
def test_malformed_parameters_are_a_failed_action(params, problem):
    with pytest.raises(ValueError, match=problem):
        template_of(params)


@pytest.mark.django_db
def test_the_language_defaults_to_the_setting(settings):
    from falai_django import conf

    settings.FALAI = {**settings.FALAI, "WHATSAPP": {**settings.FALAI["WHATSAPP"], "LANGUAGE": "pt_BR"}}
    conf.clear_cache()
    assert template_of({"name": "x"})["language"] == {"code": "pt_BR"}


def test_outside_the_host_loop_the_action_fails_clearly():
    result = run_template({"name": "x"}, SimpleNamespace(key="r:s:1", run=None))
    assert "turn loop" in result["failed"]


@pytest.mark.django_db(transaction=True)
def test_in_a_conversations_first_turn_the_action_defers_until_it_is_saved():
    token = channels.enter_session("5511000000009")
    try:
        result = run_template({"name": "x"}, SimpleNamespace(key="r:s:1", run=None))
    finally:
        channels.leave_session(token)
    assert result["defer"] == "5s"
    assert History.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_campaign_start_for_a_new_number_sends_its_template(graph):
    from falai_django import host
    from falai_django.host.wakes import dispatch_once

    new = "5511000000077"
    first = host.handle_start(new, "campanha", key="campanha:1")
    assert [(line.kind, line.status) for line in first.result.outcomes] == [("do", "deferred")]
    assert graph.requests == []

    agents.clock().advance("5s")
    assert dispatch_once() == 1  # the deferred action's wake, through django-q2 (in-line here)

    bodies = [b for b in graph.bodies() if b["to"] == new]
    assert [b["type"] for b in bodies] == ["template"]
    assert bodies[0]["template"]["name"] == "convite"
    assert History.objects.get(conversation_id=new, kind="template").send_status == "sent"


@pytest.mark.django_db(transaction=True)
def test_the_same_action_key_queues_and_sends_the_template_once(graph):
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    ctx = SimpleNamespace(key="triagem#wamid.IN1:volta:1", run=SimpleNamespace(id="triagem#wamid.IN1"))
    token = channels.enter_session(WA_ID)
    try:
        first = run_template({"name": "retomada", "language": "pt_BR"}, ctx)
        second = run_template({"name": "retomada", "language": "pt_BR"}, ctx)
    finally:
        channels.leave_session(token)

    assert first["ok"] and second["ok"]
    rows = History.objects.filter(kind="template")
    assert rows.count() == 1
    assert rows.get().message_key == ctx.key and rows.get().run_id == "triagem#wamid.IN1"
    templates = [b for b in graph.bodies() if b["type"] == "template"]
    assert templates == [{"messaging_product": "whatsapp", "recipient_type": "individual", "to": WA_ID,
                          "biz_opaque_callback_data": rows.get().idempotency_key, "type": "template",
                          "template": {"name": "retomada", "language": {"code": "pt_BR"}}}]


@pytest.mark.django_db(transaction=True)
def test_a_replayed_wake_turn_sends_the_template_once(graph, monkeypatch):
    from falai_django import host

    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    deliver(Client(), envelope([text("meu nome é Bia", "wamid.IN2", agents.START)]))
    key = Wake.objects.get(conversation_id=WA_ID).key
    agents.clock().advance("25h")

    agent = agents.current_agent()
    original = type(agent).turn
    raced = {"done": False}

    def racing_turn(self, **kwargs):
        result = original(self, **kwargs)
        if not raced["done"]:  # another writer saves between our load and our save
            raced["done"] = True
            other = Session.from_json(Conversation.objects.get(pk=WA_ID).blob)
            other.metadata["touched"] = True
            DjangoStore().save(other, other.version)
        return result

    monkeypatch.setattr(type(agent), "turn", racing_turn)
    result = host.handle_wake(WA_ID, key)

    assert result.replays == 1 and result.changed
    assert History.objects.filter(kind="template").count() == 1
    assert [b["type"] for b in graph.bodies()].count("template") == 1
