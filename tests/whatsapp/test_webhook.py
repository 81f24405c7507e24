"""The webhook: the GET handshake, the signature over the exact bytes, bad bodies, and storing
inputs durably without running a turn in the request."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from falai_django.models import History, TurnRecord

from . import agents
from .conftest import VERIFY_TOKEN
from .payloads import APP_SECRET, WA_ID, deliver, envelope, signed, text

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/falai/whatsapp/webhook"


def test_the_handshake_echoes_the_challenge_as_plain_text():
    response = Client().get(URL, {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN,
                                  "hub.challenge": "1158201444"})
    assert response.status_code == 200
    assert response.content == b"1158201444"
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize("query", [
    {"hub.mode": "subscribe", "hub.verify_token": "wrong", "hub.challenge": "1"},
    {"hub.mode": "unsubscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1"},
    {"hub.challenge": "1"},
])
def test_a_handshake_without_our_token_is_refused(query):
    response = Client().get(URL, query)
    assert response.status_code == 403
    assert b"1" != response.content


def test_a_body_with_accents_and_emoji_is_verified_over_the_exact_bytes(graph):
    raw = json.dumps(envelope([text("olá, ação 👋", "wamid.IN1", agents.START)]), ensure_ascii=False).encode()
    assert b"\xf0\x9f\x91\x8b" in raw  # the emoji travels as UTF-8, not escaped
    response = deliver(Client(), raw)
    assert response.status_code == 200, response.content
    assert History.objects.get(role="user").content == "olá, ação 👋"


def test_the_same_text_escaped_differently_is_another_body():
    raw, headers = signed(json.dumps(envelope([text("olá", "wamid.IN1", agents.START)]), ensure_ascii=False).encode())
    escaped = json.dumps(envelope([text("olá", "wamid.IN1", agents.START)]), ensure_ascii=True).encode()
    response = Client().post(URL, data=escaped, content_type="application/json", headers=headers)
    assert response.status_code == 403
    assert TurnRecord.objects.count() == 0


def test_an_unsigned_post_is_401_and_stores_nothing(graph):
    raw, _ = signed(envelope([text("oi", "wamid.IN1", agents.START)]))
    response = Client().post(URL, data=raw, content_type="application/json")
    assert response.status_code == 401
    assert "X-Hub-Signature-256" in response.json()["detail"]
    assert TurnRecord.objects.count() == 0 and graph.requests == []


@pytest.mark.parametrize("header", ["sha256=" + "0" * 64, "sha1=abc", "garbage", "sha256=ção"])
def test_a_wrong_signature_is_403_and_stores_nothing(graph, header):
    raw, _ = signed(envelope([text("oi", "wamid.IN1", agents.START)]))
    response = Client().post(URL, data=raw, content_type="application/json", headers={"X-Hub-Signature-256": header})
    assert response.status_code == 403
    assert TurnRecord.objects.count() == 0 and graph.requests == []


def test_a_body_signed_with_another_secret_is_refused():
    response = deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]), secret=APP_SECRET + "x")
    assert response.status_code == 403
    assert TurnRecord.objects.count() == 0


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"'])
def test_a_signed_body_that_is_not_a_json_object_is_400(raw):
    response = deliver(Client(), raw)
    assert response.status_code == 400
    assert response.json()["detail"]


def test_other_methods_are_405():
    assert Client().put(URL).status_code == 405


def test_without_whatsapp_settings_the_webhook_is_404(settings):
    from falai_django import conf

    settings.FALAI = {**settings.FALAI, "WHATSAPP": None}
    conf.clear_cache()
    assert Client().get(URL, {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN}).status_code == 404


def test_the_post_stores_inputs_and_answers_before_any_turn_runs(graph, monkeypatch):
    """Turns run on the workers: here the queue is never drained, so only the inbox rows exist."""
    queued = []
    monkeypatch.setattr("falai_django.channels.whatsapp.receive.enqueue", lambda func, ids: queued.append((func, ids)))
    body = envelope([text("oi", "wamid.IN1", agents.START), text("tudo bem?", "wamid.IN2", agents.START)])

    response = deliver(Client(), body)

    assert response.status_code == 200
    assert response.json()["inputs"] == 2
    records = list(TurnRecord.objects.order_by("id"))
    assert [(r.conversation_id, r.input_key, r.status) for r in records] == [
        (WA_ID, "wamid.IN1", "received"), (WA_ID, "wamid.IN2", "received")]
    # handed to django-q2 after commit: one task for the conversation, its messages in order
    assert queued == [("falai_django.tasks.process_turns", [r.pk for r in records])]
    assert History.objects.count() == 0 and graph.requests == []  # no turn, no send in the request
    assert records[0].input["context"]["whatsapp"]["profile_name"] == "Ana Cliente"


def test_a_lost_enqueue_leaves_the_input_for_the_sweep(graph, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from falai_django.host.inbox import retry_parked

    def broker_down(record_id):
        raise ConnectionError("broker down")

    monkeypatch.setattr("falai_django.channels.whatsapp.receive.enqueue_turn", broker_down)
    response = deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    assert response.status_code == 200  # Meta must not retry: the input is stored
    record = TurnRecord.objects.get()
    assert record.status == "received"  # committed before the hand-off

    from falai_django.host.jobs import enqueue_turn

    monkeypatch.setattr("falai_django.channels.whatsapp.receive.enqueue_turn", enqueue_turn)  # the broker is back
    assert retry_parked(timezone.now() + timedelta(minutes=11)) == 1
    assert graph.texts() == ["Oi! Com quem eu falo?"]


def test_text_postgresql_cannot_store_is_cleaned_not_refused(graph):
    raw = json.dumps(envelope([text("a\u0000b \ud800c", "wamid.IN1", agents.START)])).encode()
    response = deliver(Client(), raw)
    assert response.status_code == 200
    assert History.objects.get(role="user").content == "ab ?c"


def test_meta_batches_are_read_entry_by_change_by_message(graph, monkeypatch):
    monkeypatch.setattr("falai_django.channels.whatsapp.receive.enqueue_turn", lambda record_id: None)
    monkeypatch.setattr("falai_django.channels.whatsapp.receive.enqueue", lambda func, ids: None)
    one = envelope([text("a", "wamid.A", agents.START, wa_id="5511000000001")], wa_id="5511000000001")
    two = envelope([text("b", "wamid.B", agents.START, wa_id="5511000000002"),
                    text("c", "wamid.C", agents.START, wa_id="5511000000002")], wa_id="5511000000002")
    body = {"object": "whatsapp_business_account",
            "entry": [one["entry"][0], {"id": "2", "changes": [two["entry"][0]["changes"][0],
                                                               {"field": "account_update", "value": {}}]}]}
    response = deliver(Client(), body)
    assert response.json() == {"inputs": 3, "reactions": 0, "statuses": 0, "skipped": 1}
    assert list(TurnRecord.objects.order_by("id").values_list("conversation_id", "input_key")) == [
        ("5511000000001", "wamid.A"), ("5511000000002", "wamid.B"), ("5511000000002", "wamid.C")]


def test_a_change_for_another_number_of_the_app_is_skipped(graph):
    body = envelope([text("oi", "wamid.IN1", agents.START)])
    body["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = "999"
    response = deliver(Client(), body)
    assert response.json() == {"inputs": 0, "reactions": 0, "statuses": 0, "skipped": 1}
    assert TurnRecord.objects.count() == 0 and graph.requests == []


def test_two_messages_of_one_customer_in_a_batch_are_answered_in_order(graph):
    body = envelope([text("oi", "wamid.IN1", agents.START), text("meu nome é Bia", "wamid.IN2", agents.START)])
    assert deliver(Client(), body).json()["inputs"] == 2
    assert graph.texts() == ["Oi! Com quem eu falo?", "Prazer, Bia!"]
    assert list(TurnRecord.objects.order_by("id").values_list("status", flat=True)) == ["done", "done"]


def test_a_failing_input_does_not_hold_back_the_next_in_its_batch(graph, monkeypatch):
    from falai_django import tasks
    from falai_django.host import turns

    real = turns.process_record
    seen = []

    def flaky(record_id):
        seen.append(record_id)
        if len(seen) == 1:
            raise RuntimeError("boom")
        return real(record_id)

    monkeypatch.setattr(turns, "process_record", flaky)
    with pytest.raises(RuntimeError, match="boom"):
        tasks.process_turns([101, 102])
    assert seen == [101, 102]
