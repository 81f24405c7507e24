"""The playground never calls the project's SENDER; it shows the handoff; a human's reply is the human's."""

from __future__ import annotations

import json

import pytest
from demo import support
from django.urls import reverse

from falai_django import handoff
from falai_django.models import History

pytestmark = pytest.mark.django_db(transaction=True)


def _playground_session(client) -> str:
    client.get(reverse("falai:playground"))
    return client.session["falai_playground_session"]


def _say(client, sid: str, text: str, mid: str) -> dict:
    response = client.post(reverse("falai:message-stream", args=[sid]), {"text": text, "id": mid},
                           content_type="application/json")
    frames = b"".join(response.streaming_content).decode().strip().split("\n\n")
    done = [f for f in frames if f.startswith("event: done")]
    return json.loads(done[0].split("data: ", 1)[1])


def test_playground_replies_never_reach_the_projects_sender(admin_client, demo_settings):
    sid = _playground_session(admin_client)
    assert sid.startswith("playground-")
    for i, text in enumerate(["oi", "João"]):
        assert _say(admin_client, sid, text, f"m{i}")["messages"]
    assert support.sent == []  # the real channel got nothing
    rows = list(History.objects.filter(conversation_id=sid, role="assistant"))
    assert len(rows) == 2
    assert all(r.send_status == "sent" for r in rows)  # still marked sent: the outbox drains
    assert all(r.channel_message_id == f"sandbox:{r.pk}" for r in rows)
    state = admin_client.get(reverse("falai:playground-state")).json()
    replies = [h for h in state["history"] if h["role"] == "assistant"]
    assert [h.get("sandbox") for h in replies] == [True, True]


def test_a_conversation_outside_the_playground_still_goes_to_the_sender(admin_client, demo_settings):
    response = admin_client.post("/falai/sessions/5511999990000/messages", {"text": "oi", "id": "w1"},
                                 content_type="application/json")
    assert response.status_code == 200
    assert [m.session_id for m in support.sent] == ["5511999990000"]
    row = History.objects.get(conversation_id="5511999990000", role="assistant")
    assert row.channel_message_id is None and row.send_status == "sent"  # record_send returns None


def test_a_human_reply_in_the_playground_is_sandboxed_and_labelled_human(admin_client, demo_settings):
    sid = _playground_session(admin_client)
    _say(admin_client, sid, "oi", "m0")
    handoff.take_over(sid, "maria")
    handoff.reply_as_human(sid, "Oi, aqui é a Maria.", author="maria")
    assert support.sent == []
    state = admin_client.get(reverse("falai:playground-state")).json()
    human = state["history"][-1]
    assert human["kind"] == "human" and human["author"] == "maria" and human["sandbox"] is True
    assert human["content"] == "Oi, aqui é a Maria."


def test_the_state_says_who_holds_the_conversation_and_how(admin_client, demo_settings):
    sid = _playground_session(admin_client)
    _say(admin_client, sid, "oi", "m0")
    assert admin_client.get(reverse("falai:playground-state")).json()["handoff"] is None
    handoff.take_over(sid, "maria", understand=True)
    state = admin_client.get(reverse("falai:playground-state")).json()
    view = state["handoff"]
    assert view["owner"] == "maria" and view["mode"] == "understand"
    assert view["summary"].startswith("Taken over by maria · mode understand")
    assert "T" not in view["at_display"] and "None" not in view["summary"]  # people never see raw ISO
    assert _say(admin_client, sid, "João", "m1")["messages"] == []  # silent: the banner explains why
    handoff.give_back(sid)
    handoff.silence(sid, "fora do horário", mode="skip")
    view = admin_client.get(reverse("falai:playground-state")).json()["handoff"]
    assert view["owner"] is None and view["summary"].startswith("Silenced (fora do horário) · mode skip")


def test_the_page_has_the_handoff_banner_and_no_raw_values(admin_client, demo_settings):
    sid = _playground_session(admin_client)
    _say(admin_client, sid, "oi", "m0")
    handoff.take_over(sid, "maria")
    html = admin_client.get(reverse("falai:playground")).content.decode()
    assert 'id="handoff"' in html and "Taken over by maria" in html  # in the initial state
    state = admin_client.get(reverse("falai:playground-state")).json()
    for wake in state["wakes"]:
        assert wake["at_display"] and "T" not in wake["at_display"]
