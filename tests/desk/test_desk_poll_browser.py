"""A desk page whose refresh fails says so, in a real browser (Playwright driving Debian's
Chromium) against the live server.

The server's answers to the page's poll are stopped in the browser (`page.route`): first dropped
with no answer at all, then answered 503. Each time the page shows its "Reconnecting…" note with
the reason, and once the answers come back the note goes away and the page catches up with what
happened meanwhile. Without /usr/bin/chromium the test skips loudly, and with CI=true it fails.
"""

from __future__ import annotations

import re

import pytest

from falai_django import handoff, host

from .conftest import AGENT_PERMS, DESK, logged_in, make_user

SID = "5511977776666"
NOTE = "#desk-reconnecting"


@pytest.fixture
def browser(chromium):
    return chromium


def _through_an_outage(page, poll: re.Pattern[str], how: str, reason: str, meanwhile, every_ms: int) -> None:
    """Stop the answers to `poll` (`how`: "no answer" or "503"): the note shows `reason`; `meanwhile`
    runs while the page cannot hear; the note stays up until the answers come back, then goes."""
    if how == "no answer":
        page.route(poll, lambda route: route.abort("connectionrefused"))
    else:
        page.route(poll, lambda route: route.fulfill(status=503, body="down for a moment"))
    page.wait_for_selector(NOTE, state="visible", timeout=3 * every_ms)
    assert "Reconnecting" in page.locator(NOTE).inner_text() and reason in page.locator(NOTE).inner_text()
    meanwhile()
    page.wait_for_timeout(every_ms + 500)  # at least one more failed poll
    assert page.locator(NOTE).is_visible()
    page.unroute(poll)
    page.wait_for_selector(NOTE, state="hidden", timeout=3 * every_ms)


@pytest.mark.django_db(transaction=True)
def test_the_queue_and_the_conversation_say_when_their_refresh_fails(live_server, browser):
    make_user("alice", *AGENT_PERMS)
    host.handle(SID, {"message": "oi", "id": "m1"}, send_inline=True)
    handoff.take_over(SID, "alice")
    page = logged_in(browser, live_server, "alice")

    # The queue page: nothing is wrong, so nothing is said.
    page.goto(f"{live_server.url}{DESK}?q=open")
    page.wait_for_selector("#desk-tabs")
    page.wait_for_timeout(2_500)  # a good poll has come and gone
    assert page.locator(NOTE).is_hidden()
    assert SID in page.locator("#desk-rows").inner_text()
    assert page.title().startswith("(1) ")  # "oi", unread by Alice

    # No answer at all; meanwhile the customer writes. Once answers are back the unread count shows.
    _through_an_outage(page, re.compile(r".*/desk/poll/.*"), "no answer", "Failed to fetch",
                       lambda: host.handle(SID, {"message": "alguém aí?", "id": "m2"}, send_inline=True), 2_000)
    page.wait_for_function("document.title.startsWith('(2) ')", timeout=6_000)

    # The conversation page: a 503 names its status, and the transcript catches up after it.
    page.goto(f"{live_server.url}{DESK}{SID}/")
    page.wait_for_selector("#desk-transcript")
    assert page.locator(NOTE).is_hidden()
    _through_an_outage(page, re.compile(rf".*/desk/{SID}/poll/.*"), "503", "HTTP 503",
                       lambda: host.handle(SID, {"message": "ainda esperando", "id": "m3"}, send_inline=True), 1_000)
    page.wait_for_function(
        "document.getElementById('desk-transcript').innerText.includes('ainda esperando')", timeout=4_000)
    page.context.close()
