"""Issue 47: every inbound message reaches the agent or the transcript.

Contacts, orders and WhatsApp Flow replies as readable text with their data in the context;
customers known only by a business-scoped user id (BSUID) as conversations, answered through
`recipient`; edits and deletions on the transcript; and one of every inbound type the Cloud API
documents through the signed webhook, each found in a turn's input or on the transcript.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client
from host.helpers import METRICS_TOKEN, moved, scrape

from falai_django.channels.whatsapp.parse import WELCOME_EVENT, is_bsuid, parse_webhook
from falai_django.host.turns import load_history
from falai_django.models import History, TurnRecord

from . import agents
from .pages import admin_page
from .payloads import PHONE_NUMBER_ID, WA_ID, deliver, envelope, message, status, text, ts

AT = agents.START
BSUID = "BR.1502576394655843"

CARD = {
    "addresses": [{"city": "São Paulo", "country": "Brazil", "country_code": "BR", "type": "WORK"}],
    "emails": [{"email": "joao@example.com", "type": "WORK"}],
    "name": {"formatted_name": "João Silva", "first_name": "João", "last_name": "Silva"},
    "org": {"company": "Padaria Silva"},
    "phones": [{"phone": "+55 11 98888-7777", "wa_id": "5511988887777", "type": "CELL"}],
}
ORDER = {
    "catalog_id": "893126488742519",
    "text": "Pode entregar amanhã?",
    "product_items": [
        {"product_retailer_id": "pao-de-queijo", "quantity": 2, "item_price": 12.5, "currency": "BRL"},
        {"product_retailer_id": "cafe-500g", "quantity": 1, "item_price": 29.9, "currency": "BRL"},
    ],
}
FLOW_REPLY = {
    "type": "nfm_reply",
    "nfm_reply": {
        "name": "flow",
        "body": "Sent",
        "response_json": json.dumps({"flow_token": "cadastro-42", "nome": "Ana", "cidade": "Recife",
                                     "interesses": ["pães", "bolos"]}, ensure_ascii=False),
    },
}


def parsed(payload: dict, **kw):
    batch = parse_webhook(envelope([payload], **kw))
    assert len(batch.messages) == 1, (batch.skipped, batch.notes)
    return batch.messages[0]


def bsuid_envelope(messages: list[dict], *, username: str = "ana.padaria") -> dict:
    """A customer who adopted a username: `contacts` has `user_id` and no `wa_id`, the message
    has `from_user_id` and no `from` (Meta's business-scoped user id shape)."""
    body = envelope(messages)
    body["entry"][0]["changes"][0]["value"]["contacts"] = [
        {"profile": {"name": "Ana", "username": username}, "user_id": BSUID}]
    for item in messages:
        item.pop("from", None)
        item["from_user_id"] = BSUID
    return body


# -- the new types as text and context -----------------------------------------------------------


def test_a_shared_contact_card_reads_as_its_name_and_number_with_the_card_in_the_context():
    got = parsed(message("contacts", "wamid.C", AT, [CARD]))
    assert got.text == "[contact: João Silva, +55 11 98888-7777]"
    assert got.context["whatsapp"]["contacts"] == [CARD]

    second = {"name": {"first_name": "Maria"}, "emails": [{"email": "maria@example.com"}]}
    got = parsed(message("contacts", "wamid.C2", AT, [CARD, second]))
    assert got.text == "[contacts: João Silva, +55 11 98888-7777; Maria, maria@example.com]"
    assert len(got.context["whatsapp"]["contacts"]) == 2


def test_an_order_reads_as_the_customers_note_and_the_items_with_a_total():
    got = parsed(message("order", "wamid.O", AT, ORDER))
    assert got.text == ("Pode entregar amanhã?\n"
                        "[order: 2 × pao-de-queijo at 12.5 BRL; 1 × cafe-500g at 29.9 BRL; total 54.9 BRL]")
    assert got.context["whatsapp"]["order"] == ORDER

    bare = {"catalog_id": "1", "product_items": [{"product_retailer_id": "x", "quantity": "3"}]}
    assert parsed(message("order", "wamid.O2", AT, bare)).text == "[order: 3 × x]"


def test_a_flow_reply_has_its_response_json_parsed_into_the_context_and_its_answers_as_text():
    got = parsed(message("interactive", "wamid.F", AT, FLOW_REPLY))
    flow = got.context["whatsapp"]["flow"]
    assert flow["response"] == {"flow_token": "cadastro-42", "nome": "Ana", "cidade": "Recife",
                                "interesses": ["pães", "bolos"]}
    assert flow["flow_token"] == "cadastro-42" and flow["body"] == "Sent"
    assert got.text == "[form: nome: Ana; cidade: Recife; interesses: pães, bolos]"


def test_a_flow_reply_whose_response_json_is_not_an_object_is_kept_as_sent():
    broken = {"type": "nfm_reply", "nfm_reply": {"name": "pesquisa", "body": "Sent", "response_json": "{oops"}}
    got = parsed(message("interactive", "wamid.F2", AT, broken))
    assert got.context["whatsapp"]["flow"]["response_json"] == "{oops"
    assert got.text == "[form pesquisa: {oops]"


def test_request_welcome_reaches_the_agent_as_an_event():
    got = parsed(message("request_welcome", "wamid.W", AT))
    assert (got.event, got.text) == (WELCOME_EVENT, "")


# -- business-scoped user ids -------------------------------------------------------------------


def test_a_sender_without_a_phone_number_is_known_by_the_business_scoped_user_id():
    batch = parse_webhook(bsuid_envelope([text("oi", "wamid.B1", AT)]))
    (got,) = batch.messages
    assert got.session_id == BSUID
    context = got.context["whatsapp"]
    assert context["user_id"] == BSUID and context["username"] == "ana.padaria" and "wa_id" not in context


def test_a_sender_with_both_keeps_the_phone_number_as_the_conversation():
    body = envelope([dict(text("oi", "wamid.B2", AT), from_user_id=BSUID)])
    body["entry"][0]["changes"][0]["value"]["contacts"][0]["user_id"] = BSUID
    (got,) = parse_webhook(body).messages
    assert got.session_id == WA_ID
    assert got.context["whatsapp"]["wa_id"] == WA_ID and got.context["whatsapp"]["user_id"] == BSUID


def test_only_business_scoped_ids_are_taken_for_one():
    assert is_bsuid(BSUID) and is_bsuid("US.ENT.11815799212886844830")
    assert not is_bsuid(WA_ID) and not is_bsuid("") and not is_bsuid("wamid.X")


@pytest.mark.django_db(transaction=True)
def test_a_username_customer_is_answered_through_recipient_and_its_statuses_find_the_row(graph):
    response = deliver(Client(), bsuid_envelope([text("oi", "wamid.B1", AT)]))
    assert response.status_code == 200 and response.json()["inputs"] == 1

    assert len(graph.requests) == 1
    sent = graph.requests[0].body
    assert sent["recipient"] == BSUID and "to" not in sent and sent["recipient_type"] == "individual"
    row = History.objects.get(conversation_id=BSUID, role="assistant")
    assert row.send_status == "sent"

    # Meta withholds the number on statuses too: recipient_user_id, no recipient_id
    late = status("wamid.NOT-STORED", "delivered", "2026-09-20T10:00:05Z")
    late.pop("recipient_id")
    late["recipient_user_id"] = BSUID
    late["biz_opaque_callback_data"] = row.idempotency_key
    assert deliver(Client(), envelope(statuses=[late])).json()["statuses"] == 1
    row.refresh_from_db()
    assert row.delivery_status == "delivered"


@pytest.mark.django_db(transaction=True)
def test_a_message_with_neither_from_nor_from_user_id_is_logged_and_counted(graph, caplog):
    nobody = text("oi", "wamid.X", AT)
    nobody.pop("from")
    body = envelope([nobody])
    body["entry"][0]["changes"][0]["value"]["contacts"] = []
    with caplog.at_level(logging.WARNING, logger="falai_django.whatsapp"):
        assert deliver(Client(), body).json()["skipped"] == 1
    assert "'text' message wamid.X without a sender" in caplog.text
    assert TurnRecord.objects.count() == 0


# -- edits and deletions ------------------------------------------------------------------------


def edit(wamid: str, original: str, body: str, at: str = "2026-09-20T10:01:00Z") -> dict:
    return message("edit", wamid, at, {"original_message_id": original,
                                       "message": {"type": "text", "text": {"body": body}}})


def revoke(wamid: str, original: str, at: str = "2026-09-20T10:02:00Z") -> dict:
    return message("revoke", wamid, at, {"original_message_id": original})


@pytest.mark.django_db(transaction=True)
def test_an_edit_replaces_the_line_keeps_the_earlier_text_and_runs_no_turn(graph):
    deliver(Client(), envelope([text("meu nome é Ana", "wamid.IN1", AT)]))
    turns, sends = TurnRecord.objects.count(), len(graph.requests)

    assert deliver(Client(), envelope([edit("wamid.E1", "wamid.IN1", "meu nome é Ana Maria")])).status_code == 200
    deliver(Client(), envelope([edit("wamid.E1", "wamid.IN1", "meu nome é Ana Maria")]))  # redelivered

    line = History.objects.get(conversation_id=WA_ID, role="user", message_key="wamid.IN1")
    assert line.content == "meu nome é Ana Maria"
    assert line.edited_at is not None and line.edited_at.isoformat().startswith("2026-09-20T10:01:00")
    assert [p["text"] for p in line.media["previous"]] == ["meu nome é Ana"]
    assert TurnRecord.objects.count() == turns and len(graph.requests) == sends
    assert {"role": "user", "content": "meu nome é Ana Maria"} in load_history(WA_ID)
    html = admin_page(WA_ID)
    assert 'class="falai-edited"' in html and "meu nome é Ana</span>" not in html


@pytest.mark.django_db(transaction=True)
def test_an_edit_of_a_message_still_in_the_inbox_is_the_text_its_turn_reads(graph, monkeypatch):
    monkeypatch.setattr("falai_django.channels.whatsapp.receive.enqueue_turn", lambda record_id: None)
    deliver(Client(), envelope([text("meu nome é Bia", "wamid.IN1", AT)]))
    deliver(Client(), envelope([edit("wamid.E1", "wamid.IN1", "meu nome é Clara")]))

    record = TurnRecord.objects.get(input_key="wamid.IN1")
    assert record.status == "received" and record.input["turn"]["message"] == "meu nome é Clara"
    from falai_django.host.turns import process_record

    process_record(record.pk)
    assert History.objects.get(role="user").content == "meu nome é Clara"
    assert graph.texts()[-1] == "Prazer, Clara!"


@pytest.mark.django_db(transaction=True)
def test_a_revoke_marks_the_line_deleted_and_the_model_no_longer_reads_it(graph):
    deliver(Client(), envelope([text("meu cpf é 123", "wamid.IN1", AT)]))
    assert deliver(Client(), envelope([revoke("wamid.R1", "wamid.IN1")])).status_code == 200

    line = History.objects.get(conversation_id=WA_ID, message_key="wamid.IN1")
    assert line.deleted_at is not None and line.content == "meu cpf é 123"
    assert all(item["content"] != "meu cpf é 123" for item in load_history(WA_ID))
    html = admin_page(WA_ID)
    assert "deleted by the customer" in html and "falai-text-deleted" in html


@pytest.mark.django_db(transaction=True)
def test_an_edit_of_a_message_nowhere_yet_is_written_as_its_own_line(graph):
    deliver(Client(), envelope([text("oi", "wamid.IN1", AT)]))
    deliver(Client(), envelope([edit("wamid.E9", "wamid.GONE", "texto novo")]))
    line = History.objects.get(kind="edit")
    assert (line.role, line.content, line.media, line.message_key) == ("user", "texto novo",
                                                                      {"edit_of": "wamid.GONE"}, "wamid.E9")


# -- one of every type --------------------------------------------------------------------------

MEDIA = {"mime_type": "image/jpeg", "sha256": "abc", "id": "1234567890"}
EVERY_TYPE = [
    text("quero saber o preço", "wamid.T01", AT),
    message("image", "wamid.T02", AT, {**MEDIA, "caption": "esta aqui"}),
    message("audio", "wamid.T03", AT, {"mime_type": "audio/ogg; codecs=opus", "sha256": "a", "id": "2",
                                       "voice": True}),
    message("video", "wamid.T04", AT, {"mime_type": "video/mp4", "sha256": "v", "id": "3"}),
    message("document", "wamid.T05", AT, {"mime_type": "application/pdf", "sha256": "d", "id": "4",
                                          "filename": "pedido.pdf"}),
    message("sticker", "wamid.T06", AT, {"mime_type": "image/webp", "sha256": "s", "id": "5", "animated": False}),
    message("location", "wamid.T07", AT, {"latitude": -8.05, "longitude": -34.9, "name": "Loja",
                                          "address": "Rua A, 1"}),
    message("contacts", "wamid.T08", AT, [CARD]),
    message("order", "wamid.T09", AT, ORDER),
    message("interactive", "wamid.T10", AT, {"type": "button_reply", "button_reply": {"id": "sim", "title": "Sim"}}),
    message("interactive", "wamid.T11", AT, {"type": "list_reply", "list_reply": {"id": "p1", "title": "Pão",
                                                                               "description": "fresco"}}),
    message("interactive", "wamid.T12", AT, FLOW_REPLY),
    message("interactive", "wamid.T13", AT, {"type": "call_permission_reply", "call_permission_reply": {
        "response": "accept", "expiration_timestamp": int(ts(AT)) + 3600, "response_source": "user_action"}}),
    message("button", "wamid.T14", AT, {"payload": "quero", "text": "Quero"}),
    message("unsupported", "wamid.T15", AT, {"type": "poll_creation"},
            errors=[{"code": 131051, "title": "Message type unknown", "message": "Message type unknown",
                     "error_data": {"details": "Message type is currently not supported."}}]),
    message("unknown", "wamid.T16", AT, errors=[{"code": 131051, "title": "Message type unknown"}]),
    message("request_welcome", "wamid.T17", AT),
    # referred by a click-to-WhatsApp ad: a text with its referral
    dict(text("vi o anúncio", "wamid.T18", AT), referral={"source_url": "https://fb.me/x", "source_type": "ad",
                                                          "source_id": "1", "headline": "Pão quente"}),
]
EVERY_NOTE = [
    message("reaction", "wamid.N01", AT, {"message_id": "wamid.T01", "emoji": "👍"}),
    message("system", "wamid.N02", AT, {"body": "Ana changed from 5511999990000 to 5511999990001",
                                        "wa_id": "5511999990001", "type": "user_changed_number"}),
    edit("wamid.N03", "wamid.T01", "quero saber o preço do pão"),
    revoke("wamid.N04", "wamid.T02"),
    message("unsupported", "wamid.N05", AT, {"type": "edit"},
            errors=[{"code": 131051, "title": "Message type unknown"}]),
]


@pytest.mark.django_db(transaction=True)
def test_one_of_every_inbound_type_is_in_a_turns_input_or_on_the_transcript(graph):
    response = deliver(Client(), envelope(EVERY_TYPE))
    assert response.status_code == 200, response.content
    assert response.json()["skipped"] == 0
    response = deliver(Client(), envelope(EVERY_NOTE))
    assert response.status_code == 200 and response.json()["skipped"] == 0

    inputs = {r.input_key: r for r in TurnRecord.objects.filter(conversation_id=WA_ID)}
    lines = History.objects.filter(conversation_id=WA_ID)
    keys = {line.message_key for line in lines}
    for item in EVERY_TYPE + EVERY_NOTE:
        if item["type"] in ("edit", "revoke"):  # these change the line they name (below)
            continue
        assert item["id"] in inputs or item["id"] in keys, f"{item['type']} {item['id']} vanished"
    for item in EVERY_TYPE:  # the customer's messages are turns, each with its type in the context
        record = inputs[item["id"]]
        assert record.input["context"]["whatsapp"]["type"] == item["type"]
        assert record.status in ("done", "unchanged"), (item["type"], record.status, record.error)

    def said(wamid: str) -> str:
        return inputs[wamid].input["turn"]["message"]

    assert said("wamid.T03") == "[audio]" and said("wamid.T05") == "[document: pedido.pdf]"
    assert said("wamid.T08") == "[contact: João Silva, +55 11 98888-7777]"
    assert said("wamid.T09").startswith("Pode entregar amanhã?\n[order: 2 × pao-de-queijo")
    assert said("wamid.T12").startswith("[form: nome: Ana")
    assert said("wamid.T13") == "[call permission: accept]"
    assert said("wamid.T15") == "[unsupported message: poll_creation]"
    assert inputs["wamid.T17"].input["turn"] == {"event": WELCOME_EVENT, "key": "wamid.T17"}
    assert inputs["wamid.T18"].input["context"]["whatsapp"]["referral"]["headline"] == "Pão quente"

    by_key = {line.message_key: line for line in lines}
    assert (by_key["wamid.N01"].kind, by_key["wamid.N01"].content) == ("reaction", "👍")
    assert (by_key["wamid.N02"].kind, by_key["wamid.N02"].role) == ("system", "system")
    assert by_key["wamid.T01"].content == "quero saber o preço do pão" and by_key["wamid.T01"].edited_at
    assert by_key["wamid.T01"].media["previous"][0]["id"] == "wamid.N03"
    assert by_key["wamid.T02"].deleted_at is not None
    assert by_key["wamid.N05"].kind == "unsupported"


@pytest.mark.django_db(transaction=True)
def test_what_is_still_left_out_is_logged_with_its_type_and_conversation_and_counted(graph, settings, caplog):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}
    before = scrape()
    odd = message("interactive", "wamid.Z", AT, {"type": "brand_new", "brand_new": {}})
    with caplog.at_level(logging.WARNING, logger="falai_django.whatsapp"):
        assert deliver(Client(), envelope([odd])).json()["skipped"] == 1
    assert f"left out a 'interactive' message wamid.Z of conversation {WA_ID}" in caplog.text
    assert moved(before, scrape(), "falai_inbound_skipped_total", channel="whatsapp", type="interactive") == 1


def test_phone_number_id_is_in_every_context():
    got = parsed(message("contacts", "wamid.C", AT, [CARD]))
    assert got.context["whatsapp"]["phone_number_id"] == PHONE_NUMBER_ID


@pytest.mark.django_db(transaction=True)
def test_a_flow_on_the_welcome_event_greets_a_customer_who_opens_the_chat(graph):
    from falai_django import falai
    from falai_django.testing import mock_provider

    f = falai()
    agents._current["agent"] = f.agent(
        name="Ana", provider=mock_provider(), clock=agents.clock(),
        events={WELCOME_EVENT: f.event(direction="inbound")},
        flows=[f.flow({"id": "boas-vindas", "on": [{"event": WELCOME_EVENT}],
                       "steps": [{"id": "oi", "say": "Bem-vindo à Padaria!"}]})],
    )
    response = deliver(Client(), envelope([message("request_welcome", "wamid.W1", AT)]))
    assert response.json()["inputs"] == 1
    assert graph.texts() == ["Bem-vindo à Padaria!"]
    assert TurnRecord.objects.get(input_key="wamid.W1").kind == "event"
