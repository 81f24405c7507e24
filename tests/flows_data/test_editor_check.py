"""The flow editor's server side (issue 55): the check URL answers what a save would say (the
same check, the same words), the page carries the authoring schema and the bundled editor (no
code from elsewhere), and the flow's id is typed once (the field or the spec's "id")."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.test import Client

from falai_django.models import Flow

from .agents import spec

pytestmark = pytest.mark.django_db

ADD = "/admin/falai_django/flow/add/"
CHECK = "/admin/falai_django/flow/check/"
README_FLOW = {"id": "boas_vindas", "steps": [{"id": "quem", "collect": ["nome"]}, {"id": "tchau", "say": "Tchau"}]}


@pytest.fixture
def client(staff):
    c = Client()
    c.force_login(staff)
    return c


def check(client, text, **params):
    body = text if isinstance(text, str) else json.dumps(text)
    response = client.post(CHECK + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else ""),
                           body, content_type="application/json")
    assert response["Content-Type"] == "application/json"
    return response


def test_a_readme_style_flow_is_accepted_with_its_picture(client):
    verdict = check(client, README_FLOW, id="").json()
    assert verdict["ok"] is True and verdict["error"] is None and verdict["warnings"] == []
    assert 'data-step="quem"' in verdict["picture"] and 'data-step="tchau"' in verdict["picture"]


def test_a_broken_flow_gets_the_same_words_a_save_gives(client):
    broken = {**README_FLOW, "steps": [{"id": "quem", "collect": ["idade"]}]}
    verdict = check(client, broken, id="boas_vindas").json()
    assert verdict["ok"] is False
    saved = client.post(ADD, {"id": "boas_vindas", "name": "", "position": 0, "spec": json.dumps(broken)})
    assert verdict["error"] == saved.context["adminform"].form.errors["spec"][0]
    assert verdict["error"].startswith('[FlowConfigurationError] flow "boas_vindas", step "quem": unknown field "idade"')
    assert not Flow.objects.exists()


def test_warnings_come_back_beside_an_accepted_flow(client):
    warned = {**README_FLOW, "steps": [{"id": "quem", "collect": ["nome"], "then": {"flow": "nowhere"}}]}
    verdict = check(client, warned).json()
    assert verdict["ok"] is True and any("nowhere" in w for w in verdict["warnings"])


def test_text_that_is_not_json_or_too_deep_is_a_verdict_not_a_crash(client):
    verdict = check(client, '{"id": "x", "steps": [').json()
    assert verdict["ok"] is False and verdict["error"].startswith("The spec is not valid JSON")
    deep = check(client, "[" * 500 + "]" * 500).json()
    assert deep["ok"] is False and "nest" in deep["error"]


def test_the_id_field_and_the_spec_must_agree_as_on_save(client):
    verdict = check(client, README_FLOW, id="outro").json()
    assert verdict["ok"] is False and "the spec's id is 'boas_vindas', not \"outro\"" in verdict["error"]
    no_id = check(client, {"steps": []}, id="").json()
    assert no_id["ok"] is False and "no id" in no_id["error"]
    bad_slug = check(client, {"id": "não é slug", "steps": []}).json()
    assert bad_slug["ok"] is False and "slug" in bad_slug["error"].lower()


def test_a_stored_flow_is_checked_as_itself_not_as_a_clash_with_its_own_row(client):
    Flow(id="boas_vindas", spec=spec(), enabled=True).save()
    verdict = check(client, spec(), object="boas_vindas").json()
    assert verdict["ok"] is True, verdict
    assert check(client, spec(), object="ghost").status_code == 404


def test_the_check_needs_a_post_and_a_staff_user(client, db):
    assert client.get(CHECK).status_code == 405
    anonymous = Client().post(CHECK, "{}", content_type="application/json")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]


def test_the_page_carries_the_authoring_schema_the_check_url_and_the_bundled_editor(client):
    page = client.get(ADD).content.decode()
    schema = json.loads(re.search(r'<script id="falai-spec-schema" type="application/json">(.*?)</script>',
                                  page, re.S).group(1))
    steps = schema["properties"]["steps"]["items"]["anyOf"]
    assert all("kind" not in s["required"] for s in steps if "required" in s)
    assert 'data-check-url="/admin/falai_django/flow/check/"' in page
    scripts = re.findall(r'<script[^>]+src="([^"]+)"', page)
    assert "/static/falai_django/flow_editor.js" in scripts
    assert not [s for s in scripts if s.startswith(("http:", "https:", "//"))]  # nothing from a CDN


def test_the_id_is_typed_once_left_empty_it_is_the_specs(client, staff):
    response = client.post(ADD, {"id": "", "name": "", "position": 0, "spec": json.dumps(README_FLOW)})
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Flow.objects.get().pk == "boas_vindas"


def test_the_id_is_typed_once_a_spec_without_one_gets_the_fields(client):
    body = {"steps": README_FLOW["steps"]}
    response = client.post(ADD, {"id": "boas_vindas", "name": "", "position": 0, "spec": json.dumps(body)})
    assert response.status_code == 302, response.context["adminform"].form.errors
    flow = Flow.objects.get()
    assert flow.pk == "boas_vindas" and list(flow.spec) == ["id", "steps"] and flow.spec["id"] == "boas_vindas"


def test_without_any_id_the_form_says_where_to_write_it(client):
    response = client.post(ADD, {"id": "", "name": "", "position": 0, "spec": json.dumps({"steps": []})})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["id"] == ['Give the flow an id, here or as the spec\'s "id".']
    assert not Flow.objects.exists()


def test_a_spec_id_that_is_not_a_slug_is_refused_on_the_id_field(client):
    response = client.post(ADD, {"id": "", "name": "", "position": 0,
                                 "spec": json.dumps({"id": "não é slug", "steps": []})})
    assert response.status_code == 200 and "id" in response.context["adminform"].form.errors
    assert not Flow.objects.exists()


def test_the_change_page_fills_a_spec_without_an_id_from_the_stored_flow(client):
    Flow(id="boas_vindas", spec=spec()).save()
    body = {k: v for k, v in spec().items() if k != "id"}
    response = client.post("/admin/falai_django/flow/boas_vindas/change/",
                           {"name": "", "position": 0, "spec": json.dumps(body)})
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Flow.objects.get().spec["id"] == "boas_vindas"


def test_the_labels_are_capitalised_like_the_models_own(client):
    page = client.get(ADD).content.decode()
    labels = re.findall(r'<label[^>]*for="id_[a-z_]+"[^>]*>([^<:]+):?</label>', page)
    assert {"Spec", "Note", "Id", "Name"} <= set(labels)
    assert not [label for label in labels if label[0].islower()]


def test_the_editors_words_are_in_brazilian_portuguese_too(client):
    page = client.get(ADD, headers={"accept-language": "pt-br"}).content.decode()
    assert 'for="id_spec">Especificação:' in page and 'for="id_note">Nota:' in page
    assert 'data-ok="O servidor aceita este fluxo."' in page
    assert 'Deixe em branco para usar o "id" da especificação' in html.unescape(page)


def test_the_flow_pages_link_the_apps_icon(client):
    Flow(id="boas_vindas", spec=spec()).save()
    for url in (ADD, "/admin/falai_django/flow/", "/admin/falai_django/flow/draft/",
                "/admin/falai_django/flow/boas_vindas/change/", "/admin/falai_django/flow/boas_vindas/versions/1/",
                "/admin/falai_django/flow/boas_vindas/funnel/"):
        page = client.get(url).content.decode()
        assert '<link rel="icon" type="image/svg+xml" href="/static/falai_django/favicon.svg">' in page, url
