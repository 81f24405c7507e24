"""The flows API: read and save a stored flow (a bad spec is a 400 naming flow and step, nothing
saved), and the funnel as JSON."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from falai_django import host
from falai_django.models import Flow

from .agents import spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(staff):
    client = APIClient()
    client.force_authenticate(staff)
    return client


def test_put_saves_a_version_and_get_reads_it(api):
    response = api.put("/falai/flows/boas_vindas", {"spec": spec(), "name": "B", "enabled": True}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["version"] == 1 and body["enabled"] is True and body["updated_by"] == "flora"
    assert body["warnings"] == []
    got = api.get("/falai/flows/boas_vindas").json()
    assert got["spec"] == spec() and got["name"] == "B"
    assert api.get("/falai/flows/missing").status_code == 404


def test_put_without_a_name_stores_and_answers_the_spec_s_own_name(api):
    response = api.put("/falai/flows/boas_vindas", {"spec": spec()}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Boas-vindas"
    assert api.get("/falai/flows/boas_vindas").json()["name"] == "Boas-vindas"
    flow = Flow.objects.get(pk="boas_vindas")
    assert flow.name == "Boas-vindas" and flow.versions.get(version=1).name == "Boas-vindas"

    # A later PUT without a name follows the spec it saves; a given name still wins.
    renamed = api.put("/falai/flows/boas_vindas", {"spec": spec(name="Recepção")}, format="json").json()
    assert renamed["name"] == "Recepção" and renamed["version"] == 2
    chosen = api.put("/falai/flows/boas_vindas", {"spec": spec(), "name": "Minha"}, format="json").json()
    assert chosen["name"] == "Minha" and Flow.objects.get(pk="boas_vindas").name == "Minha"


def test_a_bad_spec_is_a_400_naming_flow_and_step_and_saves_nothing(api):
    bad = spec()
    bad["steps"][0] = {"id": "empresa", "kind": "do", "do": "dispara"}
    response = api.put("/falai/flows/boas_vindas", {"spec": bad}, format="json")
    assert response.status_code == 400
    assert 'flow "boas_vindas", step "empresa": unknown action "dispara"' in response.json()["spec"][0]
    assert not Flow.objects.exists()
    assert api.put("/falai/flows/boas_vindas", {"name": "x"}, format="json").json() == {
        "spec": ["This field is required."]}
    assert api.put("/falai/flows/boas_vindas", {"spec": spec(), "enabled": "yes"},
                   format="json").status_code == 400
    assert not Flow.objects.exists()


def test_saving_needs_the_flow_permissions(db):
    viewer = User.objects.create_user("v", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_flow"))
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.put("/falai/flows/boas_vindas", {"spec": spec()}, format="json").status_code == 403
    assert APIClient().get("/falai/flows/boas_vindas").status_code in (401, 403)


def test_the_funnel_as_json_for_a_stored_and_a_code_flow(api):
    host.handle("5511", {"message": "hi", "id": "m1"})
    body = api.get("/falai/flows/triagem/funnel").json()  # the code flow
    assert body["started"] == 1 and body["steps"][0] == {"id": "quem", "reached": 1, "max_asks": 0,
                                                          "median_seconds": None}
    assert body["ended"]["in_progress"] == 1
    assert api.get("/falai/flows/nope/funnel").status_code == 404
    assert api.get("/falai/flows/triagem/funnel?since=2026-13-01").status_code == 400
    assert api.get("/falai/flows/triagem/funnel?since=2026-05-02&until=2026-05-01").status_code == 400


def test_a_spec_without_an_id_takes_the_urls(api):
    body = {k: v for k, v in spec().items() if k != "id"}
    response = api.put("/falai/flows/boas_vindas", {"spec": body}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["spec"]["id"] == "boas_vindas"
    assert Flow.objects.get(pk="boas_vindas").spec == spec()
    # a different id in the spec is still refused, naming both
    other = api.put("/falai/flows/outro", {"spec": spec()}, format="json")
    assert other.status_code == 400 and "not \"outro\"" in other.json()["spec"][0]
