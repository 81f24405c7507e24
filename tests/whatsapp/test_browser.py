"""The conversation page in a real browser (Playwright driving Debian's Chromium) after a
WhatsApp exchange: delivery statuses in words beside each reply, a failed send with Meta's
code and title. Saves test-artifacts/whatsapp-conversation.png."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from . import agents
from .payloads import WA_ID, deliver, envelope, status, text

SCREENSHOT = Path(__file__).resolve().parents[2] / "test-artifacts" / "whatsapp-conversation.png"


@pytest.fixture
def browser_page(new_page):
    return new_page(javascript=False)


@pytest.mark.django_db(transaction=True)
def test_the_transcript_shows_delivery_in_words(live_server, browser_page, graph):
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", "root@example.com", "pw")
    deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)]))
    for state in ("delivered", "read"):
        deliver(Client(), envelope(statuses=[status("wamid.OUT1", state, agents.START)]))
    graph.answer("window_closed")
    deliver(Client(), envelope([text("meu nome é Bia", "wamid.IN2", agents.START)]))

    page = browser_page
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")
    page.goto(f"{live_server.url}/admin/falai_django/conversation/{WA_ID}/change/")
    page.wait_for_selector("#transcript")
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    replies = page.locator('.falai-msg[data-who="assistant"]')
    assert replies.count() == 2
    first, second = replies.nth(0).inner_text(), replies.nth(1).inner_text()
    assert "Read" in first or "read" in first
    assert "failed" in second.lower() and "131047 Re-engagement message" in second
    body = page.locator("#transcript").inner_text()
    assert "None" not in body
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", body)  # no raw ISO timestamps
