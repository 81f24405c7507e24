"""The flow editor in a real browser (issue 55): CodeMirror over the spec, completion from the
authoring schema the server derives from the running agent, and, as you type, the verdict a save
would give (the server's own message), with the picture redrawn.

Playwright drives Debian's Chromium; without it the tests skip loudly, and with CI=true they fail.
"""

from __future__ import annotations

import json

import pytest
from readme_screenshots import keep

from falai_django.models import Flow

ADD = "/admin/falai_django/flow/add/"
# The README's way: no kind, keys left out.
README_FLOW = {
    "id": "boas_vindas", "name": "Boas-vindas", "on": [{"message": []}],
    "steps": [{"id": "quem", "collect": ["nome"]}, {"id": "tchau", "say": "Obrigada, {{data.nome}}!"}],
}
BROKEN_FLOW = {
    "id": "boas_vindas", "name": "Boas-vindas", "on": [{"message": []}],
    "steps": [{"id": "quem", "collect": ["idade"]}, {"id": "tchau", "say": "Obrigada!"}],
}


@pytest.fixture
def page(new_page, live_server, staff):
    page = new_page()
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "flora")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")
    return page


def type_spec(page, text: str) -> None:
    """Type `text` into the editor as a person would (keystrokes, the editor's own bracket and
    quote handling included)."""
    page.click(".falai-editor .cm-content")
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.type(text, delay=0)


def editor_text(page) -> str:
    return page.evaluate("window.falaiFlowEditor.text()")


def wait_verdict(page, kind: str, text: str):
    """The live box in state `kind` ("ok"/"bad") once the server's check of `text` came back."""
    page.wait_for_function(
        """([kind, text]) => {
             const box = document.querySelector('#falai-live');
             const v = window.falaiFlowEditor && window.falaiFlowEditor.verdict();
             return box && box.classList.contains(kind) && v !== null && window.falaiFlowEditor.text() === text
               && v.ok === (kind === 'ok');
           }""", arg=[kind, text])
    return page.locator("#falai-live")


def completions(page) -> list[str]:
    page.keyboard.press("Control+Space")
    page.wait_for_selector(".cm-tooltip-autocomplete li")
    return page.locator(".cm-tooltip-autocomplete li .cm-completionLabel").all_inner_texts()


@pytest.mark.django_db(transaction=True)
def test_a_readme_style_flow_reads_as_valid_and_a_broken_one_shows_the_servers_message(page, live_server):
    page.goto(live_server.url + ADD)
    assert page.locator("#id_spec").is_hidden()  # the textarea stays in the form, behind the editor
    text = json.dumps(README_FLOW, ensure_ascii=False)
    type_spec(page, text)
    assert json.loads(editor_text(page)) == README_FLOW  # typed through auto-closing brackets and quotes
    live = wait_verdict(page, "ok", editor_text(page))
    assert live.inner_text().startswith("The server accepts this flow.")
    assert "kind" not in live.inner_text()
    assert page.locator(".cm-lintRange-error").count() == 0
    # the picture is redrawn from what was typed
    page.wait_for_selector("#falai-picture svg [data-step='tchau']")
    page.evaluate("text => window.falaiFlowEditor.setText(text)", json.dumps(README_FLOW, indent=2, ensure_ascii=False))
    wait_verdict(page, "ok", editor_text(page))
    keep(page, "flow-editor", top=".field-spec")  # the editor, then the picture

    type_spec(page, json.dumps(BROKEN_FLOW))
    live = wait_verdict(page, "bad", editor_text(page))
    shown = live.inner_text()
    assert 'flow "boas_vindas", step "quem": unknown field "idade"' in shown
    page.wait_for_selector(".cm-lintRange-error")
    # the same words a save gives: the server's own message, not the browser's
    page.click("input[name=_continue]")
    page.wait_for_selector(".errornote")
    saved_error = page.locator(".field-spec .errorlist").inner_text()
    assert saved_error.strip() == shown.strip()
    assert not Flow.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_saved_page_of_a_readme_style_flow_shows_no_red_box(page, live_server):
    page.goto(live_server.url + ADD)
    type_spec(page, json.dumps(README_FLOW, ensure_ascii=False))
    wait_verdict(page, "ok", editor_text(page))
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    flow = Flow.objects.get()
    assert flow.pk == "boas_vindas"  # the id field was left empty: the spec's id was used
    live = wait_verdict(page, "ok", editor_text(page))
    assert live.is_visible() and "bad" not in live.get_attribute("class")
    assert json.loads(editor_text(page)) == README_FLOW


