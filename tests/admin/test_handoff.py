"""Handoff from the conversation page: permissions, the admin log, and what later turns do."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry

from falai_django.models import Conversation, HistoryItem, Wake

from . import agents, senders
from .conftest import admin_client, make_user, operation_url, page_url, say

pytestmark = pytest.mark.django_db


def asking(session_id: str, run_on_commit) -> Conversation:
    """A conversation whose triage run is asking for the name and company."""
    run_on_commit(say, session_id, "oi", f"{session_id}-1")
    conversation = Conversation.objects.get(pk=session_id)
    assert conversation.asking_step == "quem"
    assert senders.texts(session_id) == [agents.QUESTION]
    return conversation


def handoff_of(session_id: str) -> dict | None:
    return Conversation.objects.get(pk=session_id).blob.get("metadata", {}).get("handoff")


def log_messages(session_id: str) -> list[str]:
    return list(
        LogEntry.objects.filter(object_id=session_id, action_flag=CHANGE)
        .order_by("id")
        .values_list("change_message", flat=True)
    )


# -- permissions ---------------------------------------------------------------------------------


def test_custom_permissions_exist_after_migrate():
    from django.contrib.auth.models import Permission

    codenames = set(Permission.objects.filter(content_type__app_label="falai_django",
                                              content_type__model="conversation").values_list("codename", flat=True))
    assert {"handoff_conversation", "reply_conversation"} <= codenames


def test_staff_without_the_handoff_permission_cannot_take_over(viewer, run_on_commit):
    asking("s1", run_on_commit)
    before = Conversation.objects.get(pk="s1")

    response = admin_client(viewer).post(operation_url("s1", "take-over"))

    assert response.status_code == 403
    after = Conversation.objects.get(pk="s1")
    assert (after.version, after.blob, after.human_owner) == (before.version, before.blob, None)
    assert log_messages("s1") == []


def test_staff_without_the_handoff_permission_see_no_handoff_forms(viewer, run_on_commit):
    asking("s1", run_on_commit)

    html = admin_client(viewer).get(page_url("s1")).content.decode()

    assert 'id="take-over-form"' not in html
    assert 'id="reply-form"' not in html
    assert "You do not have the permission to hand this conversation over." in html


def test_handoff_without_reply_permission_cannot_reply(db, run_on_commit):
    asking("s1", run_on_commit)
    user = make_user("carol", "view_conversation", "handoff_conversation")

    response = admin_client(user).post(operation_url("s1", "reply"), {"text": "Oi, aqui é a Carol."})

    assert response.status_code == 403
    assert not HistoryItem.objects.filter(conversation_id="s1", kind="human").exists()
    assert senders.texts("s1") == [agents.QUESTION]


def test_operations_refuse_get(operator, run_on_commit):
    asking("s1", run_on_commit)

    response = admin_client(operator).get(operation_url("s1", "take-over"))

    assert response.status_code == 405
    assert handoff_of("s1") is None


def test_a_user_without_any_permission_cannot_open_the_page(db, run_on_commit):
    asking("s1", run_on_commit)
    nobody = make_user("dave")

    assert admin_client(nobody).get(page_url("s1")).status_code == 403


# -- take over ---------------------------------------------------------------------------------


def test_take_over_sets_the_owner_and_logs_it(operator, run_on_commit):
    asking("s1", run_on_commit)

    response = admin_client(operator).post(operation_url("s1", "take-over"))

    assert response.status_code == 302
    assert response.headers["Location"].endswith(page_url("s1") + "#handoff")
    conversation = Conversation.objects.get(pk="s1")
    assert conversation.human_owner == "alice"
    assert conversation.silenced_reason == "human: alice"
    assert handoff_of("s1")["mode"] == "stop"
    assert log_messages("s1") == ["Took over as alice."]
    page = admin_client(operator).get(page_url("s1")).content.decode()
    assert "Owned by alice: the assistant is silent." in page


def test_silenced_turn_after_take_over_spends_nothing_and_says_nothing(operator, run_on_commit):
    asking("s1", run_on_commit)
    admin_client(operator).post(operation_url("s1", "take-over"))
    calls_before = len(agents.provider().calls)

    result = run_on_commit(say, "s1", "meu nome é Maria da empresa Acme", "s1-2")

    assert result.changed
    assert result.result.llm_calls == 0
    assert len(agents.provider().calls) == calls_before
    assert result.result.messages == []
    assert senders.texts("s1") == [agents.QUESTION]
    # The run that was asking stays asking (it speaks when the conversation is given back).
    conversation = Conversation.objects.get(pk="s1")
    assert conversation.asking_step == "quem"
    assert conversation.blob["data"] == {}
    # The customer's message is still in the transcript.
    assert list(HistoryItem.objects.filter(conversation_id="s1", role="user").values_list("content", flat=True)) == [
        "oi", "meu nome é Maria da empresa Acme"]


def test_take_over_with_understand_lands_fields_and_says_nothing(operator, run_on_commit):
    asking("s1", run_on_commit)
    admin_client(operator).post(operation_url("s1", "take-over"), {"understand": "on"})
    assert handoff_of("s1")["mode"] == "understand"
    calls_before = len(agents.provider().calls)

    result = run_on_commit(say, "s1", "meu nome é Maria da empresa Acme", "s1-2")

    assert [c.schema_name for c in agents.provider().calls[calls_before:]] == ["understand"]
    assert result.result.messages == []
    assert senders.texts("s1") == [agents.QUESTION]
    assert Conversation.objects.get(pk="s1").blob["data"] == {"nome": "Maria", "empresa": "Acme"}
    assert log_messages("s1") == ["Took over as alice (fields keep landing)."]


def test_understand_setting_is_the_take_over_default(operator, run_on_commit, settings):
    settings.FALAI = {**settings.FALAI, "HANDOFF_UNDERSTAND": True}
    asking("s1", run_on_commit)

    page = admin_client(operator).get(page_url("s1")).content.decode()
    assert 'name="understand" checked' in page

    from falai_django import handoff

    handoff.take_over("s1", "alice")
    assert handoff_of("s1")["mode"] == "understand"


# -- give back ---------------------------------------------------------------------------------


def test_give_back_makes_the_next_message_answered(operator, run_on_commit):
    asking("s1", run_on_commit)
    client = admin_client(operator)
    client.post(operation_url("s1", "take-over"))
    run_on_commit(say, "s1", "alguém aí?", "s1-2")
    assert senders.texts("s1") == [agents.QUESTION]

    response = client.post(operation_url("s1", "give-back"))

    assert response.status_code == 302
    conversation = Conversation.objects.get(pk="s1")
    assert (conversation.human_owner, conversation.silenced_reason) == (None, None)
    result = run_on_commit(say, "s1", "oi de novo", "s1-3")
    assert result.result.llm_calls >= 1
    assert senders.texts("s1") == [agents.QUESTION, agents.QUESTION]
    assert log_messages("s1") == ["Took over as alice.", "Gave the conversation back to the assistant."]
    assert "The assistant is answering." in client.get(page_url("s1")).content.decode()


# -- silence -----------------------------------------------------------------------------------


def test_silence_with_a_reason(operator, run_on_commit):
    asking("s1", run_on_commit)

    admin_client(operator).post(operation_url("s1", "silence"), {"reason": "janela de 24h fechada", "mode": "skip"})

    conversation = Conversation.objects.get(pk="s1")
    assert conversation.silenced_reason == "janela de 24h fechada"
    assert conversation.human_owner is None
    assert handoff_of("s1")["mode"] == "skip"
    assert log_messages("s1") == [
        "Silenced: janela de 24h fechada (skip: talk and say steps are skipped, do steps still run)."]


def test_silence_without_a_reason_changes_nothing(operator, run_on_commit):
    asking("s1", run_on_commit)

    client = admin_client(operator)
    response = client.post(operation_url("s1", "silence"), {"reason": "  "}, follow=True)

    assert handoff_of("s1") is None
    assert log_messages("s1") == []
    assert "Nothing was changed: a silence needs a reason." in response.content.decode()


# -- reply as human ----------------------------------------------------------------------------


def test_reply_as_human_is_sent_stored_and_re_arms_silence(operator, run_on_commit):
    asking("s1", run_on_commit)
    client = admin_client(operator)
    client.post(operation_url("s1", "take-over"))
    agents.clock().advance("30m")
    before = Conversation.objects.get(pk="s1").blob["lastAssistantAt"]

    response = run_on_commit(client.post, operation_url("s1", "reply"), {"text": "Oi, aqui é a Alice, da equipe."})

    assert response.status_code == 302
    # Out through the sender, once, with the human's kind.
    assert senders.texts("s1") == [agents.QUESTION, "Oi, aqui é a Alice, da equipe."]
    assert senders.sent[-1].kind == "human"
    # In History as the human's.
    item = HistoryItem.objects.get(conversation_id="s1", kind="human")
    assert (item.role, item.content, item.message_key, item.send_status) == (
        "assistant", "Oi, aqui é a Alice, da equipe.", "human:alice", "sent")
    # Fed to the engine as the outbound event: lastAssistantAt moves and the silence wake re-arms.
    blob = Conversation.objects.get(pk="s1").blob
    assert blob["lastAssistantAt"] == "2026-09-20T10:30:00.000Z" != before
    silence_keys = set(Wake.objects.filter(conversation_id="s1", key__startswith="silence:").values_list("key",
                                                                                                     flat=True))
    assert silence_keys == {"silence:retoma:s1:1789900200000"}  # 10:30, the old 10:00 one replaced
    assert log_messages("s1")[-1] == "Replied as alice: Oi, aqui é a Alice, da equipe."
    page = client.get(page_url("s1")).content.decode()
    assert 'data-who="human"' in page and "Human agent" in page


def test_reply_without_an_outbound_event_still_sends_and_warns(operator, run_on_commit, monkeypatch):
    asking("s1", run_on_commit)
    monkeypatch.setattr(agents.current_agent(), "events", {})

    response = run_on_commit(admin_client(operator).post, operation_url("s1", "reply"), {"text": "Oi!"}, follow=True)

    assert senders.texts("s1")[-1] == "Oi!"
    assert "The agent registers no outbound event" in response.content.decode()


def test_empty_reply_is_refused(operator, run_on_commit):
    asking("s1", run_on_commit)

    admin_client(operator).post(operation_url("s1", "reply"), {"text": "   "})

    assert not HistoryItem.objects.filter(kind="human").exists()
    assert log_messages("s1") == []


# -- wakes ---------------------------------------------------------------------------------------


def waiting(session_id: str, run_on_commit) -> str:
    """A conversation whose run waits an hour; returns that wake's key."""
    asking(session_id, run_on_commit)
    run_on_commit(say, session_id, "meu nome é Maria da empresa Acme", f"{session_id}-2")
    conversation = Conversation.objects.get(pk=session_id)
    assert conversation.blob["runs"][0]["status"] == "waiting"
    return conversation.blob["runs"][0]["waiting"]["key"]


