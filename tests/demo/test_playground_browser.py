"""A real browser on the playground: log in, chat through a whole triage (replies stream in),
fast-forward the silence wake and see the follow-up. Screenshot: test-artifacts/playground.png.

Needs Playwright and Debian's /usr/bin/chromium (`playwright install` is not used). Without
them the test skips loudly; with CI=true it fails instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from falai_django.providers.offline import MARK, OfflineProvider
from falai_django.testing import fake_clock
from project.agents import build_ana

from . import support

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Counts every distinct partial text the streaming bubble shows.
WATCH_STREAM = """
window.__partials = new Set();
new MutationObserver(() => {
  const live = document.querySelector('.msg.streaming .body');
  if (live && live.textContent) window.__partials.add(live.textContent);
}).observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture
def browser_page(new_page):
    return new_page(width=1360, height=900)


def signed_in(page, live_server, django_user_model):
    """The playground, after the admin's login it sends a visitor to (it is staff only)."""
    django_user_model.objects.create_superuser("admin", "admin@example.com", "demo-pass")
    page.goto(f"{live_server.url}/falai/playground/")
    assert "/admin/login/" in page.url
    page.fill("#id_username", "admin")
    page.fill("#id_password", "demo-pass")
    page.click("input[type=submit]")
    page.wait_for_url("**/falai/playground/")
    return page


@pytest.mark.django_db(transaction=True)
def test_chat_a_triage_and_fast_forward_in_a_browser(browser_page, live_server, demo_settings, django_user_model):
    support._current["agent"] = build_ana(provider=OfflineProvider(language="pt", chunk_delay_s=0.01),
                                          clock=fake_clock(support.START))
    page = signed_in(browser_page, live_server, django_user_model)
    assert "offline" in page.text_content("#provider")
    page.evaluate(WATCH_STREAM)

    assistant = page.locator(".msg.assistant:not(.streaming)")
    for count, text in enumerate(support.TRIAGE, 1):
        page.fill("#text", text)
        page.press("#text", "Enter")
        page.wait_for_function(f"document.querySelectorAll('.msg.assistant:not(.streaming)').length >= {count}")
        page.wait_for_selector("#send:not([disabled])")
        if count == 3:  # mid-triage: a run asking, a silence wake pending
            page.wait_for_function("document.getElementById('runs').textContent.includes('asking')")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "playground-mid-triage.png"))
    replies = assistant.all_text_contents()
    assert all(MARK in r for r in replies), replies
    assert support.THANKS in replies[-1]
    assert page.evaluate("window.__partials.size") > len(support.TRIAGE)  # text arrived piece by piece
    page.wait_for_function("document.getElementById('data').textContent.includes('João')")
    data = page.text_content("#data")
    assert "Acme" in data and "11-50" in data
    assert "lembrete" in page.text_content("#wakes")
    assert "triagem (end)" in page.text_content("#outcomes")

    page.click("#fast-forward")
    follow_up = "Um vendedor já está com o seu contato"
    page.wait_for_selector(f".msg.assistant.verbatim:has-text('{follow_up}')")
    page.wait_for_function("document.getElementById('wakes').textContent.includes('No wakes pending')")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "playground.png"), full_page=True)
    assert (ARTIFACTS / "playground.png").stat().st_size > 10_000


@pytest.mark.django_db(transaction=True)
def test_the_playground_says_when_it_cannot_look_again(browser_page, live_server, demo_settings, django_user_model):
    """The page looks at the conversation every 3 s (a human may reply from the admin); while
    those looks fail it shows a "Reconnecting…" banner with the reason, gone at the next good one."""
    import re

    page = signed_in(browser_page, live_server, django_user_model)
    page.wait_for_timeout(3_500)  # one good look has come and gone
    assert page.locator("#reconnecting").is_hidden()

    looks = re.compile(r".*/falai/playground/state/.*")
    page.route(looks, lambda route: route.fulfill(status=502, body="bad gateway"))
    page.wait_for_selector("#reconnecting", state="visible", timeout=8_000)
    assert "HTTP 502" in page.text_content("#reconnecting")
    page.unroute(looks)
    page.wait_for_selector("#reconnecting", state="hidden", timeout=8_000)
