"""Auth and validation at the HTTP edge: nobody anonymous, nothing badly signed, bad input is a 400."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from .helpers import post, signed_post, staff_client, url

pytestmark = pytest.mark.django_db(transaction=True)

ENDPOINTS = [
    ("post", "messages", {"text": "oi", "id": "m1"}),
    ("post", "messages/stream", {"text": "oi", "id": "m1"}),
    ("post", "wakes", {"key": "triagem#m1:espera:1"}),
    ("post", "events", {"event": "x", "key": "e1"}),
    ("post", "starts", {"flow": "triagem", "key": "k1"}),
    ("post", "silence", {"reason": "human"}),
    ("post", "unsilence", {}),
    ("get", "", None),
]


@pytest.mark.parametrize(("method", "what", "body"), ENDPOINTS)
def test_every_endpoint_refuses_anonymous(method, what, body):
    client = Client()
    response = client.get(url("s1", what)) if method == "get" else post(client, url("s1", what), body)
    assert response.status_code in (401, 403)


def test_the_schema_refuses_anonymous():
    assert Client().get("/falai/schema").status_code in (401, 403)


@pytest.mark.parametrize(("method", "what", "body"), [e for e in ENDPOINTS if e[0] == "post"])
def test_every_endpoint_refuses_a_bad_signature(method, what, body):
    response = signed_post(url("s1", what), body, secret="wrong")
    assert response.status_code == 401


def test_a_signature_outside_the_replay_window_is_refused():
    response = signed_post(url("s1", "silence"), {"reason": "human"}, timestamp=int(time.time()) - 3600)
    assert response.status_code == 401
    assert "replay window" in response.json()["detail"]


def test_a_tampered_body_is_refused():
    from falai_django.api.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

    ts = str(int(time.time()))
    signature = sign("s3cret", ts, b'{"reason": "human"}', path=url("s1", "silence"))
    response = Client().post(url("s1", "silence"), data=b'{"reason": "robot"}', content_type="application/json",
                             headers={TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: signature})
    assert response.status_code == 401


def test_a_user_without_the_permission_is_refused():
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    user = User.objects.create(username="nobody")
    token = Token.objects.create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert post(client, url("s1", "silence"), {"reason": "x"}).status_code == 403


def _conversation(session_id: str = "s1") -> None:
    from falai_django.engine.session import Session
    from falai_django.stores.django import DjangoStore

    DjangoStore().save(Session.fresh(session_id), 0)


def test_a_correctly_signed_webhook_is_accepted():
    _conversation()
    response = signed_post(url("s1", "silence"), {"reason": "human", "owner": "maria"})
    assert response.status_code == 200, response.content
    assert response.json()["handoff"]["owner"] == "maria"


@pytest.mark.parametrize(
    ("what", "body", "field"),
    [
        ("messages", {}, "text"),
        ("messages", {"text": "oi", "at": "yesterday"}, "at"),
        ("messages", {"text": "oi", "silenced": 3}, "silenced"),
        ("messages", {"text": "oi", "silenced": {"reason": ""}}, "silenced"),
        ("messages", {"text": "oi", "silenced": {"reason": "x", "skip": "yes"}}, "silenced"),
        ("messages", {"text": "oi", "id": "x" * 300}, "id"),
        ("messages/stream", {"id": "m1"}, "text"),
        ("wakes", {}, "key"),
        ("events", {"event": "x"}, "key"),
        ("events", {"event": "x", "key": "k", "hop": -1}, "hop"),
        ("starts", {"key": "k"}, "flow"),
        ("silence", {"owner": "maria"}, "reason"),
        ("silence", {"reason": "human", "mode": "loud"}, "mode"),
        ("events", {"event": "x", "key": "k", "payload": {"a": "x\u0000"}}, "payload"),
        ("events", {"event": "x", "key": "k", "payload": {"a": "\ud800"}}, "payload"),
        ("messages", {"text": "oi", "context": {"k\u0000": 1}}, "context"),
        ("starts", {"flow": "triagem", "key": "k", "input": ["\u0000"]}, "input"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(what, body, field):
    response = post(staff_client(), url("s1", what), body)
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_a_session_id_with_a_nul_is_a_400():
    response = post(staff_client(), "/falai/sessions/a%00b/messages", {"text": "oi"})
    assert response.status_code == 400 and "session_id" in response.json()


def test_a_body_that_is_not_json_is_a_400():
    response = staff_client().post(url("s1", "messages"), data=b"{oops", content_type="application/json")
    assert response.status_code == 400


def test_a_body_that_is_a_list_is_a_400():
    response = staff_client().post(url("s1", "messages"), data=json.dumps([1, 2]), content_type="application/json")
    assert response.status_code == 400


def test_an_unknown_session_state_is_a_404():
    assert staff_client().get(url("nobody")).status_code == 404


def test_a_wake_key_of_another_conversation_is_refused():
    from falai_django.engine.session import Session
    from falai_django.models import Wake
    from falai_django.stores.django import DjangoStore

    DjangoStore().save(Session.fresh("owner"), 0)
    DjangoStore().save(Session.fresh("intruder"), 0)
    Wake.objects.create(conversation_id="owner", key="triagem#m1:espera:1790000000000",
                        at="2026-09-20T11:00:00Z")
    client = staff_client()
    response = post(client, url("intruder", "wakes"), {"key": "triagem#m1:espera:1790000000000"})
    assert response.status_code == 403
    response = post(client, url("intruder", "wakes"), {"key": "silence:retomar:owner:1790000000000"})
    assert response.status_code == 403
    response = post(client, url("intruder", "wakes"), {"key": "never-scheduled"})
    assert response.status_code == 404


def test_the_openapi_schema_lists_the_endpoints():
    response = staff_client().get("/falai/schema")
    assert response.status_code == 200, response.content[:500]
    schema = json.loads(response.content)
    paths = schema["paths"]
    assert "/falai/sessions/{session_id}/messages" in paths
    assert "/falai/sessions/{session_id}/wakes" in paths
    body = paths["/falai/sessions/{session_id}/messages"]["post"]["requestBody"]
    assert body


def test_the_openapi_schema_declares_the_answers_the_endpoints_really_give():
    """DRF's generator says 201 for every POST; no endpoint answers 201."""
    paths = json.loads(staff_client().get("/falai/schema").content)["paths"]
    base = "/falai/sessions/{session_id}"

    def codes(path, method="post"):
        return set(paths[base + path][method]["responses"])

    errors = {"400", "401", "403", "409"}
    for path in ("/messages", "/events", "/starts"):
        assert codes(path) == {"200", "202"} | errors, path
    assert codes("/wakes") == {"200", "202", "404"} | errors
    assert codes("/messages/stream") == {"200"} | errors
    assert set(paths[base + "/messages/stream"]["post"]["responses"]["200"]["content"]) == {"text/event-stream"}
    for path in ("/silence", "/unsilence"):
        assert codes(path) == {"200", "404"} | errors, path
        ok = paths[base + path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == {"$ref": "#/components/schemas/HandoffResponse"}
    assert codes("", "get") == {"200", "404"} | errors
    turn = paths[base + "/messages"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert turn == {"$ref": "#/components/schemas/TurnResponse"}


def test_a_signed_delivery_cannot_be_replayed_onto_another_conversation_or_endpoint():
    import json as _json

    from falai_django.api.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

    _conversation()
    body = _json.dumps({"reason": "human"}).encode()
    ts = str(int(time.time()))
    headers = {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: sign("s3cret", ts, body, path=url("s1", "silence"))}
    for target in (url("s2", "silence"), url("s1", "unsilence"), url("s1", "silence") + "?x=1"):
        response = Client().post(target, data=body, content_type="application/json", headers=headers)
        assert response.status_code == 401, target
    response = Client().post(url("s1", "silence"), data=body, content_type="application/json", headers=headers)
    assert response.status_code == 200
