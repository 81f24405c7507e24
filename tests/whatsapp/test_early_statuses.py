"""Statuses that arrive before their send is recorded are kept and applied when the row appears.

Meta may report `sent`/`delivered` for a wamid before our worker has stored it (the Graph API
answered, the row's update has not committed), and a status may carry neither a known wamid nor
the idempotency key. Such a status is an `EarlyStatus` row; the dispatcher's sweep applies it as
soon as a row has the wamid (the WhatsApp sender applies it at once when its send returns that
wamid), and only one unmatched for `KEEP_FOR` is let go, with a warning.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from host.helpers import METRICS_TOKEN, moved, scrape

from falai_django.host import statuses
from falai_django.host.wakes import Dispatcher
from falai_django.models import EarlyStatus, History

from . import agents
from .payloads import WA_ID, deliver, envelope, status, text

pytestmark = pytest.mark.django_db(transaction=True)

LATER = "2026-09-20T10:00:09Z"


def report(wamid: str, state: str, **extra) -> dict:
    item = status(wamid, state, LATER)
    item.update(extra)
    response = deliver(Client(), envelope(statuses=[item]))
    assert response.status_code == 200, response.content
    return response.json()


def test_a_status_before_its_send_is_kept_then_applied_when_the_send_returns_its_wamid(graph):
    assert report("wamid.OUT1", "delivered")["statuses"] == 0
    assert report("wamid.OUT1", "delivered")["statuses"] == 0  # Meta delivers it again: kept once
    kept = EarlyStatus.objects.get()
    assert (kept.channel, kept.message_id, kept.status, kept.recipients) == ("whatsapp", "wamid.OUT1", "delivered",
                                                                             [WA_ID])

    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))  # the send Meta answers wamid.OUT1
    row = History.objects.get(conversation_id=WA_ID, role="assistant")
    assert row.channel_message_id == "wamid.OUT1"
    assert row.delivery_status == "delivered"
    assert row.delivery_at.isoformat().startswith("2026-09-20T10:00:09")
    assert not EarlyStatus.objects.exists()


def test_a_kept_status_whose_row_appears_otherwise_is_applied_by_the_dispatchers_sweep(graph, monkeypatch):
    # the sender could not apply it (its database call failed after the send went out)
    def broken(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(statuses, "apply_early_for", broken)
    report("wamid.OUT1", "delivered")
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    row = History.objects.get(conversation_id=WA_ID, role="assistant")
    assert (row.send_status, row.channel_message_id, row.delivery_status) == ("sent", "wamid.OUT1", None)

    Dispatcher(poll_s=0).sweep()
    row.refresh_from_db()
    assert row.delivery_status == "delivered"
    assert not EarlyStatus.objects.exists()


def test_kept_statuses_apply_in_any_order_and_never_move_the_row_backwards(graph):
    report("wamid.OUT1", "read")
    report("wamid.OUT1", "delivered")
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))

    assert History.objects.get(role="assistant").delivery_status == "read"
    assert not EarlyStatus.objects.exists()


def test_a_failed_status_kept_early_carries_its_error_to_the_row(graph):
    report("wamid.OUT1", "failed", errors=[{"code": 131026, "title": "Message undeliverable"}])
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    row = History.objects.get(role="assistant")
    assert (row.delivery_status, row.send_error) == ("failed", "131026 Message undeliverable")


def test_a_status_that_never_finds_its_row_is_let_go_after_a_day_with_a_warning(graph, caplog):
    report("wamid.ELSEWHERE", "delivered")
    assert statuses.apply_early() == {"applied": 0, "expired": 0}
    assert EarlyStatus.objects.count() == 1  # still waiting

    EarlyStatus.objects.update(received_at=timezone.now() - statuses.KEEP_FOR - timedelta(minutes=1))
    with caplog.at_level(logging.WARNING, logger="falai_django.host"):
        assert statuses.apply_early() == {"applied": 0, "expired": 1}
    assert not EarlyStatus.objects.exists()
    assert f"status delivered for wamid.ELSEWHERE (conversation {WA_ID}) matched no sent message" in caplog.text


def test_a_status_the_row_has_already_passed_is_not_kept(graph):
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    report("wamid.OUT1", "read")
    assert report("wamid.OUT1", "delivered")["statuses"] == 0
    assert not EarlyStatus.objects.exists()
    assert History.objects.get(role="assistant").delivery_status == "read"


def test_the_counts_of_kept_and_late_applied_statuses_are_metrics(graph, settings):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}
    before = scrape()
    report("wamid.OUT1", "delivered")
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    after = scrape()

    def result(name: str) -> float:
        return moved(before, after, "falai_delivery_statuses_total", channel="whatsapp", result=name)

    assert (result("kept"), result("applied_late")) == (1, 1)


def test_the_operations_page_shows_the_statuses_still_waiting(graph):
    from django.contrib.auth.models import User

    client = Client()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    page = client.get("/admin/falai_django/operations/").content.decode()
    assert 'id="falai-statuses"' not in page  # nothing waiting: no card

    report("wamid.OUT7", "sent")
    report("wamid.OUT8", "delivered")
    page = client.get("/admin/falai_django/operations/").content.decode()
    assert 'id="falai-statuses" data-value="2"' in page
    assert "Delivery statuses waiting for their message" in page
