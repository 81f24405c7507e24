"""The desk through Django's test client: queues and unread counts, claim and assign to users,
replies and notes, resolve, failed sends with "Retry send", and read-only staff."""

from __future__ import annotations

import pytest
from demo import support

from falai_django import host
from falai_django.handoff import desk
from falai_django.models import Assignment, Conversation, DeskEntry, History, SavedReply

from .conftest import DESK, admin_operation_url, client_for, desk_url, sent_texts

pytestmark = pytest.mark.django_db

SID = "5511999990002"


def customer(text: str, n: int, sid: str = SID):
    return host.handle(sid, {"message": text, "id": f"{sid}-{n}"})


def queue_ids(user, name: str) -> list[str]:
    return list(desk.queue(name, user).values_list("id", flat=True))


def test_queues_and_unread_counts(alice, bruno, run_on_commit):
    run_on_commit(customer, "oi", 1)
    run_on_commit(customer, "oi", 1, sid="other")
    assert queue_ids(alice, desk.OPEN) == []  # nobody has it: the assistant is answering

    host.silence(SID, "human: alice", owner="alice")  # an owner who is a user is assigned
    assert Assignment.objects.get(conversation_id=SID).assignee == alice
    assert queue_ids(alice, desk.MINE) == [SID] and queue_ids(bruno, desk.MINE) == []
    assert queue_ids(bruno, desk.OPEN) == [SID]
    assert queue_ids(alice, desk.WAITING) == []  # Ana spoke last

    run_on_commit(customer, "tem alguém aí?", 2)

    assert queue_ids(bruno, desk.WAITING) == [SID]
    counts = desk.queue_counts(bruno)
    assert counts[desk.WAITING] == {"count": 1, "unread": 2}  # "oi" and the new one: bruno read nothing
    client_for(bruno).get(desk_url(SID))  # opening the conversation reads it
    assert desk.queue_counts(bruno)[desk.WAITING]["unread"] == 0
    assert desk.queue_counts(alice)[desk.WAITING]["unread"] == 2  # read markers are per user

    html = client_for(alice).get(DESK + "?q=waiting").content.decode()
    assert "<title>(2) Desk" in html
    assert f'data-id="{SID}"' in html and 'data-id="other"' not in html


def test_claim_assign_reply_note_resolve(alice, bruno, run_on_commit):
    run_on_commit(customer, "oi", 1)
    SavedReply.objects.create(title="Preço", text="Nosso plano começa em R$ 99.")
    alice_client = client_for(alice)

    response = alice_client.post(desk_url(SID, "do/claim"), {"understand_shown": "1"})
    assert response.status_code == 302
    row = Conversation.objects.get(pk=SID)
    assert (row.human_owner, row.blob["metadata"]["handoff"]["mode"]) == ("alice", "stop")
    assert Assignment.objects.get(conversation_id=SID).assignee == alice

    page = alice_client.get(desk_url(SID)).content.decode()
    assert 'data-text="Nosso plano começa em R$ 99."' in page and 'id="desk-claim-form"' not in page

    run_on_commit(alice_client.post, desk_url(SID, "do/reply"), {"text": "Nosso plano começa em R$ 99."})
    alice_client.post(desk_url(SID, "do/note"), {"text": "Cliente quer desconto; falar com vendas."})
    assert sent_texts(SID)[-1] == "Nosso plano começa em R$ 99."
    assert "Cliente quer desconto" not in " ".join(sent_texts(SID))
    assert not History.objects.filter(content__contains="Cliente quer desconto").exists()  # never fed to Ana

    alice_client.post(desk_url(SID, "do/assign"), {"assignee": bruno.pk})
    row = Conversation.objects.get(pk=SID)
    assert row.human_owner == "bruno" and Assignment.objects.get(conversation_id=SID).assignee == bruno

    run_on_commit(client_for(bruno).post, desk_url(SID, "do/resolve"), {"note": "respondido o preço"})

    row = Conversation.objects.get(pk=SID)
    assert row.silenced_reason is None and not Assignment.objects.filter(conversation_id=SID).exists()
    kinds = list(DeskEntry.objects.filter(conversation_id=SID).values_list("kind", "author__username", "text"))
    assert kinds == [
        ("take_over", "alice", "stop"),
        ("note", "alice", "Cliente quer desconto; falar com vendas."),
        ("take_over", "bruno", "stop"),
        ("assign", "alice", "bruno"),
        ("give_back", "bruno", ""),
        ("resolve", "bruno", "respondido o preço"),
    ]
    html = alice_client.get(desk_url(SID)).content.decode()
    # the markers sit in the transcript where they happened: the note after the human's reply
    assert html.index("Nosso plano começa em R$ 99.</div>") < html.index("Cliente quer desconto")
    assert html.index('data-kind="take_over"') < html.index('data-who="human"')
    assert "Internal note" in html and "never sent to the customer" in html


