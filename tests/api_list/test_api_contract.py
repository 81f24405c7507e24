"""The API is what its schema says (issue 58), one rule at a time: what the schema calls valid
the server takes, what it calls invalid the server refuses with a JSON reason, every answer
under the API's paths is JSON, and the links lead to operations that exist. (tests/fuzz runs
schemathesis over all of it.)"""

from __future__ import annotations

import json
import re

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db(transaction=True)

GREETING = {"name": "Greeting", "steps": [{"id": "hello", "say": "Hello!"}]}


def _schema(api) -> dict:
    response = api.get("/falai/schema")
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


def _json_reason(response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body and all(body.values()), body
    return body


@pytest.mark.parametrize("path", [
    "/falai/flows/not.a.slug", "/falai/flows/not.a.slug/funnel", "/falai/flows/%C2%8Cn", "/falai/sessions/a/b/c",
    "/falai/sessions/x/nothing-here", "/falai/flows/x/y/z",
])
def test_a_path_under_the_api_that_no_operation_takes_is_a_json_404(api, path):
    body = _json_reason(api.get(path), 404)
    assert "detail" in body


def test_a_flow_id_that_is_no_slug_is_refused_by_name_on_put(api):
    body = _json_reason(api.put("/falai/flows/a.b", {"spec": GREETING}, format="json"), 400)
    assert "slug" in body["flow_id"][0]


@pytest.mark.parametrize("body, field", [
    ({"reason": "human", "owner": 0}, "owner"),  # a number is not text (DRF alone reads it as "0")
    ({"reason": "\r\x0b\x1c"}, "reason"),  # white space only, \x1c included (str.isspace's)
    ({"reason": "human", "owner": "a\x00b"}, "owner"),
    ({"reason": ""}, "reason"),
])
def test_silence_refuses_what_the_schema_refuses(api, body, field):
    assert field in _json_reason(api.post("/falai/sessions/s1/silence", body, format="json"), 400)


def _conversation(api, session_id: str) -> None:
    assert api.post(f"/falai/sessions/{session_id}/messages", {"text": "oi"}, format="json").status_code == 200


def test_text_is_kept_as_sent(api):
    _conversation(api, "s1")
    response = api.post("/falai/sessions/s1/silence", {"reason": " human ", "owner": " ana"}, format="json")
    assert response.status_code == 200, response.content
    # the API passes text on as sent; the host trims a reason (its own rule, for every caller)
    assert response.json()["handoff"]["reason"] == "human" and response.json()["handoff"]["owner"] == " ana"


@pytest.mark.parametrize("body, field", [
    ({"text": "oi", "id": 5}, "id"),
    ({"text": ""}, "text"),
    ({"text": "oi", "context": None}, "context"),
    ({"text": "oi", "at": "0001-01-01T00:00:00+01:00"}, "at"),  # leaves datetime's range in UTC: was a 500
    ({"text": "oi", "anchors": {"lead": {"key": ""}}}, "anchors"),
])
def test_a_message_refuses_what_the_schema_refuses(api, body, field):
    assert field in _json_reason(api.post("/falai/sessions/s1/messages", body, format="json"), 400)


@pytest.mark.parametrize("body, field", [
    ({"event": "x", "key": "k", "payload": None}, "payload"),
    ({"event": "x", "key": 7}, "key"),
    ({"event": "x", "key": "k", "hop": "3"}, "hop"),  # a whole number, not its text
])
def test_an_event_refuses_what_the_schema_refuses(api, demo_settings, body, field):
    body = {**body, "event": sorted(demo_settings.events)[0]}
    assert field in _json_reason(api.post("/falai/sessions/s1/events", body, format="json"), 400)


@pytest.mark.parametrize("query, field", [
    ("status=", "status"), ("q=", "q"), ("page_size=0.349", "page_size"), ("page_size=501", "page_size"),
    ("page_size=0", "page_size"), ("page=0", "page"), ("page=last", "page"), ("silenced=1", "silenced"),
    ("owner=a%00", "owner"),
])
def test_the_list_refuses_what_the_schema_refuses(api, query, field):
    assert field in _json_reason(api.get(f"/falai/sessions?{query}"), 400)


def test_the_list_takes_what_the_schema_allows(api):
    for query in ("silenced=true", "silenced=false", "page_size=500", "page=1", "status=idle"):
        response = api.get(f"/falai/sessions?{query}")
        assert response.status_code == 200, (query, response.content)


def test_the_funnel_days(api, demo_settings):
    flow = demo_settings.flows[0].id
    assert api.get(f"/falai/flows/{flow}/funnel?until=1970-01-05").status_code == 200  # 30 days before: clamped
    for query in ("since=0001-01-01", "until=9999-12-31", "since=2026-1-1", "since=", "since=2026-02-30"):
        assert "since" in query or "until" in query
        _json_reason(api.get(f"/falai/flows/{flow}/funnel?{query}"), 400)
    _json_reason(api.get(f"/falai/flows/{flow}/funnel?since=2026-02-01&until=2026-01-01"), 400)


def test_a_position_outside_the_column_is_refused_on_every_database(api):
    body = {"spec": GREETING, "position": 2**31}
    assert "position" in _json_reason(api.put("/falai/flows/greeting", body, format="json"), 400)


def test_the_flows_are_listed_without_their_specs(api, django_user_model):
    assert api.put("/falai/flows/greeting", {"spec": GREETING, "position": 2}, format="json").status_code == 200
    assert api.put("/falai/flows/first", {"spec": {**GREETING, "name": "First"}}, format="json").status_code == 200
    listed = api.get("/falai/flows").json()
    assert listed["count"] == 2 and [f["id"] for f in listed["results"]] == ["first", "greeting"]
    assert all("spec" not in f for f in listed["results"]) and listed["results"][1]["version"] == 1
    nobody = django_user_model.objects.create_user("nobody", "n@example.com", "pw")
    client = APIClient()
    client.force_authenticate(nobody)
    _json_reason(client.get("/falai/flows"), 403)


def test_half_a_webhook_signature_is_a_401_naming_the_missing_header(demo_settings):
    client = APIClient()
    body = _json_reason(client.get("/falai/sessions", HTTP_X_FALAI_TIMESTAMP="1700000000"), 401)
    assert "X-Falai-Signature" in body["detail"]
    _json_reason(client.get("/falai/sessions"), 401)  # no credentials at all: still a 401


def test_the_text_patterns_of_the_schema_are_the_servers_checks(api):
    from falai_django.api.shapes import NOT_BLANK

    silence = _schema(api)["components"]["schemas"]["Silence"]["properties"]
    assert silence["reason"]["pattern"] == NOT_BLANK and silence["reason"]["minLength"] == 1
    _conversation(api, "s2")
    samples = ["human", " human ", " ", "\t\n", "\u3000", "\x1c\x1d", "a\x00", "\u00a0x", "\x85"]
    for sample in samples:
        schema_says = re.search(NOT_BLANK, sample) is not None
        server_says = api.post("/falai/sessions/s2/silence", {"reason": sample}, format="json").status_code == 200
        assert schema_says is server_says, repr(sample)


def test_the_agents_flows_and_events_are_enums(api, demo_settings):
    schema = _schema(api)
    components = schema["components"]["schemas"]
    flows = sorted(flow.id for flow in demo_settings.flows)

    def enum(prop: dict) -> list:  # drf-spectacular moves an enum into a component
        return prop["enum"] if "enum" in prop else components[prop["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]

    assert enum(components["StartInput"]["properties"]["flow"]) == flows
    assert enum(components["EventInput"]["properties"]["event"]) == sorted(demo_settings.events)
    listing = {p["name"]: p for p in schema["paths"]["/falai/sessions"]["get"]["parameters"]}
    assert listing["flow"]["schema"]["enum"] == flows
    assert listing["page_size"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 500}
    assert components["MessageInput"]["properties"]["context"] == {
        "allOf": [{"$ref": "#/components/schemas/JsonValue"}], "description": "Per-turn data the flows read."}
    assert {"type": "null"} not in components["JsonValue"]["anyOf"]  # null is refused at the top
    assert {"type": "null"} in components["JsonItem"]["anyOf"]  # and taken inside


def test_every_link_leads_to_an_operation_and_a_parameter_that_exist(api):
    schema = _schema(api)
    operations = {op["operationId"]: op for item in schema["paths"].values() for op in item.values()}
    links = [(source["operationId"], code, name, link) for source in operations.values()
             for code, answer in source["responses"].items() for name, link in answer.get("links", {}).items()]
    sources = {source for source, *_ in links}
    assert {"sessions_list", "sessions_messages_create", "sessions_retrieve", "flows_list", "flows_update"} <= sources
    targets = {link["operationId"] for *_, link in links}
    assert {"sessions_retrieve", "sessions_silence_create", "sessions_unsilence_create", "sessions_destroy",
            "sessions_wakes_create", "flows_retrieve", "flows_funnel_retrieve"} <= targets
    for source, code, name, link in links:
        target = operations[link["operationId"]]
        taken = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
        assert set(link["parameters"]) <= taken, (source, code, name)


def test_a_link_from_a_message_reaches_its_conversation_and_its_first_wake(api):
    """What a stateful client does with the links: the message's path id reads the conversation,
    the answer's first scheduled wake fires."""
    answer = api.post("/falai/sessions/5511/messages", {"text": "oi"}, format="json").json()
    state = api.get("/falai/sessions/5511")
    assert state.status_code == 200
    key = answer["schedule"][0]["key"]  # the demo's follow-up after silence
    assert state.json()["pending_wakes"][0]["key"] == key  # what GET sessions/{id}'s link reads
    fired = api.post("/falai/sessions/5511/wakes", {"key": key}, format="json")
    assert fired.status_code == 200, fired.content


def test_both_spellings_of_an_anchors_last_message_are_checked(api):
    anchor = {"key": "lead-1", "lastInboundAt": "2026-01-01T12:00:00Z", "last_inbound_at": "2024-01-01T12:99:00Z"}
    body = {"text": "oi", "anchors": {"lead": anchor}}
    assert "anchors" in _json_reason(api.post("/falai/sessions/s3/messages", body, format="json"), 400)
