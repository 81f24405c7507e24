"""Delivery statuses: they find the outbound row by its wamid and never move it backwards."""

from __future__ import annotations

import pytest
from django.test import Client

from falai_django.models import History

from . import agents
from .payloads import WA_ID, deliver, envelope, status, text

pytestmark = pytest.mark.django_db(transaction=True)

LATER = "2026-09-20T10:00:09Z"


def sent_row(graph) -> History:
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    return History.objects.get(conversation_id=WA_ID, role="assistant", channel_message_id="wamid.OUT1")


def report(*states: str, wamid: str = "wamid.OUT1", errors: list | None = None) -> None:
    for state in states:
        response = deliver(Client(), envelope(statuses=[status(wamid, state, LATER, errors=errors)]))
        assert response.status_code == 200


@pytest.mark.parametrize(("states", "final"), [
    (["sent", "delivered", "read"], "read"),
    (["read", "delivered"], "read"),
    (["read", "sent"], "read"),
    (["delivered", "sent"], "delivered"),
    (["delivered", "failed"], "delivered"),
    (["sent", "failed"], "failed"),
    (["read", "failed"], "read"),
])
def test_a_status_never_moves_backwards(graph, states, final):
    row = sent_row(graph)
    report(*states)
    row.refresh_from_db()
    assert row.delivery_status == final
    assert row.delivery_at is not None


def test_statuses_in_one_batch_apply_in_any_order(graph):
    row = sent_row(graph)
    body = envelope(statuses=[status("wamid.OUT1", "read", LATER), status("wamid.OUT1", "delivered", LATER),
                              status("wamid.OUT1", "sent", LATER)])
    assert deliver(Client(), body).json()["statuses"] == 1
    row.refresh_from_db()
    assert row.delivery_status == "read"


def test_a_failed_delivery_keeps_the_code_and_title(graph):
    row = sent_row(graph)
    report("failed", errors=[{"code": 131026, "title": "Message undeliverable",
                              "error_data": {"details": "The number is not on WhatsApp."}}])
    row.refresh_from_db()
    assert row.delivery_status == "failed" and row.send_status == "sent"
    assert row.send_error == "131026 Message undeliverable: The number is not on WhatsApp."


def test_a_status_of_an_unknown_message_changes_nothing(graph):
    row = sent_row(graph)
    report("read", wamid="wamid.SOMEONE-ELSE")
    row.refresh_from_db()
    assert row.delivery_status is None


def test_the_admin_shows_each_status_in_words(graph):
    from django.contrib.auth.models import User

    sent_row(graph)
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    page = f"/admin/falai_django/conversation/{WA_ID}/change/"
    assert "falai-delivery" not in client.get(page).content.decode().split("</style>")[-1]
    report("delivered")
    assert ">delivered</span>" in client.get(page).content.decode()
    report("read")
    html = client.get(page, headers={"accept-language": "pt-br"}).content.decode()
    assert ">lida</span>" in html


def test_the_suite_runs_on_the_database_it_was_asked_for():
    from django.db import connection

    from .conftest import ON_POSTGRES

    assert (connection.vendor == "postgresql") == ON_POSTGRES


def test_a_status_that_outruns_the_stored_wamid_finds_its_row_by_the_idempotency_key(graph):
    row = sent_row(graph)
    History.objects.filter(pk=row.pk).update(channel_message_id=None)  # the sender has not stored it yet
    early = status("wamid.OUT1", "delivered", LATER)
    early["biz_opaque_callback_data"] = row.idempotency_key
    assert deliver(Client(), envelope(statuses=[early])).json()["statuses"] == 1
    row.refresh_from_db()
    assert row.delivery_status == "delivered"


def test_someone_elses_callback_data_finds_nothing(graph):
    row = sent_row(graph)
    History.objects.filter(pk=row.pk).update(channel_message_id=None)
    other = status("wamid.OUT1", "read", LATER, wa_id="5511000000001")
    other["biz_opaque_callback_data"] = row.idempotency_key
    assert deliver(Client(), envelope(statuses=[other])).json()["statuses"] == 0
