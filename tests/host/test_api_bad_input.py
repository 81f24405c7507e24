"""Bad per-turn options never reach the engine: a 400 naming the field, and no inbox row."""

from __future__ import annotations

import pytest

from falai_django import host
from falai_django.models import TurnRecord

from .helpers import post, staff_client, url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("claims", {"held": 5}, "claims.held must be an object"),
        ("claims", {"held": {"triagem:s1": 5}}, "claims.held.triagem:s1 must be an ISO time"),
        ("claims", {"held": {"triagem:s1": "yesterday"}}, "must be an ISO 8601 time"),
        ("claims", {"held": {"triagem:s1": {"at": "2026-09-20T10:00:00Z", "x": 1}}}, "claims.held.triagem:s1"),
        ("claims", {"active": "triagem:s1"}, "claims.active must be a list"),
        ("claims", {"active": [1]}, "claims.active must be a list"),
        ("claims", {"mine": {}}, "unknown keys mine"),
        ("claims", [1, 2], "claims must be an object"),
        ("anchors", {"lead": "lead:456"}, "anchors.lead must be an object"),
        ("anchors", {"lead": {"lastInboundAt": "2026-09-20T10:00:00Z"}}, "anchors.lead.key must be non-empty"),
        ("anchors", {"lead": {"key": "lead:1", "lastInboundAt": "soon"}}, "anchors.lead.lastInboundAt"),
        ("anchors", {"lead": {"key": "lead:1", "color": "red"}}, "unknown keys color"),
        ("anchors", 7, "anchors must be an object"),
        ("silenced", {"skip": True}, "reason"),
        ("silenced", {"reason": "human", "skip": "yes"}, "true or false"),
        ("silenced", 12, ""),
        ("at", "not a time", "ISO 8601"),
    ],
)
def test_a_malformed_option_is_a_400_naming_it_and_writes_nothing(field, value, words):
    response = post(staff_client(), url("s1", "messages"), {"text": "oi", "id": "wamid.1", field: value})
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body, body
    assert words in " ".join(body[field]), body
    assert TurnRecord.objects.count() == 0


def test_the_spec_claims_and_anchors_shapes_reach_the_engine():
    """`held` as ISO text (the spec) or `{at}` (the stored shape) and `active` as a list are accepted."""
    from . import agents

    seen = {}
    agent = agents.current_agent()
    original = type(agent).turn

    def spy(self, **kwargs):
        seen.update(claims=kwargs.get("claims"), anchors=kwargs.get("anchors"))
        return original(self, **kwargs)

    type(agent).turn = spy
    try:
        response = post(staff_client(), url("s1", "messages"), {
            "text": "oi", "id": "wamid.1",
            "claims": {"held": {"a:s1": "2026-09-20T10:00:00Z", "b:s1": {"at": "2026-09-20T11:00:00Z"}},
                       "active": ["c:s1"]},
            "anchors": {"lead": {"key": "lead:456", "lastInboundAt": "2026-09-20T09:00:00Z"}},
        })
    finally:
        type(agent).turn = original
    assert response.status_code == 200, response.content
    assert seen["claims"] == {"held": {"a:s1": "2026-09-20T10:00:00Z", "b:s1": "2026-09-20T11:00:00Z"},
                              "active": ["c:s1"]}
    assert seen["anchors"] == {"lead": {"key": "lead:456", "lastInboundAt": "2026-09-20T09:00:00Z"}}


def test_a_python_caller_gets_an_input_error_naming_the_field_before_any_write():
    with pytest.raises(host.InputError) as caught:
        host.handle_message("s1", "oi", id="wamid.1", claims={"held": 5})
    assert caught.value.field == "claims"
    with pytest.raises(host.InputError) as caught:
        host.handle("s1", {"message": "oi", "wake": "k"})
    assert "exactly one of" in str(caught.value)
    assert TurnRecord.objects.count() == 0
