"""Both transcripts open at the newest message, fully in view, in a real browser (Playwright
driving Debian's Chromium, JavaScript on) against the live server: the conversation page and the
desk, each with a transcript long enough to scroll (issue 55: both opened 16-100 px short of the
bottom, the newest message's last lines cut off). The cause: the page scrolled its transcript
once, from an inline script, before Django's deferred nav_sidebar.js opened the sidebar; the
narrower content then wrapped the messages onto more lines and the transcript grew under the old
scroll position. The desk also follows the poll's new messages while it is at the bottom.

The admin's sidebar opens by default (nothing in localStorage), as for a person's first visit.
Without /usr/bin/chromium the test skips loudly, and with CI=true it fails instead.
"""

from __future__ import annotations

import pytest

from falai_django import handoff, host

from .conftest import AGENT_PERMS, CHANGELIST, DESK, logged_in, make_user

SID = "5511966665555"

# How far the transcript is from its bottom, and where its newest item sits against its visible box.
MEASURE = """(id) => {
  const chat = document.getElementById(id);
  const items = chat.querySelectorAll('.falai-msg, .falai-note, .falai-marker');
  const last = items[items.length - 1];
  const box = chat.getBoundingClientRect();
  const top = box.top + chat.clientTop;
  return {gap: chat.scrollHeight - chat.scrollTop - chat.clientHeight,
          scrolls: chat.scrollHeight > chat.clientHeight + 200,
          lastTop: last.getBoundingClientRect().top, lastBottom: last.getBoundingClientRect().bottom,
          boxTop: top, boxBottom: top + chat.clientHeight, lastText: last.innerText};
}"""


@pytest.fixture
def browser(chromium):
    return chromium


def settled(page) -> None:
    """After the load event and two animation frames: the deferred scripts (the sidebar) ran and
    the layout they caused has been drawn."""
    page.wait_for_load_state("load")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.wait_for_timeout(200)


def assert_newest_in_view(page, chat: str, text: str = "") -> None:
    m = page.evaluate(MEASURE, chat)
    assert m["scrolls"], f"the transcript should be long enough to scroll: {m}"
    assert m["gap"] <= 1, f"the transcript stops {m['gap']} px short of its newest message: {m}"
    assert m["boxTop"] - 0.5 <= m["lastTop"] and m["lastBottom"] <= m["boxBottom"] + 0.5, (
        f"the newest message is not wholly inside the transcript's visible box: {m}")
    assert text in m["lastText"]


@pytest.mark.django_db(transaction=True)
def test_both_transcripts_open_with_the_newest_message_in_view(live_server, browser):
    make_user("alice", *AGENT_PERMS)
    for n in range(14):  # long enough to wrap differently with and without the sidebar
        host.handle(SID, {"message": f"mensagem {n}: " + "quero saber mais sobre o plano anual " * (n % 4 + 1),
                          "id": f"m{n}"}, send_inline=True)
    handoff.take_over(SID, "alice")
    page = logged_in(browser, live_server, "alice")
    assert page.evaluate("localStorage.getItem('django.admin.navSidebarIsOpen')") is None  # the default: open

    page.goto(f"{live_server.url}{CHANGELIST}{SID}/change/")
    settled(page)
    assert page.locator("#nav-sidebar").is_visible()
    assert_newest_in_view(page, "falai-chat", "Taken over")

    page.goto(f"{live_server.url}{DESK}{SID}/")
    settled(page)
    assert page.locator("#nav-sidebar").is_visible()
    assert_newest_in_view(page, "desk-transcript", "Taken over")

    # The desk's poll brings a new message: the transcript, at the bottom, follows it.
    host.handle(SID, {"message": "e qual é o prazo de entrega para o interior? " * 3, "id": "m-late"})
    page.wait_for_selector('#desk-transcript .falai-msg[data-who="customer"]:has-text("prazo de entrega")',
                           timeout=3_000)
    settled(page)
    assert_newest_in_view(page, "desk-transcript", "prazo de entrega")