@pytest.mark.django_db(transaction=True)
def test_completion_offers_the_agents_keys_fields_and_step_ids(page, live_server):
    page.goto(live_server.url + ADD)
    type_spec(page, '{"id": "x", "steps": [{"id": "a", "')
    keys = completions(page)
    assert {'"collect"', '"say"', '"do"', '"wait"', '"prompt"', '"then"'} <= set(keys)
    assert '"max_asks"' not in keys  # aliases are read, not offered
    page.keyboard.press("Escape")
    type_spec(page, '{"id": "x", "steps": [{"id": "a", "collect": ["')
    assert set(completions(page)) == {'"nome"', '"empresa"', '"cidade"'}
    page.keyboard.press("Escape")
    type_spec(page, '{"id": "x", "steps": [{"id": "a", "do": "')
    assert completions(page) == ['"notify"']
    page.keyboard.press("Escape")
    type_spec(page, '{"id": "x", "steps": [{"id": "a", "say": "oi", "then": "b"}, {"id": "b", "say": "x", "then": "')
    assert {'"a"', '"b"', '"end"'} <= set(completions(page))
    page.keyboard.press("Escape")
    type_spec(page, '{"id": "x", "steps": [{"id": "a", "say": "oi", "once": ')
    assert completions(page) == ["true", "false"]
    page.keyboard.press("Escape")
    # a completion is inserted as typed JSON
    type_spec(page, '{"id": "x", "steps": [{"id": "a", "sa')
    page.keyboard.press("Control+Space")
    page.wait_for_selector(".cm-tooltip-autocomplete li")
    page.locator(".cm-tooltip-autocomplete li", has_text='"say"').first.click()
    assert editor_text(page).endswith('{"id": "a", "say": }]}')


@pytest.mark.django_db(transaction=True)
def test_a_typo_in_a_key_is_a_hint_and_a_wrong_enum_is_marked_where_it_is(page, live_server):
    page.goto(live_server.url + ADD)
    flow = {**README_FLOW, "onend": "reset"}
    text = json.dumps(flow, ensure_ascii=False)
    type_spec(page, text)
    wait_verdict(page, "ok", editor_text(page))  # the server ignores an unknown key...
    page.wait_for_selector(".cm-lintRange-info")  # ...and the editor says so, without calling it an error
    assert page.locator(".cm-lintRange-error").count() == 0

    flow = {**README_FLOW, "onEnd": "restart"}
    type_spec(page, json.dumps(flow, ensure_ascii=False))
    live = wait_verdict(page, "bad", editor_text(page))
    assert "onEnd" in live.inner_text() and "restart" in live.inner_text()
    marked = page.locator(".cm-lintRange-error").all_inner_texts()
    assert '"restart"' in marked


@pytest.mark.django_db(transaction=True)
def test_half_typed_json_says_so_with_its_line(page, live_server):
    page.goto(live_server.url + ADD)
    page.evaluate("window.falaiFlowEditor.setText('{\\n  \"id\": \"x\",\\n  \"steps\": [\\n')")
    page.wait_for_function("document.querySelector('#falai-live').className.includes('bad')")
    assert "Not valid JSON yet:" in page.locator("#falai-live").inner_text()
    assert "(line 3)" in page.locator("#falai-live").inner_text()


@pytest.mark.django_db(transaction=True)
def test_the_browsers_schema_check_agrees_with_jsonschema_on_every_variant(page, live_server):
    """The editor's own check of the authoring schema (a subset of JSON Schema in JavaScript)
    calls a spec wrong exactly when Python's jsonschema does, over the corpus and every one-edit
    variant of it: the browser adds no verdict of its own."""
    import jsonschema

    from falai_django import conf
    from falai_django.engine.spec import flow_authoring_schema

    from .authoring_corpus import INVALID, VALID, mutations

    page.goto(live_server.url + ADD)
    page.wait_for_function("window.falaiFlowEditor !== undefined")
    validator = jsonschema.Draft202012Validator(flow_authoring_schema(conf.get_code_agent()))
    specs = [*VALID, *INVALID, *(m for spec in VALID for m in mutations(spec))]
    verdicts = page.evaluate(
        """specs => specs.map(s => window.falaiFlowEditor.schemaProblems(s)
             .filter(p => p.severity === 'error').map(p => p.message))""", specs)
    disagree = [(spec, said) for spec, said in zip(specs, verdicts, strict=True)
                if bool(said) == validator.is_valid(spec)]
    assert disagree == []
    assert sum(1 for said in verdicts if said) > 500  # it does call many of them wrong
    hints = page.evaluate("s => window.falaiFlowEditor.schemaProblems(s)", VALID[-1])
    assert [(h["severity"], h["path"]) for h in hints] == [("info", ["steps", 0, "notes"])]


@pytest.mark.django_db(transaction=True)
def test_a_script_that_sets_the_textarea_is_followed_by_the_editor(page, live_server):
    page.goto(live_server.url + ADD)
    page.wait_for_function("window.falaiFlowEditor !== undefined")
    text = json.dumps(README_FLOW)
    page.evaluate("""text => { const area = document.getElementById('id_spec');
                              area.value = text; area.dispatchEvent(new Event('input')); }""", text)
    assert editor_text(page) == text
    wait_verdict(page, "ok", text)
    assert page.evaluate("v => window.falaiCheckSpec(v)", BROKEN_FLOW) == [
        'collect[0] is "idade", which is not one of "nome", "empresa", "cidade"']
