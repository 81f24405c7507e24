"""The desk in a real browser (Playwright driving Debian's Chromium, JavaScript on) against the
live server, with two staff users: Alice (handoff and reply permissions) claims a conversation;
the customer writes through the API; Alice's desk shows it live (the queue's unread badge and
the tab title, then the transcript, without a reload); she replies with a saved reply, adds an
internal note and resolves. Vera, who may only view, sees the same conversation read-only.

Saves test-artifacts/desk-queue.png, desk-conversation.png and desk-read-only.png. Without
/usr/bin/chromium the test skips loudly, and with CI=true it fails instead.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from readme_screenshots import keep

from falai_django.models import Conversation, DeskEntry, History, SavedReply

from .conftest import AGENT_PERMS, logged_in, make_user, sent_texts

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SID = "5511988887777"
LIVE_MS = 2_000  # a new customer message must show within 2 s, without a reload
SAVED = "Oi! Aqui é a Alice, da equipe. O plano começa em R$ 99 por mês."


@pytest.fixture
def browser(chromium):
    return chromium


def customer_writes(live_server, token: str, text: str, n: int) -> dict:
    """The channel's webhook: a customer message through the API."""
    request = urllib.request.Request(
        f"{live_server.url}/falai/sessions/{SID}/messages", method="POST",
        data=json.dumps({"text": text, "id": f"wamid.{n}"}).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the live server on 127.0.0.1
        assert response.status == 200
        return json.loads(response.read())


@pytest.mark.django_db(transaction=True)
def test_two_staff_users_on_the_desk(live_server, browser):
    from rest_framework.authtoken.models import Token

    make_user("alice", *AGENT_PERMS)
    make_user("vera", "view_conversation")
    token = Token.objects.create(user=make_user("channel", superuser=True)).key
    SavedReply.objects.create(title="Preço", text=SAVED)
    ARTIFACTS.mkdir(exist_ok=True)

    first = customer_writes(live_server, token, "oi", 1)
    assert first["messages"], "Ana answers while nobody owns the conversation"

    # Alice finds the conversation and claims it.
    alice = logged_in(browser, live_server, "alice")
    alice.goto(f"{live_server.url}/admin/falai_django/conversation/")
    alice.click("#desk-link")
    alice.wait_for_selector("#desk-tabs")
    assert "Nothing in this queue." in alice.locator("#desk-rows").inner_text()
    alice.goto(f"{live_server.url}/admin/falai_django/conversation/{SID}/change/")
    alice.click("#open-on-desk")
    alice.wait_for_selector("#desk-claim-form")
    alice.click("#desk-claim-form input[type=submit]")
    alice.wait_for_selector(".messagelist")
    assert "You own this conversation now." in alice.locator(".messagelist").inner_text()
    assert "Taken over by alice" in alice.locator("#desk-handoff-state").inner_text()
    assert alice.locator('.falai-marker[data-kind="take_over"]').count() == 1
    assert Conversation.objects.get(pk=SID).human_owner == "alice"

    # On her queue, a new customer message shows up live: unread badge and tab title.
    alice.goto(f"{live_server.url}/admin/falai_django/conversation/desk/?q=mine")
    alice.wait_for_selector(f'.falai-desk-row[data-id="{SID}"]')
    assert not alice.title().startswith("(")
    assert customer_writes(live_server, token, "quanto custa?", 2)["messages"] == []  # silenced: Ana says nothing
    alice.wait_for_selector(f'.falai-desk-row[data-id="{SID}"] .falai-unread', timeout=LIVE_MS + 1_000)
    alice.wait_for_function("document.title.startsWith('(1) ')", timeout=LIVE_MS + 1_000)
    assert "(1)" in alice.locator('.falai-queue[data-queue="waiting"]').inner_text()
    alice.screenshot(path=str(ARTIFACTS / "desk-queue.png"), full_page=True)

    # The conversation: it opens at the newest message and updates without a reload.
    alice.click(f'.falai-desk-row[data-id="{SID}"] a')
    alice.wait_for_selector("#desk-transcript")
    assert alice.evaluate("(() => { const c = document.getElementById('desk-transcript');"
                          " return c.scrollHeight - c.scrollTop - c.clientHeight < 5; })()")
    customer_writes(live_server, token, "é para 30 pessoas", 3)
    alice.wait_for_selector('.falai-msg[data-who="customer"]:has-text("é para 30 pessoas")', timeout=LIVE_MS)

    # A saved reply, then a note.
    alice.select_option("#id_saved_reply", label="Preço")
    assert alice.input_value("#id_desk_reply") == SAVED
    alice.click("#desk-reply-form input[type=submit]")
    alice.wait_for_selector('.falai-msg[data-who="human"]')
    human = alice.locator('.falai-msg[data-who="human"]').inner_text()
    assert "Human agent · alice" in human and SAVED in human and "sent" in human
    assert sent_texts(SID)[-1] == SAVED
    alice.fill("#id_desk_note", "Quer desconto para ONG; falar com vendas.")
    alice.click("#desk-note-form input[type=submit]")
    alice.wait_for_selector(".falai-note")
    assert "never sent to the customer" in alice.locator(".falai-note").inner_text()
    assert "Quer desconto" not in " ".join(sent_texts(SID))
    alice.screenshot(path=str(ARTIFACTS / "desk-conversation.png"), full_page=True)
    keep(alice, "desk")

    # Vera sees it all, read-only, and live too.
    vera = logged_in(browser, live_server, "vera")
    vera.goto(f"{live_server.url}/admin/falai_django/conversation/desk/{SID}/")
    vera.wait_for_selector("#desk-read-only")
    assert vera.locator(".falai-note").count() == 1 and SAVED in vera.locator("#desk-transcript").inner_text()
    for form in ("#desk-reply-form", "#desk-note-form", "#desk-claim-form", "#desk-assign-form", "#desk-resolve-form"):
        assert vera.locator(form).count() == 0
    customer_writes(live_server, token, "obrigado!", 4)
    vera.wait_for_selector('.falai-msg[data-who="customer"]:has-text("obrigado!")', timeout=LIVE_MS)
    vera.screenshot(path=str(ARTIFACTS / "desk-read-only.png"), full_page=True)

    # Alice resolves: given back with a note; the queue is empty again.
    alice.wait_for_selector('.falai-msg[data-who="customer"]:has-text("obrigado!")', timeout=LIVE_MS)
    alice.fill("#id_desk_resolve_note", "preço enviado")
    alice.click("#desk-resolve-form input[type=submit]")
    alice.wait_for_selector('.falai-marker[data-kind="resolve"]')
    assert "Resolved · alice · preço enviado" in alice.locator('.falai-marker[data-kind="resolve"]').inner_text()
    assert "The assistant is answering." in alice.locator("#desk-handoff-state").inner_text()
    assert Conversation.objects.get(pk=SID).silenced_reason is None
    assert list(DeskEntry.objects.filter(conversation_id=SID).values_list("kind", flat=True)) == [
        "take_over", "note", "give_back", "resolve"]
    assert History.objects.get(conversation_id=SID, kind="human").send_status == "sent"
    alice.goto(f"{live_server.url}/admin/falai_django/conversation/desk/?q=open")
    assert "Nothing in this queue." in alice.locator("#desk-rows").inner_text()
    for name in ("desk-queue.png", "desk-conversation.png", "desk-read-only.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000


@pytest.mark.django_db(transaction=True)
def test_a_failed_send_is_readable_and_retried_from_the_desk(live_server, browser):
    from falai_django import host

    make_user("alice", *AGENT_PERMS)
    host.handle(SID, {"message": "oi", "id": "wamid.1"})
    item = History.objects.get(conversation_id=SID, role="assistant")
    History.objects.filter(pk=item.pk).update(send_status="failed", send_attempts=8,
                                              send_error="ChannelError: the 24-hour window is closed")
    host.handle(SID, {"message": "alô?", "id": "wamid.2"})  # newer than the failed one
    alice = logged_in(browser, live_server, "alice")

    alice.goto(f"{live_server.url}/admin/falai_django/conversation/desk/{SID}/")
    error = alice.locator(f'.falai-msg[data-item="{item.pk}"] .falai-send-error')
    assert "Not sent: ChannelError: the 24-hour window is closed" in error.inner_text()
    assert error.is_visible()
    # opened at the newest message: the last one is in view
    assert alice.locator(".falai-msg").last.is_visible()
    alice.screenshot(path=str(ARTIFACTS / "desk-failed-send.png"), full_page=True)

    error.locator("input[type=submit]").click()
    alice.wait_for_selector(".messagelist")
    assert f"Message {item.pk} is queued to be sent again." in alice.locator(".messagelist").inner_text()
    item.refresh_from_db()
    assert (item.send_status, item.send_error) == ("sent", "")
    assert alice.locator(f'.falai-msg[data-item="{item.pk}"] .falai-send-error').count() == 0
