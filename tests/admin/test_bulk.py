"""Bulk actions on the list: silence (with a reason, asked on a second page) and give back."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import LogEntry

from falai_django import handoff
from falai_django.models import Conversation

from .conftest import CHANGELIST, admin_client, say

pytestmark = pytest.mark.django_db


@pytest.fixture
def three(run_on_commit) -> list[str]:
    for session_id in ("a", "b", "c"):
        run_on_commit(say, session_id, "oi", f"{session_id}-1")
    return ["a", "b", "c"]


def reasons() -> dict[str, str | None]:
    return dict(Conversation.objects.values_list("pk", "silenced_reason"))


def test_silence_selected_asks_for_a_reason_then_silences(operator, three):
    client = admin_client(operator)
    picked = {"action": "silence_selected", ACTION_CHECKBOX_NAME: ["a", "b"], "index": 0}

    ask = client.post(CHANGELIST, picked)

    assert ask.status_code == 200
    assert 'id="silence-selected-form"' in ask.content.decode()
    assert reasons() == {"a": None, "b": None, "c": None}

    done = client.post(CHANGELIST, {**picked, "reason": "sem créditos", "mode": "stop", "confirm": "yes"})

    assert done.status_code == 302
    assert reasons() == {"a": "sem créditos", "b": "sem créditos", "c": None}
    logged = LogEntry.objects.filter(change_message__startswith="Silenced: sem créditos")
    assert sorted(logged.values_list("object_id", flat=True)) == ["a", "b"]


def test_silence_selected_without_a_reason_asks_again(operator, three):
    response = admin_client(operator).post(CHANGELIST, {
        "action": "silence_selected", ACTION_CHECKBOX_NAME: ["a"], "index": 0, "reason": " ", "confirm": "yes"})

    assert "A silence needs a reason." in response.content.decode()
    assert reasons()["a"] is None


def test_give_back_selected(operator, three):
    handoff.take_over("a", "alice")
    handoff.silence("b", "pausa")

    response = admin_client(operator).post(CHANGELIST, {
        "action": "give_back_selected", ACTION_CHECKBOX_NAME: ["a", "b", "c"], "index": 0})

    assert response.status_code == 302
    assert reasons() == {"a": None, "b": None, "c": None}
    assert Conversation.objects.get(pk="a").human_owner is None
    logged = LogEntry.objects.filter(change_message="Gave the conversation back to the assistant.")
    assert sorted(logged.values_list("object_id", flat=True)) == ["a", "b"]  # c was not silenced


def test_bulk_actions_need_the_handoff_permission(viewer, three):
    handoff.take_over("a", "alice")
    client = admin_client(viewer)

    page = client.get(CHANGELIST).content.decode()
    assert "silence_selected" not in page and "give_back_selected" not in page
    client.post(CHANGELIST, {"action": "give_back_selected", ACTION_CHECKBOX_NAME: ["a"], "index": 0})
    client.post(CHANGELIST, {"action": "silence_selected", ACTION_CHECKBOX_NAME: ["b"], "index": 0,
                             "reason": "x", "confirm": "yes"})

    assert reasons() == {"a": "human: alice", "b": None, "c": None}
    assert not LogEntry.objects.exists()
