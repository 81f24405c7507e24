"""Every message type of Meta's reference → the turn's text and context; reactions on the
transcript without a turn; unsupported messages as a marker, system notices as notes (the new
types — contacts, orders, Flow replies, business-scoped senders, edits — are in test_inbound_types)."""

from __future__ import annotations

import pytest
from django.test import Client

from falai_django.channels.whatsapp.parse import parse_webhook
from falai_django.models import History, TurnRecord

from . import agents
from .payloads import PHONE_NUMBER_ID, WA_ID, deliver, envelope, message, text

AT = agents.START


def only(payload: dict) -> tuple[str, dict]:
    batch = parse_webhook(envelope([payload]))
    assert len(batch.messages) == 1, batch.skipped
    parsed = batch.messages[0]
    assert (parsed.session_id, parsed.id, parsed.at) == (WA_ID, payload["id"], "2026-09-20T10:00:00.000Z")
    return parsed.text, parsed.context["whatsapp"]


def test_text_gives_its_body_and_the_context_names_the_contact():
    body, context = only(text("quero saber o preço", "wamid.T", AT))
    assert body == "quero saber o preço"
    assert context == {"type": "text", "wa_id": WA_ID, "message_id": "wamid.T", "profile_name": "Ana Cliente",
                       "phone_number_id": PHONE_NUMBER_ID}


def test_a_reply_quotes_the_message_it_answers():
    _, context = only(text("isso", "wamid.T", AT, context={"from": "15550783881", "id": "wamid.OUT1"}))
    assert context["replied_to"] == "wamid.OUT1"


@pytest.mark.parametrize(("kind", "reply"), [
    ("button_reply", {"id": "sim-123", "title": "Sim, quero"}),
    ("list_reply", {"id": "plano-pro", "title": "Plano Pro", "description": "Para equipes"}),
])
def test_interactive_replies_give_their_title_and_the_id_in_the_context(kind, reply):
    body, context = only(message("interactive", "wamid.I", AT, {"type": kind, kind: reply}))
    assert body == reply["title"]
    assert context["reply_id"] == reply["id"] and context["type"] == "interactive"


def test_a_template_quick_reply_button_gives_its_text_and_payload():
    body, context = only(message("button", "wamid.B", AT, {"payload": "QUERO_DEMO", "text": "Quero uma demo"},
                                 context={"from": "15550783881", "id": "wamid.TPL"}))
    assert body == "Quero uma demo"
    assert context["reply_id"] == "QUERO_DEMO" and context["replied_to"] == "wamid.TPL"


@pytest.mark.parametrize(("kind", "media", "expected"), [
    ("image", {"caption": "minha fatura", "mime_type": "image/jpeg", "sha256": "x", "id": "MEDIA1"}, "minha fatura"),
    ("image", {"mime_type": "image/jpeg", "sha256": "x", "id": "MEDIA1"}, "[image]"),
    ("audio", {"mime_type": "audio/ogg; codecs=opus", "sha256": "x", "id": "MEDIA1", "voice": True}, "[audio]"),
    ("video", {"mime_type": "video/mp4", "sha256": "x", "id": "MEDIA1"}, "[video]"),
    ("document", {"filename": "contrato.pdf", "mime_type": "application/pdf", "sha256": "x", "id": "MEDIA1"},
     "[document: contrato.pdf]"),
    ("document", {"caption": "segue", "filename": "c.pdf", "mime_type": "application/pdf", "id": "MEDIA1"}, "segue"),
    ("sticker", {"mime_type": "image/webp", "sha256": "x", "id": "MEDIA1", "animated": False}, "[sticker]"),
])
def test_media_gives_its_caption_or_a_marker_and_the_media_id(kind, media, expected):
    body, context = only(message(kind, "wamid.M", AT, media))
    assert body == expected
    assert context["media"]["id"] == "MEDIA1" and context["media"]["mime_type"] == media["mime_type"]
    assert context["type"] == kind


def test_a_location_gives_a_readable_text():
    body, context = only(message("location", "wamid.L", AT, {
        "latitude": -23.5614, "longitude": -46.6559, "name": "MASP", "address": "Av. Paulista, 1578"}))
    assert body == "[location: MASP, Av. Paulista, 1578 (-23.5614, -46.6559)]"
    assert context["location"]["latitude"] == -23.5614


