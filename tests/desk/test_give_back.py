"""Give back never loses a lead: the runs a handoff silenced are resumed when it ends.

Ana's triage (the demo agent, offline): `quem` collects nome and empresa, `porte` the size.
Taken over with understand, the customer's answers land while Ana is silent, so the triage run
walks past `quem` and ends at `porte` (`skipped/silenced`); its trigger is claimed, so without
the resume the next message would get the catch-all reply and the size would never be asked.
"""

from __future__ import annotations

import pytest

from falai_django import host
from falai_django.models import Conversation, DeskEntry, History, TurnRecord

from .conftest import admin_operation_url, client_for, make_user, sent_texts

pytestmark = pytest.mark.django_db

SID = "5511999990001"
ASK_SIZE = "Pergunte quantas pessoas trabalham lá e ofereça as faixas."
ASK_CONFIRM = "Resuma em uma frase o que anotou e pergunte se está tudo certo."


def api_client(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client


def say(client, text: str, n: int):
    response = client.post(f"/falai/sessions/{SID}/messages", {"text": text, "id": f"wamid.{n}"}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def reply_texts(body: dict) -> list[str]:
    return [m["text"] for m in body["messages"]]


def data() -> dict:
    return Conversation.objects.get(pk=SID).blob["data"]


def triage_ended_silenced() -> bool:
    return any(run["flowId"] == "triagem" and run["reason"] == "skipped"
               and run["outcomes"][-1]["code"] == "silenced"
               for record in TurnRecord.objects.filter(conversation_id=SID) for run in record.ended)


def test_understand_handoff_through_the_api_resumes_the_triage_at_the_size(run_on_commit):
    staff = make_user("root", superuser=True)
    api = api_client(staff)
    first = run_on_commit(say, api, "oi", 1)
    assert reply_texts(first)[0].endswith("Pergunte o nome da pessoa, sem tom de formulário.")

    response = api.post(f"/falai/sessions/{SID}/silence", {"reason": "human: maria", "owner": "maria",
                                                           "mode": "understand"}, format="json")
    assert response.status_code == 200
    assert reply_texts(run_on_commit(say, api, "João", 2)) == []
    assert reply_texts(run_on_commit(say, api, "Acme", 3)) == []
    assert data() == {"nome": "João", "empresa": "Acme"}
    assert triage_ended_silenced()  # the engine did what the spec says: the run is gone

    response = run_on_commit(api.post, f"/falai/sessions/{SID}/unsilence", format="json")

    assert response.status_code == 200
    assert response.json()["handoff"] is None
    assert response.json()["version"] == Conversation.objects.get(pk=SID).version
    # Resumed at once: nome and empresa are known, so the size is the question.
    assert sent_texts(SID)[-1].startswith(f"[offline] {ASK_SIZE}")
    assert Conversation.objects.get(pk=SID).asking_step == "porte"

    nxt = run_on_commit(say, api, "umas 30 pessoas", 4)

    assert data()["tamanho"] == "11-50"
    (confirm,) = reply_texts(nxt)  # the triage goes on, not the catch-all
    assert confirm.startswith(f"[offline] {ASK_CONFIRM}")


def test_understand_take_over_in_the_admin_then_give_back_resumes(run_on_commit):
    staff = make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    client = client_for(staff)
    run_on_commit(host.handle, SID, {"message": "oi", "id": "m1"})

    response = client.post(admin_operation_url(SID, "take-over"), {"understand": "on"})
    assert response.status_code == 302
    assert Conversation.objects.get(pk=SID).blob["metadata"]["handoff"]["mode"] == "understand"
    run_on_commit(host.handle, SID, {"message": "João", "id": "m2"})
    run_on_commit(host.handle, SID, {"message": "Acme", "id": "m3"})
    assert triage_ended_silenced()
    before = len(sent_texts(SID))

    run_on_commit(client.post, admin_operation_url(SID, "give-back"))

    (asked,) = sent_texts(SID)[before:]
    assert asked.startswith(f"[offline] {ASK_SIZE}")
    nxt = run_on_commit(host.handle, SID, {"message": "umas 30 pessoas", "id": "m4"})
    (confirm,) = [m.text for m in nxt.result.messages]
    assert confirm.startswith(f"[offline] {ASK_CONFIRM}")
    kinds = list(DeskEntry.objects.filter(conversation_id=SID).values_list("kind", "author__username"))
    assert kinds == [("take_over", "alice"), ("give_back", "alice")]


def test_a_replayed_give_back_asks_nothing_twice(run_on_commit):
    run_on_commit(host.handle, SID, {"message": "oi", "id": "m1"})
    host.silence(SID, "human: maria", owner="maria", mode="understand")
    run_on_commit(host.handle, SID, {"message": "João", "id": "m2"})
    run_on_commit(host.handle, SID, {"message": "Acme", "id": "m3"})
    handoff = Conversation.objects.get(pk=SID).blob["metadata"]["handoff"]

    run_on_commit(host.unsilence, SID)
    asks = History.objects.filter(conversation_id=SID, step_id="porte").count()
    assert asks == 1
    # The same give-back again (say, a retried request racing a new handoff with the same stamp):
    from falai_django.host import silencing as state

    for run in state.resumable_runs(SID, handoff):
        host.handle(SID, {"start": {"flow": run["flowId"], "key": state.resume_key(handoff, run)}})

    assert History.objects.filter(conversation_id=SID, step_id="porte").count() == 1
    last = TurnRecord.objects.filter(conversation_id=SID, kind="start").order_by("-id").first()
    assert [s["code"] for s in last.skipped] == ["already-claimed"]


@pytest.mark.parametrize("mode", ["stop", "skip", "understand"])
def test_every_mode_resumes_a_flow_an_event_started_while_silenced(mode, run_on_commit):
    """An event starts `agenda` during the handoff: its confirmation `say` is silenced (stop,
    understand: the run ends there; skip: the step is skipped, the run waits a day and ends
    when its reminder is skipped too). After the give-back the customer gets the confirmation."""
    from demo import support

    from falai_django.models import Wake

    run_on_commit(host.handle, SID, {"message": "oi", "id": "m1"})
    host.silence(SID, "human: maria", owner="maria", mode=mode)
    run_on_commit(host.handle_event, SID, "demo_agendada", key="crm:1", payload={"quando": "terça às 10h"})
    support.clock().advance("25h")
    for key in Wake.objects.filter(conversation_id=SID, key__startswith="agenda").values_list("key", flat=True):
        run_on_commit(host.handle_wake, SID, key)
    assert all(run["flowId"] != "agenda" for run in Conversation.objects.get(pk=SID).blob["runs"])
    confirmation = ("Prontinho! Sua demonstração ficou marcada para terça às 10h. "
                    "Amanhã, neste mesmo horário, te mando um lembrete.")
    assert confirmation not in sent_texts(SID)

    run_on_commit(host.unsilence, SID)

    assert sent_texts(SID)[-1] == confirmation


def test_give_back_without_a_silenced_run_starts_nothing(run_on_commit):
    run_on_commit(host.handle, SID, {"message": "oi", "id": "m1"})
    host.silence(SID, "human: maria", owner="maria")  # stop: the asking run stays asking
    run_on_commit(host.handle, SID, {"message": "João", "id": "m2"})
    before = TurnRecord.objects.filter(conversation_id=SID).count()

    run_on_commit(host.unsilence, SID)

    assert TurnRecord.objects.filter(conversation_id=SID).count() == before
    assert Conversation.objects.get(pk=SID).asking_step == "quem"


def test_a_change_of_owner_during_the_handoff_still_resumes(run_on_commit):
    from falai_django import handoff

    run_on_commit(host.handle, SID, {"message": "oi", "id": "m1"})
    handoff.take_over(SID, "maria", understand=True)
    run_on_commit(host.handle, SID, {"message": "João", "id": "m2"})
    run_on_commit(host.handle, SID, {"message": "Acme", "id": "m3"})  # the triage ends silenced here
    first = Conversation.objects.get(pk=SID).blob["metadata"]["handoff"]
    handoff.take_over(SID, "pedro", understand=True)  # reassigned: a new reason, the same handoff
    assert Conversation.objects.get(pk=SID).blob["metadata"]["handoff"]["since"] == first["at"]

    run_on_commit(host.unsilence, SID)

    assert sent_texts(SID)[-1].startswith(f"[offline] {ASK_SIZE}")


def chat(*lines: str) -> str:
    """`manage.py falai_chat` on this conversation, fed `lines`; what it printed."""
    import sys
    from io import StringIO

    from django.core.management import call_command

    out, stdin = StringIO(), sys.stdin
    sys.stdin = StringIO("".join(f"{line}\n" for line in [*lines, "/quit"]))
    try:
        call_command("falai_chat", "--session", SID, "--no-stream", stdout=out)
    finally:
        sys.stdin = stdin
    return out.getvalue()


def test_the_terminal_chat_prints_what_the_give_back_resumed(run_on_commit):
    # stop mode and an asking run: nothing was silenced, so nothing is resumed
    assert "(the agent has the conversation again)\nyou> /quit" in chat("oi", "/silence humano", "/unsilence")

    host.silence(SID, "humano", mode="understand")
    run_on_commit(host.handle, SID, {"message": "João", "id": "m2"})
    run_on_commit(host.handle, SID, {"message": "Acme", "id": "m3"})

    assert f"Ana> [offline] {ASK_SIZE}" in chat("/unsilence")