def test_assign_refuses_someone_without_the_handoff_permission(alice, viewer, run_on_commit):
    run_on_commit(customer, "oi", 1)

    client_for(alice).post(desk_url(SID, "do/assign"), {"assignee": viewer.pk})

    assert not Assignment.objects.filter(conversation_id=SID).exists()
    assert Conversation.objects.get(pk=SID).silenced_reason is None


def test_read_only_staff_see_the_desk_without_forms_and_cannot_act(alice, viewer, run_on_commit):
    run_on_commit(customer, "oi", 1)
    host.silence(SID, "human: alice", owner="alice")
    client = client_for(viewer)

    desk_page = client.get(DESK + "?q=open")
    page = client.get(desk_url(SID)).content.decode()

    assert desk_page.status_code == 200 and 'id="desk-read-only"' in desk_page.content.decode()
    assert 'id="desk-read-only"' in page
    for form in ("desk-reply-form", "desk-note-form", "desk-claim-form", "desk-assign-form", "desk-resolve-form"):
        assert f'id="{form}"' not in page
    for operation in ("claim", "reply", "note", "resolve", "assign", "give-back", "retry-send"):
        assert client.post(desk_url(SID, f"do/{operation}"), {"text": "x"}).status_code == 403
    assert not DeskEntry.objects.filter(kind="note").exists()


def test_staff_without_view_permission_cannot_open_the_desk(db):
    from .conftest import make_user

    nobody = make_user("nina")
    assert client_for(nobody).get(DESK).status_code == 403


def test_poll_sends_the_transcript_only_when_it_changed(alice, run_on_commit):
    run_on_commit(customer, "oi", 1)
    client = client_for(alice)

    first = client.get(desk_url(SID, "poll")).json()
    same = client.get(desk_url(SID, "poll"), {"since": first["signature"]}).json()
    run_on_commit(customer, "alô?", 2)
    changed = client.get(desk_url(SID, "poll"), {"since": first["signature"]}).json()

    assert "transcript" in first and "transcript" not in same
    assert "alô?" in changed["transcript"] and changed["signature"] != first["signature"]


def test_a_failed_send_shows_its_reason_and_can_be_retried(alice, viewer, run_on_commit, settings):
    run_on_commit(customer, "oi", 1)
    item = History.objects.filter(conversation_id=SID, role="assistant").get()
    History.objects.filter(pk=item.pk).update(send_status="failed", send_error="ChannelError: 24h window closed",
                                              send_attempts=8)
    support.sent.clear()

    for url in (desk_url(SID), f"/admin/falai_django/conversation/{SID}/change/"):
        html = client_for(alice).get(url).content.decode()
        assert "Not sent: ChannelError: 24h window closed" in html and "Retry send" in html
        assert "Retry send" not in client_for(viewer).get(url).content.decode()
    assert client_for(viewer).post(admin_operation_url(SID, "retry-send"), {"item": item.pk}).status_code == 403

    run_on_commit(client_for(alice).post, admin_operation_url(SID, "retry-send"), {"item": item.pk})

    item.refresh_from_db()
    assert item.send_status == "sent" and item.send_error == ""
    assert sent_texts(SID) == [item.content]


def test_retry_send_refuses_a_message_that_did_not_fail(alice, run_on_commit):
    run_on_commit(customer, "oi", 1)
    item = History.objects.filter(conversation_id=SID, role="assistant").get()

    response = client_for(alice).post(desk_url(SID, "do/retry-send"), {"item": item.pk}, follow=True)

    assert "only a failed send can be retried" in response.content.decode()
    item.refresh_from_db()
    assert item.send_attempts == 1


