"""The playground in Chromium: the handoff banner explains the silence, a human's reply shows as
the human's (also after a reload), replies carry the sandbox mark, and no `None` or raw ISO time
is on the page. Screenshot: test-artifacts/playground-handoff.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from demo import support
from readme_screenshots import keep

from falai_django import handoff

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def page(new_page):
    return new_page(width=1360, height=900)


def _send(page, text: str, count: int) -> None:
    page.fill("#text", text)
    page.press("#text", "Enter")
    page.wait_for_function(f"document.querySelectorAll('#log .msg.user').length >= {count}")
    page.wait_for_selector("#send:not([disabled])")


@pytest.mark.django_db(transaction=True)
def test_handoff_banner_human_label_and_sandbox_mark(page, live_server, demo_settings, django_user_model):
    django_user_model.objects.create_superuser("admin", "admin@example.com", "demo-pass")
    page.goto(f"{live_server.url}/falai/playground/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "demo-pass")
    page.click("input[type=submit]")
    page.wait_for_url("**/falai/playground/")
    assert page.is_hidden("#handoff")

    _send(page, "oi", 1)
    page.wait_for_selector(".msg.assistant .sandbox")
    assert "recorded by the sandbox sender" in page.text_content(".msg.assistant .sandbox")

    sid = page.text_content("header .mono").strip()
    handoff.take_over(sid, "maria")
    _send(page, "João", 2)
    page.wait_for_selector("#handoff:not([hidden])")
    assert page.text_content("#handoff").startswith("Taken over by maria · mode stop")
    page.wait_for_selector(".note:has-text('no reply this turn: Taken over by maria')")

    handoff.reply_as_human(sid, "Oi João, aqui é a Maria.", author="maria")
    human = page.locator(".msg.assistant.human")
    human.wait_for(timeout=8000)  # the page looks again every 3 s
    assert human.locator(".tag").text_content().startswith("Human · maria")
    page.reload()
    assert page.locator(".msg.assistant.human .tag").text_content().startswith("Human · maria")
    assert "Ana" not in page.locator(".msg.assistant.human .tag").text_content()
    assert support.sent == []

    body = page.text_content("body")
    assert "None" not in body and "undefined" not in body
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", page.inner_text("main"))  # no raw ISO for people
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "playground-handoff.png"), full_page=True)
    keep(page, "playground")
