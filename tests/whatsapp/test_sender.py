"""The sender against the fake Graph API: the request, Meta's error codes, retries and failures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from falai_django.host.delivery import send_pending
from falai_django.models import History

from . import agents
from .payloads import WA_ID, deliver, envelope, text

pytestmark = pytest.mark.django_db(transaction=True)

ASK = "Oi! Com quem eu falo?"


def reply_row() -> History:
    return History.objects.get(conversation_id=WA_ID, role="assistant")


def say_oi() -> None:
    assert deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)])).status_code == 200


@pytest.mark.parametrize("error", ["rate_limit_429", "pair_rate_limit", "too_many_calls"])
def test_rate_limits_are_retried_with_backoff_then_sent(graph, error):
    graph.answer(error)
    before = timezone.now()
    say_oi()

    row = reply_row()
    assert row.send_status == "pending" and row.send_attempts == 1
    assert row.next_attempt_at > before
    assert row.send_error.split(" ")[0] in ("130429", "131056", "80007")

    History.objects.filter(pk=row.pk).update(next_attempt_at=None)  # the backoff has passed
    assert send_pending(WA_ID) == 1
    row.refresh_from_db()
    assert (row.send_status, row.send_attempts, row.channel_message_id) == ("sent", 2, "wamid.OUT2")
    assert graph.texts() == [ASK, ASK]


def test_retry_after_is_honoured(graph):
    graph.answer("rate_limit_429", headers={"Retry-After": "120"})
    say_oi()
    row = reply_row()
    assert row.next_attempt_at >= timezone.now() + timedelta(seconds=110)


@pytest.mark.parametrize(("error", "code", "title"), [
    ("undeliverable", "131026", "Message undeliverable"),
    ("window_closed", "131047", "Re-engagement message"),
    ("invalid_parameter", "100", "Invalid parameter"),
])
def test_permanent_errors_mark_the_row_failed_at_once_with_code_and_title(graph, error, code, title):
    graph.answer(error)
    say_oi()

    row = reply_row()
    assert row.send_status == "failed" and row.send_attempts == 1 and row.next_attempt_at is None
    assert row.send_error.startswith(f"{code} {title}")
    assert send_pending(WA_ID) == 0 and len(graph.requests) == 1  # never sent again


def test_a_failed_row_is_shown_with_its_reason_in_the_admin(graph):
    from django.contrib.auth.models import User

    graph.answer("window_closed")
    say_oi()
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    html = client.get(f"/admin/falai_django/conversation/{WA_ID}/change/").content.decode()
    assert 'class="falai-send-error"' in html  # the transcript's "Not sent: <reason>" line
    assert "131047 Re-engagement message" in html


def test_a_server_error_is_retried(graph):
    graph.answer("server_error")
    say_oi()
    row = reply_row()
    assert row.send_status == "pending" and "131000" in row.send_error
    History.objects.filter(pk=row.pk).update(next_attempt_at=None)
    assert send_pending(WA_ID) == 1


def test_an_unreachable_graph_api_is_retried(graph, settings):
    from falai_django import conf
    from falai_django.testing.postgres import free_port

    closed = free_port()  # a port nobody listens on
    settings.FALAI = {**settings.FALAI, "WHATSAPP": {**settings.FALAI["WHATSAPP"],
                                                     "GRAPH_URL": f"http://127.0.0.1:{closed}/v21.0"}}
    conf.clear_cache()
    say_oi()
    row = reply_row()
    assert row.send_status == "pending" and row.send_attempts == 1 and "ConnectError" in row.send_error


def test_a_success_without_a_message_id_is_retried(graph):
    graph.script.append((200, {"messaging_product": "whatsapp"}, {}))
    say_oi()
    assert reply_row().send_status == "pending"


def test_the_sender_outside_the_host_sends_one_text():
    from falai_django.channels.whatsapp.sender import message_body
    from falai_django.sending import OutboundSend

    message = OutboundSend(session_id=WA_ID, text="olá", kind="verbatim", media=None, key="k", run_id=None,
                           step_id=None, after_ms=0, emission_key="e", idempotency_key="abc", item_id=1)
    assert message_body(message) == {"messaging_product": "whatsapp", "recipient_type": "individual", "to": WA_ID,
                                     "biz_opaque_callback_data": "abc", "type": "text",
                                     "text": {"body": "olá", "preview_url": False}}