def test_host_silence_with_an_unknown_owner_keeps_the_name_and_assigns_nobody(run_on_commit):
    run_on_commit(customer, "oi", 1)

    host.silence(SID, "human: maria", owner="maria")

    assert Conversation.objects.get(pk=SID).human_owner == "maria"
    assert not Assignment.objects.filter(conversation_id=SID).exists()
    entry = DeskEntry.objects.get(conversation_id=SID)
    assert (entry.kind, entry.author_id, entry.author_name) == ("take_over", None, "maria")


def test_assigning_keeps_the_form_of_the_handoff_in_force(alice, bruno, run_on_commit):
    run_on_commit(customer, "oi", 1)
    host.silence(SID, "janela de 24h fechada", mode="skip")

    desk.assign(SID, bruno, by=alice)

    handoff = Conversation.objects.get(pk=SID).blob["metadata"]["handoff"]
    assert (handoff["owner"], handoff["mode"], handoff["reason"]) == ("bruno", "skip", "human: bruno")


def test_the_desk_in_brazilian_portuguese(alice, run_on_commit):
    run_on_commit(customer, "oi", 1)
    host.silence(SID, "human: alice", owner="alice")
    client = client_for(alice)

    queues = client.get(DESK, headers={"accept-language": "pt-br"}).content.decode()
    page = client.get(desk_url(SID), headers={"accept-language": "pt-br"}).content.decode()

    for label in ("Aguardando um humano", "Minhas", "Todas em aberto", "Central de atendimento"):
        assert label in queues, label
    for label in ("Assumida por alice", "Responder ao cliente como alice", "Nota interna", "Resolver", "Assumida"):
        assert label in page, label


def test_a_plain_give_back_unassigns(alice, run_on_commit):
    run_on_commit(customer, "oi", 1)
    desk.claim(SID, alice)
    assert queue_ids(alice, desk.MINE) == [SID]

    run_on_commit(client_for(alice).post, admin_operation_url(SID, "give-back"))

    assert queue_ids(alice, desk.MINE) == [] and queue_ids(alice, desk.OPEN) == []
    assert DeskEntry.objects.filter(conversation_id=SID).latest("id").kind == "give_back"


def test_queue_poll_answers_unchanged_while_the_page_shows_the_same_rows(alice, run_on_commit):
    run_on_commit(customer, "oi", 1)
    host.silence(SID, "human: alice", owner="alice")
    run_on_commit(customer, "tem alguém aí?", 2)
    client = client_for(alice)
    poll = DESK + "poll/"

    first = client.get(poll, {"q": "waiting"}).json()
    same = client.get(poll, {"q": "waiting", "since": first["signature"]}).json()
    run_on_commit(customer, "alô?", 3)
    changed = client.get(poll, {"q": "waiting", "since": first["signature"]}).json()

    assert f'data-id="{SID}"' in first["rows"] and first["unread"] == 2
    assert same == {"unchanged": True, "signature": first["signature"], "unread": 2}  # nothing rendered
    assert changed["signature"] != first["signature"] and changed["unread"] == 3 and "rows" in changed
    # the queue page starts from the signature of what it renders
    html = client.get(DESK + "?q=waiting").content.decode()
    assert f'data-since="{first["signature"]}"' not in html and f'data-since="{changed["signature"]}"' in html


def test_the_open_queue_is_handed_over_or_assigned_conversations(alice, bruno, run_on_commit):
    run_on_commit(customer, "oi", 1)
    run_on_commit(customer, "oi", 1, sid="assigned-only")
    run_on_commit(customer, "oi", 1, sid="nobody")
    host.silence(SID, "human: someone", owner="someone")  # handed over, assigned to no user
    Assignment.objects.create(conversation_id="assigned-only", assignee=alice)  # assigned, not silenced

    assert sorted(queue_ids(bruno, desk.OPEN)) == sorted([SID, "assigned-only"])
    assert desk.queue_counts(bruno)[desk.OPEN]["count"] == 2
    assert desk.queue_counts(bruno, known={desk.OPEN: [5, 1]})[desk.OPEN] == {"count": 2, "unread": 6}
