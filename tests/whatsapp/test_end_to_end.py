"""The issue's end-to-end scenarios: a signed webhook in, Ana's reply out through the fake Graph API,
delivery statuses on the admin page, a redelivered webhook, and the 24-hour window with a template."""

from __future__ import annotations

import pytest
from django.test import Client

from falai_django.models import History, TurnRecord, Wake

from . import agents
from .conftest import TOKEN
from .pages import admin_page
from .payloads import PHONE_NUMBER_ID, WA_ID, deliver, envelope, status, text

pytestmark = pytest.mark.django_db(transaction=True)

ASK = "Oi! Com quem eu falo?"


def test_oi_reaches_the_graph_api_once_with_its_wamid_stored_and_statuses_shown(graph):
    response = deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))

    assert response.status_code == 200, response.content
    assert response.json()["inputs"] == 1
    assert len(graph.requests) == 1
    sent = graph.requests[0]
    assert sent.path == f"/v21.0/{PHONE_NUMBER_ID}/messages"
    assert sent.headers["Authorization"] == f"Bearer {TOKEN}"
    assert sent.body["messaging_product"] == "whatsapp"
    assert sent.body["to"] == WA_ID and sent.body["type"] == "text"
    assert sent.body["text"]["body"] == ASK
    row = History.objects.get(conversation_id=WA_ID, role="assistant")
    assert row.channel_message_id == "wamid.OUT1" and row.send_status == "sent"
    # the idempotency key travels with the message, and Meta echoes it on the statuses
    assert sent.body["biz_opaque_callback_data"] == row.idempotency_key
    assert sent.headers["Idempotency-Key"] == row.idempotency_key
    user = History.objects.get(conversation_id=WA_ID, role="user")
    assert (user.content, user.message_key) == ("oi", "wamid.IN1")

    for state in ("delivered", "read"):
        answer = deliver(Client(), envelope(statuses=[status("wamid.OUT1", state, "2026-09-20T10:00:05Z")]))
        assert answer.status_code == 200 and answer.json()["statuses"] == 1
    row.refresh_from_db()
    assert row.delivery_status == "read"
    html = admin_page(WA_ID)
    assert 'class="falai-delivery falai-delivery-read"' in html
    assert ">read</span>" in html


def test_the_same_webhook_delivered_twice_gets_one_reply(graph):
    body = envelope([text("oi", "wamid.IN1", agents.START)])
    first = deliver(Client(), body)
    second = deliver(Client(), body)

    assert first.status_code == second.status_code == 200
    assert graph.texts() == [ASK]
    assert History.objects.filter(conversation_id=WA_ID, role="user").count() == 1
    assert sorted(TurnRecord.objects.values_list("status", flat=True)) == ["done", "unchanged"]


def test_a_customer_silent_for_25_hours_gets_no_say_but_the_template(graph):
    from falai_django import host

    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    deliver(Client(), envelope([text("meu nome é Bia", "wamid.IN2", agents.START)]))
    assert graph.texts() == [ASK, "Prazer, Bia!"]
    wake = Wake.objects.get(conversation_id=WA_ID)

    agents.clock().advance("25h")
    result = host.handle_wake(WA_ID, wake.key)

    assert result.changed
    skipped = [line for line in result.result.outcomes if line.kind == "say"]
    assert [(line.status, line.code) for line in skipped] == [("skipped", "silenced")]
    assert graph.texts() == [ASK, "Prazer, Bia!"]  # the say did not go out
    template = graph.bodies()[-1]
    assert template["type"] == "template"
    assert template["template"] == {"name": "retomada", "language": {"code": "pt_BR"},
                                    "components": [{"type": "body",
                                                    "parameters": [{"type": "text", "text": "Bia"}]}]}
    row = History.objects.get(conversation_id=WA_ID, kind="template")
    assert row.send_status == "sent" and row.channel_message_id == f"wamid.OUT{len(graph.requests)}"


def demo_ana():
    from falai_django.providers.offline import OfflineProvider
    from project.agents import build_ana

    return build_ana(provider=OfflineProvider(language="pt"), clock=agents.clock())


def test_the_demos_ana_answers_on_whatsapp(graph, settings):
    from falai_django import conf

    settings.FALAI = {**settings.FALAI, "AGENT": "whatsapp.test_end_to_end.demo_ana"}
    conf.clear_cache()

    deliver(Client(), envelope([text("oi, quero saber como funciona", "wamid.IN1", agents.START)]))

    reply = History.objects.get(conversation_id=WA_ID, role="assistant")
    assert graph.texts() == [reply.content] and reply.content
    assert reply.channel_message_id == "wamid.OUT1"