def test_fire_wake_now_runs_the_wake_before_its_time(operator, run_on_commit):
    key = waiting("s1", run_on_commit)

    run_on_commit(admin_client(operator).post, operation_url("s1", "fire-wake"), {"key": key})

    assert senders.texts("s1")[-1] == "Obrigado, Maria! Até logo."
    assert Wake.objects.get(conversation_id="s1", key=key).state == Wake.State.DONE
    assert Conversation.objects.get(pk="s1").run_count == 0
    assert log_messages("s1") == [f"Fired wake {key} now."]


def test_fire_a_stale_wake_changes_nothing(operator, run_on_commit):
    waiting("s1", run_on_commit)
    version = Conversation.objects.get(pk="s1").version

    response = admin_client(operator).post(operation_url("s1", "fire-wake"), {"key": "triagem#nope:espera:1"},
                                           follow=True)

    assert Conversation.objects.get(pk="s1").version == version
    assert "it changed nothing (stale-wake)" in response.content.decode()


def test_requeue_wakes_rebuilds_lost_wakes(operator, run_on_commit):
    key = waiting("s1", run_on_commit)
    Wake.objects.filter(conversation_id="s1").delete()  # the queue lost its jobs

    admin_client(operator).post(operation_url("s1", "requeue-wakes"))

    assert set(Wake.objects.filter(conversation_id="s1").values_list("key", "state")) == {
        (key, "pending"), ("silence:retoma:s1:1789898400000", "pending")}
    assert log_messages("s1") == ["Re-enqueued 2 wakes."]


def test_wake_operations_need_the_handoff_permission(viewer, run_on_commit):
    key = waiting("s1", run_on_commit)
    Wake.objects.filter(conversation_id="s1").delete()
    client = admin_client(viewer)

    assert client.post(operation_url("s1", "fire-wake"), {"key": key}).status_code == 403
    assert client.post(operation_url("s1", "requeue-wakes")).status_code == 403
    assert not Wake.objects.filter(conversation_id="s1").exists()
    assert Conversation.objects.get(pk="s1").run_count == 1
