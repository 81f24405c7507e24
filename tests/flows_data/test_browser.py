"""The flows admin in a real browser (Playwright driving Debian's Chromium, JavaScript on) against
the live server, with a conversation through the API beside it:

create a flow with an error (the page's live check and the saved form both name the step), fix
it, enable it, and the API conversation follows the new flow within seconds; edit the step the
conversation sits on; revert. Screenshots go to test-artifacts/flows-*.png. Without
/usr/bin/chromium the test skips loudly, and with CI=true it fails instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from falai_django.models import Flow, Session

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

DB_TRIAGEM = {
    "id": "triagem", "name": "Triagem (admin)", "on": [{"message": []}],
    "steps": [
        {"id": "quem", "kind": "collect", "collect": ["idade"]},  # the error: no such field
        {"id": "tchau", "kind": "say", "say": "Admin flow: thanks, {{data.nome}}!"},
    ],
}


@pytest.fixture
def browser_page(new_page):
    return new_page()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"flows-{name}.png"), full_page=True)


def customer(base: str, token: str, sid: str, text: str, n: int) -> list[str]:
    response = httpx.post(f"{base}/falai/sessions/{sid}/messages", json={"text": text, "id": f"{sid}-{n}"},
                          headers={"Authorization": f"Token {token}"}, timeout=10)
    assert response.status_code == 200, response.text
    return [m["text"] for m in response.json()["messages"]]


def eventually(check, seconds: float = 5.0):
    """`check()` until it is truthy, for up to `seconds` (the running agent reloads within seconds)."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def set_spec(page, spec: dict) -> None:
    """Replace the editor's text (the spec textarea behind it follows)."""
    page.evaluate("text => window.falaiFlowEditor.setText(text)", json.dumps(spec, indent=2))


@pytest.mark.django_db(transaction=True)
def test_create_fix_enable_follow_edit_and_revert_in_a_browser(live_server, browser_page, staff):
    from rest_framework.authtoken.models import Token

    page, base = browser_page, live_server.url
    token = Token.objects.create(user=staff).key
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "flora")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")

    # Before: the code flow answers.
    assert customer(base, token, "c0", "hi", 1) == ["[offline] Ask for the person's name."]
    assert customer(base, token, "c0", "Rui", 2) == ["Code flow: thanks, Rui!"]

    # 1. A flow with an error: the page's live check flags it, and saving shows the step.
    page.goto(f"{base}/admin/falai_django/flow/add/")
    page.fill("#id_id", "triagem")
    page.fill("#id_name", "Triagem (admin)")
    set_spec(page, DB_TRIAGEM)
    live = page.locator("#falai-live")
    live.wait_for(state="visible")
    assert "falai-live bad" in live.get_attribute("class")
    page.wait_for_function("document.querySelector('#falai-live').innerText.includes('unknown field')")
    assert 'flow "triagem", step "quem": unknown field "idade"' in live.inner_text()  # the server's words
    page.wait_for_function("document.querySelector('#falai-picture svg [data-step=\"quem\"]') !== null")
    page.click("input[name=_continue]")
    page.wait_for_selector(".errornote")
    error = page.locator(".field-spec .errorlist").inner_text()
    assert 'flow "triagem", step "quem": unknown field "idade"' in error
    shot(page, "error")
    assert not Flow.objects.exists()

    # 2. Fix it: the live check turns green; save; the picture shows the steps.
    fixed = json.loads(json.dumps(DB_TRIAGEM))
    fixed["steps"][0]["collect"] = ["nome"]
    set_spec(page, fixed)
    page.wait_for_function("document.querySelector('#falai-live').className.includes('ok')")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    assert page.locator("#falai-picture svg [data-step='tchau']").count() == 1
    flow = Flow.objects.get()
    assert (flow.version, flow.enabled) == (1, False)
    # Disabled, it is a draft: the code flow still answers.
    customer(base, token, "c1", "hi", 1)
    assert customer(base, token, "c1", "Ana", 2) == ["Code flow: thanks, Ana!"]

    # 3. Enable it: a conversation through the API follows the new flow within seconds.
    page.check("#id_enabled")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    assert Flow.objects.get().version == 2

    def follows() -> bool:
        sid = f"c2-{time.monotonic_ns()}"
        customer(base, token, sid, "hi", 1)
        return customer(base, token, sid, "Bia", 2) == ["Admin flow: thanks, Bia!"]

    assert eventually(follows)

    # 4. Edit the step a conversation sits on ("quem") and the one after it: it continues by step id.
    assert customer(base, token, "c3", "hi", 1) == ["[offline] Ask for the person's name."]
    edited = json.loads(json.dumps(fixed))
    edited["steps"][0]["prompt"] = "Greet the person warmly."
    edited["steps"][1]["say"] = "Edited mid-conversation, {{data.nome}}."
    set_spec(page, edited)
    page.fill("#id_note", "new goodbye")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    assert eventually(lambda: Flow.objects.get().version == 3)
    assert customer(base, token, "c3", "Caio", 2) == ["Edited mid-conversation, Caio."]
    shot(page, "page")

    # 5. Revert to version 2 from its page (the diff shows the change first).
    page.click("#falai-versions tr[data-version='2'] a")
    page.wait_for_selector("#falai-diff")
    added = page.locator("#falai-diff .add").all_inner_texts()
    assert '+      "prompt": "Greet the person warmly."' in added
    assert added[-1] == '+      "say": "Edited mid-conversation, {{data.nome}}."'
    assert page.locator("#falai-diff .del").all_inner_texts()[-1] == '-      "say": "Admin flow: thanks, {{data.nome}}!"'
    shot(page, "version")
    page.click("#falai-revert input[type=submit]")
    page.wait_for_selector(".messagelist")
    assert "Reverted to version 2: it is now version 4." in page.locator(".messagelist").inner_text()
    flow = Flow.objects.get()
    assert flow.version == 4 and flow.spec == fixed
    customer(base, token, "c4", "hi", 1)
    assert customer(base, token, "c4", "Duda", 2) == ["Admin flow: thanks, Duda!"]

    # 6. Where customers drop out: every run above (code and stored versions alike), on the chart.
    conversations = Session.objects.count()
    page.click("#falai-funnel-link")
    page.wait_for_selector("svg.falai-funnel")
    assert page.locator("#falai-funnel tr[data-step='quem'] td").nth(1).inner_text() == str(conversations)
    assert page.locator("#falai-funnel tr[data-step='tchau'] td").nth(1).inner_text() == str(conversations)
    assert page.locator("#falai-endings tr[data-ending='completed'] td").nth(1).inner_text() == str(conversations)
    shot(page, "funnel")

    # 7. A draft from a description, with the offline provider.
    page.goto(f"{base}/admin/falai_django/flow/")
    page.click("#falai-draft-link")
    page.fill("#id_description", "Ask for the empresa and the cidade of a new lead")
    page.click("#falai-draft-form input[type=submit]")
    page.wait_for_selector(".messagelist")
    assert "saved, disabled" in page.locator(".messagelist").inner_text()
    draft = Flow.objects.exclude(pk="triagem").get()
    assert draft.enabled is False and [s["id"] for s in draft.spec["steps"]] == ["pede_empresa", "pede_cidade", "fim"]
    shot(page, "draft")
