"""A real browser (Playwright driving Debian's Chromium) against the live server: log in, open a
conversation, take it over, reply as a human, give it back — checking the page after each step.

The browser runs with JavaScript disabled: every step is a plain form. Saves
test-artifacts/admin-conversation.png. Without /usr/bin/chromium the test skips loudly,
and with CI=true it fails instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from readme_screenshots import keep

from falai_django.models import Conversation, HistoryItem

from . import agents, senders
from .conftest import make_user, page_url, say

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SCREENSHOT = ARTIFACTS / "admin-conversation.png"
LIST_SCREENSHOT = ARTIFACTS / "admin-conversation-list.png"


@pytest.fixture
def browser_page(new_page):
    # JavaScript off: the essentials (log in, take over, reply, give back) are plain forms.
    return new_page(javascript=False)


def bubbles(page, who: str) -> list[str]:
    return [text.strip() for text in page.locator(f'.falai-msg[data-who="{who}"]').all_inner_texts()]


@pytest.mark.django_db(transaction=True)
def test_take_over_reply_and_give_back_in_a_browser(live_server, browser_page):
    page = browser_page
    make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    say("5511999990000", "oi, quero saber como funciona", "wamid.1")
    assert senders.texts() == [agents.QUESTION]

    # Log in.
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")

    # The list shows the conversation asking; open it.
    page.goto(f"{live_server.url}/admin/falai_django/conversation/")
    row = page.locator("#result_list tbody tr", has_text="5511999990000")
    assert "asking" in row.inner_text() and "triagem · quem" in row.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(LIST_SCREENSHOT), full_page=True)
    row.locator("a", has_text="5511999990000").click()
    page.wait_for_selector("#transcript")
    assert page.url.endswith(page_url("5511999990000"))
    assert bubbles(page, "customer")[0].endswith("oi, quero saber como funciona")
    assert bubbles(page, "assistant")[0].endswith(agents.QUESTION)
    assert page.locator("#handoff-state").inner_text().strip() == "The assistant is answering."

    # Take over.
    page.click("#take-over-form input[type=submit]")
    page.wait_for_selector("#give-back-form")
    assert "Took over as alice." in page.locator(".messagelist").inner_text()
    assert "Owned by alice" in page.locator("#handoff-state").inner_text()
    assert page.locator("#take-over-form").count() == 0
    assert Conversation.objects.get(pk="5511999990000").human_owner == "alice"

    # A customer message while owned: nothing is said.
    say("5511999990000", "meu nome é Maria da empresa Acme", "wamid.2")
    assert senders.texts() == [agents.QUESTION]

    # Reply as the human.
    page.fill("#id_reply_text", "Oi Maria! Aqui é a Alice, vou te ajudar.")
    page.click("#reply-form input[type=submit]")
    page.wait_for_selector('.falai-msg[data-who="human"]')
    human = page.locator('.falai-msg[data-who="human"]').inner_text()
    assert "Human agent · alice" in human and "Oi Maria! Aqui é a Alice, vou te ajudar." in human
    assert "sent" in human
    assert senders.texts()[-1] == "Oi Maria! Aqui é a Alice, vou te ajudar."
    assert HistoryItem.objects.get(kind="human").send_status == "sent"
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    keep(page, "conversation")

    # Give it back.
    page.click("#give-back-form input[type=submit]")
    page.wait_for_selector("#take-over-form")
    assert "Gave the conversation back to the assistant." in page.locator(".messagelist").inner_text()
    assert page.locator("#handoff-state").inner_text().strip() == "The assistant is answering."
    assert Conversation.objects.get(pk="5511999990000").silenced_reason is None

    # The next customer message is answered, and the page shows it.
    sent_before = len(senders.sent)
    say("5511999990000", "ainda está aí?", "wamid.3")
    assert len(senders.sent) > sent_before
    page.reload()
    assert bubbles(page, "customer")[-1].endswith("ainda está aí?")
    assert bubbles(page, "assistant")[-1].endswith(senders.sent[-1].text)
    assert SCREENSHOT.stat().st_size > 10_000
