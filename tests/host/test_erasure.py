"""Issue 51: a conversation erased everywhere, with proof (falai_django/host/erasure.py).

Runs on SQLite here and on PostgreSQL in tests/host/test_postgres.py's run. The conversation
under test is a WhatsApp phone number: after the erasure, no row of any table of the app (nor
the admin's log, nor django-q2's stored failures) holds it, and the audit row keeps it only as
HMAC-SHA256 keyed with SECRET_KEY."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from falai_django import host
from falai_django.api.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from falai_django.handoff import desk
from falai_django.host import ordering
from falai_django.models import (
    Conversation,
    EarlyStatus,
    Erasure,
    Flow,
    History,
    ReadMarker,
    ReplayResult,
    ReplayRun,
    Session,
    TurnRecord,
    Wake,
)

from .helpers import url

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = "5511987654321"
OTHER = "5521912345678"


def _user(name: str, *codenames: str, staff: bool = False) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return User.objects.get(pk=user.pk)  # permissions are cached per object


def _token_client(user: User) -> Client:
    token, _ = Token.objects.get_or_create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}")


def _a_full_conversation(session_id: str, desk_user: User) -> None:
    """Everything the app keeps about a conversation: transcript and outbox, run log, a pending
    wake, the desk's assignment, notes and read marker, an admin log line, a replay's report,
    a delivery status waiting for a message, a stored django-q2 failure of a task for it."""
    from django_q.models import Task

    host.handle_message(session_id, "oi", id=f"wamid.{session_id}.1")
    host.handle_message(session_id, f"meu nome é Ana, meu número é {session_id}", id=f"wamid.{session_id}.2")
    desk.claim(session_id, desk_user)
    desk.add_note(session_id, desk_user, f"Ligar para {session_id} amanhã")
    ReadMarker.objects.create(user=desk_user, conversation_id=session_id, last_read_id=1)
    LogEntry.objects.log_actions(user_id=desk_user.pk, queryset=Conversation.objects.filter(pk=session_id),
                                 action_flag=CHANGE, change_message="Took over.", single_object=False)
    Flow.objects.bulk_create([Flow(id="triagem", spec={"id": "triagem", "steps": []})], ignore_conflicts=True)
    flow = Flow.objects.get(pk="triagem")
    run = ReplayRun.objects.create(flow=flow, version=1, total=1)
    ReplayResult.objects.create(run=run, position=0,
                                conversation_id=session_id, status="same",
                                report={"conversation": session_id, "turns": [{"said": f"oi {session_id}"}]})
    EarlyStatus.objects.create(channel="whatsapp", message_id=f"wamid.out.{session_id}", status="read",
                               recipients=[session_id])
    Task.objects.create(id=f"task-{session_id}", name=f"failed-{session_id}", func="falai_django.tasks.send_pending",
                        args=(session_id,), started=timezone.now(), stopped=timezone.now(), success=False,
                        result="ConnectionError")


def _tables() -> list[str]:
    """Every table of the app, plus the admin's log and django-q2's tasks (they name objects)."""
    names = connection.introspection.table_names()
    return [t for t in names if t.startswith(("falai_", "agent_sessions", "django_admin_log", "django_q_task"))]


def _rows_naming(needle: str) -> dict[str, int]:
    """{table: rows whose any column, read as text, holds `needle`} over `_tables()`."""
    found: dict[str, int] = {}
    with connection.cursor() as cursor:
        for table in _tables():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            hits = sum(1 for row in cursor.fetchall() if any(needle in _as_text(value) for value in row))
            if hits:
                found[table] = hits
    return found


def _as_text(value) -> str:
    if isinstance(value, memoryview | bytes | bytearray):
        return bytes(value).decode("latin-1")
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def test_the_erased_phone_number_is_in_no_table_afterwards_and_the_audit_row_proves_it():
    agent_user = _user("desk-agent", "handoff_conversation", "reply_conversation", staff=True)
    eraser = _user("dpo", "erase_conversation")
    _a_full_conversation(PHONE, agent_user)
    _a_full_conversation(OTHER, agent_user)
    before = _rows_naming(PHONE)
    # the grep sees the number where the app keeps it (else finding nothing afterwards proves nothing)
    for table in ("agent_sessions", "falai_history", "falai_turn", "falai_wake", "falai_desk_entry",
                  "falai_assignment", "falai_read_marker", "falai_replay_result", "falai_early_status",
                  "django_admin_log"):
        assert before.get(table), (table, before)
    other_before = _rows_naming(OTHER)

    erasure = host.erase(PHONE, user=eraser)

    assert _rows_naming(PHONE) == {}
    assert _rows_naming(OTHER) == other_before  # the other customer's conversation is untouched
    stored = Erasure.objects.get()
    assert stored.pk == erasure.pk
    assert stored.session_hash == hmac.new(settings.SECRET_KEY.encode(), PHONE.encode(), hashlib.sha256).hexdigest()
    assert stored.session_hash == host.audit_hash(PHONE) != host.audit_hash(OTHER)
    assert stored.user == eraser and stored.username == "dpo" and stored.via == Erasure.Via.CODE
    assert abs((stored.at - timezone.now()).total_seconds()) < 60  # the wall clock, not the agent's (2026-09-20)
    assert stored.deleted["agent_sessions"] == 1
    assert stored.deleted["falai_history"] == History.objects.filter(conversation_id=OTHER).count()
    assert stored.deleted["falai_turn"] == TurnRecord.objects.filter(conversation_id=OTHER).count() >= 2
    assert stored.deleted["falai_wake"] == 1 and stored.deleted["falai_replay_result"] == 1
    assert stored.deleted["django_q_task"] == 1 and stored.deleted["django_admin_log"] == 1
    assert PHONE not in json.dumps(stored.deleted) and PHONE not in stored.username


def test_the_flow_funnel_no_longer_counts_the_erased_conversation():
    from falai_django.flows.funnel import flow_funnel

    for sid in (PHONE, OTHER):
        host.handle_message(sid, "oi", id=f"{sid}.1")
        host.handle_message(sid, "meu nome é Ana", id=f"{sid}.2")
    today = timezone.localdate()
    before = flow_funnel("triagem", today, today)
    assert before["started"] == 2 and {s["id"]: s["reached"] for s in before["steps"]}["quem"] == 2
    host.erase(PHONE)
    after = flow_funnel("triagem", today, today)
    assert after["started"] == 1 and {s["id"]: s["reached"] for s in after["steps"]}["quem"] == 1
    assert after["fields"] == [{"field": "nome", "runs": 1, "asks": before["fields"][0]["asks"] // 2}]


def test_nothing_stored_under_the_id_is_an_error_and_writes_no_audit_row():
    with pytest.raises(host.UnknownConversationError):
        host.erase("5500000000000")
    assert not Erasure.objects.exists()


def test_a_turn_running_in_line_refuses_the_erasure_and_nothing_is_deleted():
    host.handle_message(PHONE, "oi", id="w.1")
    running = host.receive(PHONE, {"message": "meu nome é Ana", "id": "w.2"}, claim=True)  # its caller runs it now
    with pytest.raises(host.ConversationBusyError) as refused:
        host.erase(PHONE)
    assert refused.value.session_id == PHONE and refused.value.retry_after_s > 0
    assert Session.objects.filter(pk=PHONE).exists()
    assert TurnRecord.objects.filter(conversation_id=PHONE).count() == 2
    assert not Erasure.objects.exists()
    TurnRecord.objects.filter(pk=running.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
    host.erase(PHONE)  # its claim lapsed (its caller died): erasable
    assert not TurnRecord.objects.filter(conversation_id=PHONE).exists()


def test_a_turn_waiting_on_the_model_in_another_thread_refuses_the_erasure_and_the_api_says_409():
    from . import agents

    asked, answer = threading.Event(), threading.Event()

    def slow_model(request):
        if "meu nome" in (request.prompt or ""):  # the second message's call takes its time
            asked.set()
            answer.wait(20)
        return agents.understand_reply(request)

    agents.use(agents.ana(provider=agents.scripted_provider(understand=[slow_model] * 10), clock=agents.clock()))
    host.handle_message(PHONE, "oi", id="w.1")
    results: list[str] = []

    def customer() -> None:
        try:
            results.append(host.handle_message(PHONE, "meu nome é Ana", id="w.2").status)
        finally:
            connections.close_all()

    thread = threading.Thread(target=customer)
    thread.start()
    try:
        assert asked.wait(10)
        with pytest.raises(host.ConversationBusyError):
            host.erase(PHONE)
        response = _token_client(_user("dpo", "erase_conversation")).delete(url(PHONE))
        assert response.status_code == 409 and response.headers["Retry-After"]
    finally:
        answer.set()
        thread.join(30)
    assert results == ["done"]
    assert History.objects.filter(conversation_id=PHONE, role="user").count() == 2  # nothing was erased
    host.erase(PHONE)  # the turn is over
    assert _rows_naming(PHONE) == {}


def test_a_wake_being_fired_refuses_the_erasure():
    host.handle_message(PHONE, "oi", id="w.1")
    host.handle_message(PHONE, "meu nome é Ana", id="w.2")
    assert Wake.objects.filter(conversation_id=PHONE).exists()
    Wake.objects.filter(conversation_id=PHONE).update(state=Wake.State.QUEUED, claimed_at=timezone.now())
    with pytest.raises(host.ConversationBusyError):
        host.erase(PHONE)
    assert Wake.objects.filter(conversation_id=PHONE).exists()
    Wake.objects.filter(conversation_id=PHONE).update(claimed_at=timezone.now() - timedelta(hours=1))  # lapsed
    host.erase(PHONE)
    assert not Session.objects.filter(pk=PHONE).exists()


def _holding_the_turn_lock(session_id: str):
    """A drain of the conversation on another connection: holds its turn lock until released."""
    taken, release, done = threading.Event(), threading.Event(), threading.Event()

    def drain() -> None:
        try:
            assert ordering.lock(session_id)[0]
            taken.set()
            release.wait(30)
            ordering.release(session_id)
        finally:
            connections.close_all()
            done.set()

    threading.Thread(target=drain, daemon=True).start()
    assert taken.wait(10)
    return release, done


def test_a_worker_draining_the_conversation_refuses_the_erasure():
    host.handle_message(PHONE, "oi", id="w.1")
    release, done = _holding_the_turn_lock(PHONE)
    try:
        with pytest.raises(host.ConversationBusyError):
            host.erase(PHONE)
        assert Session.objects.filter(pk=PHONE).exists()
    finally:
        release.set()
        assert done.wait(10)
    host.erase(PHONE)
    assert not Session.objects.filter(pk=PHONE).exists()
    # the erasure's own hold on the lock ends with it: the next input of that number runs
    assert host.handle_message(PHONE, "oi de novo", id="w.9").status == "done"
    assert Session.objects.filter(pk=PHONE).exists()


def test_an_in_line_turn_that_starts_during_the_erasure_refuses_it_and_nothing_is_deleted(monkeypatch):
    from falai_django.host import erasure

    host.handle_message(PHONE, "oi", id="w.1")
    first_look = erasure._refuse_while_running

    def a_caller_arrives_right_after(session_id, alias):
        first_look(session_id, alias)
        host.receive(session_id, {"message": "meu nome é Ana", "id": "w.2"}, claim=True)

    monkeypatch.setattr(erasure, "_refuse_while_running", a_caller_arrives_right_after)
    with pytest.raises(host.ConversationBusyError, match="a turn started"):
        host.erase(PHONE)
    assert Session.objects.filter(pk=PHONE).exists()
    assert History.objects.filter(conversation_id=PHONE).exists()
    assert TurnRecord.objects.filter(conversation_id=PHONE).count() == 1  # its own row was written by then
    assert not Erasure.objects.exists()


def test_an_input_stored_during_the_erasure_is_run_after_it_as_a_new_conversation(monkeypatch):
    from falai_django.host import erasure

    host.handle_message(PHONE, "oi", id="w.1")
    delete_everything = erasure._delete_everything

    def a_webhook_stores_one_meanwhile(session_id, alias):
        deleted = delete_everything(session_id, alias)
        # its worker would find the turn lock taken and leave it to the holder
        host.receive(session_id, {"message": "oi de novo", "id": "w.9"})
        return deleted

    monkeypatch.setattr(erasure, "_delete_everything", a_webhook_stores_one_meanwhile)
    host.erase(PHONE)
    assert list(History.objects.filter(conversation_id=PHONE, role="user").values_list("content", flat=True)) == [
        "oi de novo"]
    assert TurnRecord.objects.get(conversation_id=PHONE).status == TurnRecord.Status.DONE


# -- the API ------------------------------------------------------------------------------------


def test_delete_session_needs_the_erase_permission():
    host.handle_message(PHONE, "oi", id="w.1")
    operator = _user("operator", "change_conversation")
    assert _token_client(operator).delete(url(PHONE)).status_code == 403
    assert Session.objects.filter(pk=PHONE).exists()
    assert Client().delete(url(PHONE)).status_code in (401, 403)
    assert Session.objects.filter(pk=PHONE).exists()


def test_a_signed_webhook_cannot_erase():
    host.handle_message(PHONE, "oi", id="w.1")
    ts = str(int(time.time()))
    headers = {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: sign("s3cret", ts, b"", method="DELETE", path=url(PHONE))}
    assert Client().delete(url(PHONE), headers=headers).status_code == 403
    assert Session.objects.filter(pk=PHONE).exists()


def test_delete_session_erases_then_answers_404():
    host.handle_message(PHONE, "oi", id="w.1")
    client = _token_client(_user("dpo", "erase_conversation"))
    response = client.delete(url(PHONE))
    assert response.status_code == 204
    assert not Session.objects.filter(pk=PHONE).exists()
    assert not TurnRecord.objects.filter(conversation_id=PHONE).exists()
    audit = Erasure.objects.get()
    assert audit.via == Erasure.Via.API and audit.username == "dpo"
    again = client.delete(url(PHONE))
    assert again.status_code == 404 and again.json()["detail"]
    assert Erasure.objects.count() == 1


def test_delete_session_while_a_turn_runs_is_409_with_retry_after():
    host.handle_message(PHONE, "oi", id="w.1")
    host.receive(PHONE, {"message": "meu nome é Ana", "id": "w.2"}, claim=True)
    response = _token_client(_user("dpo", "erase_conversation")).delete(url(PHONE))
    assert response.status_code == 409
    assert int(response.headers["Retry-After"]) > 0
    assert "retry" in response.json()["detail"].lower()
    assert Session.objects.filter(pk=PHONE).exists()


# -- the command --------------------------------------------------------------------------------


def test_falai_erase_no_input_erases_each_id_and_names_the_user(capsys):
    host.handle_message(PHONE, "oi", id="w.1")
    host.handle_message(OTHER, "oi", id="w.1")
    _user("dpo", "erase_conversation")
    call_command("falai_erase", PHONE, OTHER, "--no-input", "--user", "dpo")
    assert not Session.objects.filter(pk__in=[PHONE, OTHER]).exists()
    rows = list(Erasure.objects.order_by("id").values_list("session_hash", "username", "via"))
    assert rows == [(host.audit_hash(PHONE), "dpo", "command"), (host.audit_hash(OTHER), "dpo", "command")]
    out = capsys.readouterr().out
    assert f"{PHONE}: erased" in out and f"{OTHER}: erased" in out


@pytest.mark.parametrize("quiet", [("--no-input",), ("--noinput",)])
def test_falai_erase_takes_no_input_the_ways_django_commands_do(quiet):
    host.handle_message(PHONE, "oi", id="w.1")
    call_command("falai_erase", PHONE, *quiet)
    assert not Session.objects.filter(pk=PHONE).exists()
    host.handle_message(PHONE, "oi", id="w.2")
    call_command("falai_erase", PHONE, no_input=True)
    assert not Session.objects.filter(pk=PHONE).exists()
    host.handle_message(PHONE, "oi", id="w.3")
    call_command("falai_erase", PHONE, interactive=False)
    assert not Session.objects.filter(pk=PHONE).exists()
    assert Erasure.objects.count() == 3


def test_falai_erase_without_a_terminal_asks_for_no_input(monkeypatch):
    host.handle_message(PHONE, "oi", id="w.1")

    def no_terminal(prompt):
        raise EOFError

    monkeypatch.setattr("builtins.input", no_terminal)
    with pytest.raises(CommandError, match="--no-input"):
        call_command("falai_erase", PHONE)
    assert Session.objects.filter(pk=PHONE).exists()


def test_falai_erase_asks_first_and_a_no_changes_nothing(monkeypatch, capsys):
    host.handle_message(PHONE, "oi", id="w.1")
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    call_command("falai_erase", PHONE)
    assert Session.objects.filter(pk=PHONE).exists()
    assert "cancelled" in capsys.readouterr().out
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    call_command("falai_erase", PHONE)
    assert not Session.objects.filter(pk=PHONE).exists()


def test_falai_erase_reports_ids_it_could_not_erase():
    host.handle_message(PHONE, "oi", id="w.1")
    with pytest.raises(CommandError, match="5500000000000.*nothing is stored"):
        call_command("falai_erase", "5500000000000", PHONE, "--no-input")
    assert not Session.objects.filter(pk=PHONE).exists()  # the others are erased all the same
    with pytest.raises(CommandError, match="does not have the permission"):
        _user("clerk")
        call_command("falai_erase", OTHER, "--no-input", "--user", "clerk")


# -- the admin ----------------------------------------------------------------------------------


def _admin(user: User) -> Client:
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


CHANGELIST = "/admin/falai_django/conversation/"


def test_the_admin_action_erases_the_selected_conversations():
    host.handle_message(PHONE, "oi", id="w.1")
    host.handle_message(OTHER, "oi", id="w.1")
    client = _admin(_user("dpo", "view_conversation", "erase_conversation"))
    page = client.get(CHANGELIST)
    assert b'value="erase_selected"' in page.content
    assert b'value="delete_selected"' not in page.content  # a conversation goes only by erasure
    response = client.post(CHANGELIST, {"action": "erase_selected", "_selected_action": [PHONE]}, follow=True)
    assert response.status_code == 200
    assert "Erased 1 conversation" in response.content.decode()
    assert not Session.objects.filter(pk=PHONE).exists() and Session.objects.filter(pk=OTHER).exists()
    audit = Erasure.objects.get()
    assert (audit.via, audit.username) == ("admin", "dpo")
    assert not LogEntry.objects.filter(object_id=PHONE).exists()  # the action logs no line naming the id


def test_the_admin_action_is_offered_only_with_the_permission():
    host.handle_message(PHONE, "oi", id="w.1")
    client = _admin(_user("viewer", "view_conversation", "handoff_conversation"))
    assert b'value="erase_selected"' not in client.get(CHANGELIST).content
    client.post(CHANGELIST, {"action": "erase_selected", "_selected_action": [PHONE]})
    assert Session.objects.filter(pk=PHONE).exists()


def test_the_erasures_list_finds_an_erased_id_by_its_hmac():
    host.handle_message(PHONE, "oi", id="w.1")
    host.erase(PHONE)
    client = _admin(User.objects.create_superuser("root", password="pw"))
    found = client.get("/admin/falai_django/erasure/", {"q": PHONE})
    assert [e.session_hash for e in found.context["cl"].result_list] == [host.audit_hash(PHONE)]
    rows = found.content.decode().split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    assert f'<td class="field-session_hash">{host.audit_hash(PHONE)}</td>' in rows
    assert not list(client.get("/admin/falai_django/erasure/", {"q": OTHER}).context["cl"].result_list)


def test_the_openapi_schema_documents_the_erasure():
    from .helpers import staff_client

    schema = staff_client().get("/falai/schema", HTTP_ACCEPT="application/json").json()
    path = next(p for p in schema["paths"] if p.endswith("/sessions/{session_id}"))
    erase = schema["paths"][path]["delete"]
    assert {"204", "403", "404", "409"} <= set(erase["responses"])
    assert "Erase the conversation everywhere" in erase["description"]
    assert "get" in schema["paths"][path]  # reading it is still described


def test_the_conversation_page_links_to_a_confirmation_that_erases():
    host.handle_message(PHONE, "oi", id="w.1")
    erase_url = f"/admin/falai_django/conversation/{PHONE}/erase/"
    viewer = _admin(_user("viewer", "view_conversation"))
    assert erase_url.encode() not in viewer.get(f"/admin/falai_django/conversation/{PHONE}/change/").content
    assert viewer.post(erase_url).status_code == 403
    client = _admin(_user("dpo", "view_conversation", "erase_conversation"))
    assert erase_url.encode() in client.get(f"/admin/falai_django/conversation/{PHONE}/change/").content
    asked = client.get(erase_url)
    assert asked.status_code == 200 and "This cannot be undone" in asked.content.decode()
    assert Session.objects.filter(pk=PHONE).exists()  # asking erases nothing
    done = client.post(erase_url, follow=True)
    assert done.redirect_chain[-1][0] == CHANGELIST
    assert "Erased 1 conversation" in done.content.decode()
    assert not Session.objects.filter(pk=PHONE).exists()
    assert Erasure.objects.get().via == "admin"


def test_erasures_and_refusals_are_counted(settings):
    from .helpers import METRICS_TOKEN, moved, scrape

    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}
    host.handle_message(PHONE, "oi", id="w.1")
    before = scrape()
    assert ("falai_erasures_total", (("result", "busy"),)) in before  # shown at 0 before anything happened
    host.receive(PHONE, {"message": "meu nome é Ana", "id": "w.2"}, claim=True)
    with pytest.raises(host.ConversationBusyError):
        host.erase(PHONE)
    TurnRecord.objects.update(claimed_until=None)
    host.erase(PHONE)
    after = scrape()
    assert moved(before, after, "falai_erasures_total", result="busy") == 1
    assert moved(before, after, "falai_erasures_total", result="erased") == 1