def test_a_bare_location_gives_its_coordinates():
    body, _ = only(message("location", "wamid.L", AT, {"latitude": 1.5, "longitude": 2.5}))
    assert body == "[location: 1.5, 2.5]"


def test_unsupported_messages_reach_the_agent_as_a_marker_and_system_notices_become_notes():
    body, context = only(message("unsupported", "wamid.U", AT, {"type": "poll_creation"},
                                 errors=[{"code": 131051, "title": "Message type unknown"}]))
    assert body == "[unsupported message: poll_creation]"
    assert context["unsupported_type"] == "poll_creation" and context["errors"][0]["code"] == 131051
    body, _ = only(message("unknown", "wamid.K", AT, errors=[{"code": 131051, "title": "Message type unknown"}]))
    assert body == "[unsupported message: Message type unknown]"

    batch = parse_webhook(envelope([message("system", "wamid.S", AT, {"body": "NAME changed from 1 to 2",
                                                                      "type": "user_changed_number"})]))
    assert batch.messages == [] and batch.skipped == []
    assert [(n.kind, n.text, n.context["system"]["type"]) for n in batch.notes] == [
        ("system", "NAME changed from 1 to 2", "user_changed_number")]


def test_an_interactive_type_this_channel_does_not_read_is_skipped_with_its_type_and_conversation():
    batch = parse_webhook(envelope([message("interactive", "wamid.N", AT, {"type": "brand_new", "brand_new": {}})]))
    assert batch.messages == [] and batch.notes == []
    assert [(s.type, s.session_id) for s in batch.skipped] == [("interactive", WA_ID)]


def test_timestamps_are_unix_seconds():
    batch = parse_webhook(envelope([text("oi", "wamid.T", "2026-01-02T03:04:05Z")]))
    assert batch.messages[0].at == "2026-01-02T03:04:05.000Z"


def test_a_status_with_errors_carries_the_code_and_title():
    batch = parse_webhook(envelope(statuses=[{
        "id": "wamid.OUT1", "status": "failed", "timestamp": "1790000000", "recipient_id": WA_ID,
        "errors": [{"code": 131047, "title": "Re-engagement message", "message": "Re-engagement message",
                    "error_data": {"details": "More than 24 hours have passed."}}]}]))
    assert batch.statuses[0].error == "131047 Re-engagement message: More than 24 hours have passed."


@pytest.mark.parametrize("payload", [None, [], {"object": "page"}, {"object": "whatsapp_business_account",
                                                                     "entry": "x"}])
def test_other_shapes_give_nothing_and_never_raise(payload):
    batch = parse_webhook(payload)
    assert batch.messages == [] and batch.statuses == []


@pytest.mark.django_db(transaction=True)
def test_each_type_reaches_the_turn_with_its_context(graph):
    deliver(Client(), envelope([message("interactive", "wamid.I", AT,
                                        {"type": "button_reply", "button_reply": {"id": "sim", "title": "Sim"}})]))
    record = TurnRecord.objects.get()
    assert record.input["turn"] == {"message": "Sim", "id": "wamid.I", "at": "2026-09-20T10:00:00.000Z"}
    assert record.input["context"]["whatsapp"]["reply_id"] == "sim"
    assert record.status == "done"
    assert History.objects.get(role="user").content == "Sim"


@pytest.mark.django_db(transaction=True)
def test_a_reaction_is_recorded_on_the_transcript_without_a_turn(graph):
    deliver(Client(), envelope([text("oi", "wamid.IN1", AT)]))
    turns, requests = TurnRecord.objects.count(), len(graph.requests)
    reaction = message("reaction", "wamid.R", AT, {"message_id": "wamid.OUT1", "emoji": "👍"})

    assert deliver(Client(), envelope([reaction])).json()["reactions"] == 1
    assert deliver(Client(), envelope([reaction])).json()["reactions"] == 0  # a redelivery adds nothing

    row = History.objects.get(kind="reaction")
    assert (row.role, row.content, row.media) == ("user", "👍", {"reaction_to": "wamid.OUT1"})
    assert TurnRecord.objects.count() == turns and len(graph.requests) == requests


@pytest.mark.django_db(transaction=True)
def test_a_reaction_from_an_unknown_customer_is_left_out(graph):
    reaction = message("reaction", "wamid.R", AT, {"message_id": "wamid.X", "emoji": "👍"})
    assert deliver(Client(), envelope([reaction])).json()["reactions"] == 0
    assert History.objects.count() == 0 and TurnRecord.objects.count() == 0
