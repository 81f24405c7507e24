"""No page asks for a favicon in vain (issue 55: every admin page logged "Not Found: /favicon.ico").

A real browser (Playwright driving Debian's Chromium) opens the admin's index, its login page,
another app's list (Django's own pages, which link no icon), the conversation list, the desk and
the playground, each in a fresh browser context (no icon cached). The browser's favicon requests
never reach Playwright's network events, so the server side is watched too: every path the live
server was asked for (Django's `request_started`) and every "Not Found" it logged.

The app's own pages link `falai_django/favicon.svg` and never make the browser guess /favicon.ico;
Django's pages do guess it, and the project answers it (`falai_django.favicon.favicon`).
"""

from __future__ import annotations

import logging
import time

import pytest
from django.core.signals import request_started

from .conftest import make_user

ICON = "/static/falai_django/favicon.svg"


class Watch:
    """What the live server was asked for, and what the browser saw go wrong."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.bad: list[str] = []

    def started(self, sender, environ, **kwargs) -> None:
        self.paths.append(environ.get("PATH_INFO", ""))

    def on(self, page) -> None:
        page.on("response", lambda r: r.status >= 400 and self.bad.append(f"{r.status} {r.url}"))
        page.on("requestfailed", lambda r: self.bad.append(f"failed {r.url}: {r.failure}"))


def wait_for(paths: list[str], wanted: str, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if wanted in paths:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.django_db(transaction=True)
def test_no_page_asks_for_a_favicon_in_vain(live_server, chromium, caplog):
    caplog.set_level(logging.WARNING, logger="django.request")
    make_user("root", superuser=True)
    watch = Watch()
    request_started.connect(watch.started)
    try:
        signed_in = chromium.new_context(locale="en-US")
        login = signed_in.new_page()
        watch.on(login)
        login.goto(f"{live_server.url}/admin/login/?next=/admin/")
        login.fill("#id_username", "root")
        login.fill("#id_password", "pw")
        login.click("input[type=submit]")
        login.wait_for_selector("#user-tools")
        state = signed_in.storage_state()
        signed_in.close()

        def visit(url: str, ready: str, *, anonymous: bool = False) -> list[str]:
            """The paths the server was asked for while `url` loaded (and its icon after it)."""
            context = chromium.new_context(locale="en-US", storage_state=None if anonymous else state)
            page = context.new_page()
            page.set_default_timeout(15_000)
            watch.on(page)
            start = len(watch.paths)
            page.goto(f"{live_server.url}{url}")
            page.wait_for_selector(ready)
            page.wait_for_load_state("load")
            # the browser asks for the icon after the load: the linked one, or /favicon.ico
            assert wait_for(watch.paths, ICON) or wait_for(watch.paths, "/favicon.ico", 1.0), watch.paths[start:]
            page.wait_for_timeout(300)
            context.close()
            return watch.paths[start:]

        # The app's own pages link their icon: no guess at /favicon.ico.
        for url, ready in (("/admin/falai_django/conversation/", "#result_list, #changelist"),
                           ("/admin/falai_django/conversation/desk/", "#desk-tabs"),
                           ("/falai/playground/", "body")):
            asked = visit(url, ready)
            assert ICON in asked, (url, asked)
            assert "/favicon.ico" not in asked, (url, asked)

        # Django's own pages link none: the browser asks /favicon.ico, and it is answered.
        for url, ready, anonymous in (("/admin/", "#user-tools", False),
                                      ("/admin/auth/user/", "#result_list", False),
                                      ("/admin/login/", "#id_username", True)):
            asked = visit(url, ready, anonymous=anonymous)
            assert "/favicon.ico" in asked and ICON in asked, (url, asked)
    finally:
        request_started.disconnect(watch.started)

    assert watch.bad == []
    not_found = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert not_found == [], not_found
