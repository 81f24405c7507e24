"""The flows admin through Django's test client: the form shows the FlowConfigurationError on
the spec (naming flow and step) and saves nothing; warnings become messages; versions, diff,
revert; the picture; the draft page; the funnel page."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from falai_django.models import Flow, FlowVersion

from .agents import spec

pytestmark = pytest.mark.django_db

ADD = "/admin/falai_django/flow/add/"


def change_url(flow_id: str) -> str:
    return f"/admin/falai_django/flow/{flow_id}/change/"


@pytest.fixture
def client(staff):
    c = Client()
    c.force_login(staff)
    return c


def form(flow_id: str, body: dict, **extra) -> dict:
    return {"id": flow_id, "name": body.get("name", ""), "position": 0, "spec": json.dumps(body), **extra}


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_a_bad_spec_shows_the_error_on_the_spec_field_and_saves_nothing(client):
    bad = spec()
    bad["steps"][0]["collect"] = ["idade"]
    response = client.post(ADD, form("boas_vindas", bad))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["spec"]
    assert 'flow "boas_vindas", step "empresa": unknown field "idade"' in errors[0]
    assert b"unknown field" in response.content
    assert not Flow.objects.exists() and not FlowVersion.objects.exists()


def test_a_good_spec_is_saved_as_version_one_by_the_user_and_warnings_are_messages(client, staff):
    warned = spec()
    warned["steps"][1]["then"] = {"flow": "nowhere"}
    response = client.post(ADD, form("boas_vindas", warned, note="first cut"), follow=True)
    assert response.status_code == 200
    flow = Flow.objects.get()
    assert (flow.version, flow.updated_by, flow.enabled) == (1, staff, False)
    assert flow.versions.get().note == "first cut"
    assert any("nowhere" in m for m in messages_of(response))


def test_the_change_page_shows_the_picture_versions_and_links(client):
    Flow(id="boas_vindas", spec=spec()).save()
    page = client.get(change_url("boas_vindas")).content.decode()
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="falai-flowchart"' in page
    assert 'data-step="empresa"' in page and 'data-step="fim"' in page
    assert 'id="falai-spec-schema"' in page and "flow_editor.js" in page
    assert 'data-version="1"' in page and "/versions/1/" in page and "/funnel/" in page
    assert "None" not in page.split('id="falai-versions"')[1].split("</table>")[0]


def test_editing_makes_version_two_the_diff_shows_it_and_revert_brings_version_one_back(client, staff):
    Flow(id="boas_vindas", spec=spec()).save(changed_by=staff)
    edited = spec()
    edited["steps"][1]["say"] = "A new goodbye"
    response = client.post(change_url("boas_vindas"), {**form("boas_vindas", edited), "enabled": "on"})
    assert response.status_code == 302, response.content
    flow = Flow.objects.get()
    assert flow.version == 2 and flow.enabled

    page = client.get("/admin/falai_django/flow/boas_vindas/versions/1/").content.decode()
    assert '<span class="del">-      &quot;say&quot;: &quot;Database flow: thanks, {{data.empresa}}!&quot;' in page
    assert '<span class="add">+      &quot;say&quot;: &quot;A new goodbye&quot;' in page
    assert "flora" in page

    assert client.get("/admin/falai_django/flow/boas_vindas/versions/1/revert/").status_code == 405
    response = client.post("/admin/falai_django/flow/boas_vindas/versions/1/revert/", follow=True)
    flow.refresh_from_db()
    assert flow.version == 3 and flow.spec == spec() and flow.enabled  # enabled stays as it was
    assert any("Reverted to version 1" in m for m in messages_of(response))
    assert client.get("/admin/falai_django/flow/boas_vindas/versions/9/").status_code == 404


def test_the_picture_endpoint_draws_what_is_being_typed(client):
    response = client.post("/admin/falai_django/flow/picture/", json.dumps(spec()), content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    assert b'data-step="empresa"' in response.content
    bad = client.post("/admin/falai_django/flow/picture/", "{nope", content_type="application/json")
    assert bad.status_code == 400


def test_the_draft_page_writes_a_disabled_flow_with_the_offline_provider(client):
    page = client.get("/admin/falai_django/flow/")
    assert b"/admin/falai_django/flow/draft/" in page.content
    response = client.post("/admin/falai_django/flow/draft/",
                           {"description": "Ask the customer's empresa and cidade for a quote"})
    assert response.status_code == 302
    flow = Flow.objects.get()
    assert response["Location"] == change_url(flow.pk)
    assert flow.enabled is False and flow.version == 1
    assert flow.pk == "ask-the-customer-empresa"
    assert [s["id"] for s in flow.spec["steps"]] == ["pede_empresa", "pede_cidade", "fim"]
    assert client.post("/admin/falai_django/flow/draft/", {"description": " "}).status_code == 400


def test_the_funnel_page_shows_the_chart_and_refuses_bad_dates_kindly(client):
    Flow(id="boas_vindas", spec=spec()).save()
    page = client.get("/admin/falai_django/flow/boas_vindas/funnel/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'class="falai-funnel"' in body and 'data-step="empresa"' in body
    assert "None" not in body.split('id="content"')[1]
    bad = client.get("/admin/falai_django/flow/boas_vindas/funnel/?since=yesterday")
    assert bad.status_code == 200 and any("YYYY-MM-DD" in m for m in messages_of(bad))


def test_a_viewer_sees_but_cannot_revert_or_write_drafts(db):
    from django.contrib.auth.models import Permission, User

    viewer = User.objects.create_user("vera", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_flow"))
    Flow(id="boas_vindas", spec=spec()).save()
    flow = Flow.objects.get()
    flow.spec = {**spec(), "name": "changed"}
    flow.save()
    c = Client()
    c.force_login(viewer)
    page = c.get("/admin/falai_django/flow/boas_vindas/versions/1/")
    assert page.status_code == 200 and b'id="falai-revert"' not in page.content
    assert c.post("/admin/falai_django/flow/boas_vindas/versions/1/revert/").status_code == 403
    assert c.get("/admin/falai_django/flow/draft/").status_code == 403
    assert Flow.objects.get().version == 2
