"""Issue 51 in a real browser (Playwright driving Debian's Chromium, JavaScript on) against the
live server: the conversation list's "Erase the selected conversations everywhere" asks once
more; dismissing it erases nothing, accepting it erases the selected conversation and says so.
Without /usr/bin/chromium the test skips loudly, and with CI=true it fails instead."""

from __future__ import annotations

import pytest

from falai_django.models import Erasure, Session

from .conftest import CHANGELIST, make_user, say


@pytest.mark.django_db(transaction=True)
def test_erase_selected_asks_first_then_erases(live_server, new_page):
    make_user("dora", "view_conversation", "erase_conversation")
    say("5511999990001", "oi", "wamid.1")
    say("5511999990002", "oi", "wamid.2")
    page = new_page(width=1400, height=900)
    page.goto(f"{live_server.url}/admin/login/?next={CHANGELIST}")
    page.fill("#id_username", "dora")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#result_list")

    asked: list[str] = []

    def answer(accept: bool):
        def on_dialog(dialog) -> None:
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()
        return on_dialog

    row = page.locator("#result_list tbody tr", has_text="5511999990001")
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "erase_selected")
    page.once("dialog", answer(False))
    page.click("button[name=index]")
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith("Erase 1 selected conversation(s) everywhere?")
    assert Session.objects.filter(pk="5511999990001").exists() and not Erasure.objects.exists()

    page.once("dialog", answer(True))
    with page.expect_navigation():
        page.click("button[name=index]")
    assert "Erased 1 conversation everywhere" in page.locator("ul.messagelist").inner_text()
    assert not Session.objects.filter(pk="5511999990001").exists()
    assert Session.objects.filter(pk="5511999990002").exists()
    assert Erasure.objects.get().username == "dora"
