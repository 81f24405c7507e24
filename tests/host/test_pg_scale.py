"""Issue 52 on PostgreSQL only: the indexes migration 0016 builds, and the list's order, the
search, the owner filter and the counts that use them (bench/scale.py measures them at a million
conversations; these tests pin what the bench relies on)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from falai_django.host import conversations, counting
from falai_django.models import Assignment, History, Session

from .helpers import staff_client

pytestmark = pytest.mark.django_db

LIST = "/falai/sessions"
CHANGELIST = "/admin/falai_django/conversation/"


def plan(sql: str, params: list | tuple = ()) -> str:
    """The plan with sequential scans priced out: a plan that still reads a table without an
    index means no index serves the query (a table this small would otherwise be scanned)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def conversation(sid: str, *, name: str = "", minutes_ago: int | None = 1, lines: tuple[str, ...] = (),
                 owner: str | None = None) -> Session:
    at = timezone.now() - timedelta(minutes=minutes_ago) if minutes_ago is not None else None
    row = Session.objects.create(id=sid, version=1, blob={"id": sid, "data": {"nome": name} if name else {}},
                                 last_user_at=at, human_owner=owner,
                                 silenced_reason=f"human: {owner}" if owner else None)
    History.objects.bulk_create([History(conversation_id=sid, role="user", content=text, at=timezone.now())
                                 for text in lines])
    return row


def found(text: str) -> list[str]:
    return sorted(conversations.search(Session.objects.all(), text).values_list("id", flat=True))


def test_the_migration_builds_the_postgres_indexes():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename IN ('agent_sessions', 'falai_history')")
        names = {name for (name,) in cursor.fetchall()}
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        trigram = cursor.fetchone()

    assert trigram is not None
    assert {"falai_sess_recent", "falai_sess_id_trgm", "falai_sess_data_trgm", "falai_hist_words",
            "falai_sess_silenced"} <= names
    assert "falai_sess_last_user" not in names  # replaced by falai_sess_recent here


def test_search_finds_a_phone_a_name_and_transcript_words():
    conversation("5511987654321", name="Maria Souza Lima", lines=("quero falar sobre abacaxis",))
    conversation("5521912345678", name="João Pereira", lines=("somos 500 pessoas", "tenho um_codigo"))
    conversation("5531900000000", name="Ana Lima Souza")

    assert found("98765") == ["5511987654321"]  # a piece of the phone number
    assert found("souza lima") == ["5511987654321"]  # the name, any case
    assert found("SOUZA") == ["5511987654321", "5531900000000"]
    assert found("abacax") == ["5511987654321"]  # a transcript word by its start
    assert found("falar abacaxis") == ["5511987654321"]  # every word, anywhere in a line
    assert found("pereira quero") == []
    # LIKE's wildcards are the text's own characters ("Jo_o" would match João, "Pereira%" João Pereira)
    assert found("Jo_o") == [] and found("Pereira%") == []
    assert found("um_codigo") == ["5521912345678"] and found("50") == ["5521912345678"]  # "500" by its start


def test_a_broad_search_gives_the_same_answer_as_a_subquery(monkeypatch):
    for n in range(5):
        conversation(f"55119000000{n:02d}", name=f"Cliente {n}", lines=("oi",))
    narrow = found("cliente")
    monkeypatch.setattr(conversations, "SEARCH_LIST_UP_TO", 2)

    assert found("cliente") == narrow == [f"55119000000{n:02d}" for n in range(5)]
    assert "IN (SELECT" in str(conversations.search(Session.objects.all(), "cliente").query)


def test_the_search_is_served_by_the_trigram_and_full_text_indexes():
    # enough rows that reading a whole index is dearer than the trigram lookup (as in a live table)
    with connection.cursor() as cursor:
        cursor.execute("""INSERT INTO agent_sessions (id, version, blob)
                          SELECT '5511' || lpad(n::text, 9, '0'), 1, jsonb_build_object('data',
                                 jsonb_build_object('nome', 'Cliente ' || n)) FROM generate_series(1, 200000) n""")
        cursor.execute("""INSERT INTO falai_history (conversation_id, role, content, at, after_ms, send_attempts,
                                 send_error)
                          SELECT '5511' || lpad(n::text, 9, '0'), 'user', 'linha ' || n, now(), 0, 0, ''
                          FROM generate_series(1, 30000) n""")
        cursor.execute("ANALYZE agent_sessions")
        cursor.execute("ANALYZE falai_history")
    by_name, by_phone = plan(*conversations._postgres_search("maria souza", connection)), plan(
        *conversations._postgres_search("02718", connection))

    assert "falai_sess_data_trgm" in by_name and "falai_hist_words" in by_name, by_name
    assert "falai_sess_id_trgm" in by_phone, by_phone


def test_the_list_walks_falai_sess_recent_and_puts_conversations_without_a_customer_message_last():
    conversation("old", minutes_ago=60)
    conversation("never", minutes_ago=None)
    conversation("new", minutes_ago=1)
    client = staff_client()

    body = client.get(LIST).json()
    ordered = Session.objects.order_by(*conversations.LIST_ORDER)[:50]

    assert [row["id"] for row in body["results"]] == ["new", "old", "never"]
    assert body["count"] == 3 and body["count_is_estimate"] is False
    shown = plan(*ordered.query.sql_with_params())
    assert "Index Scan using falai_sess_recent" in shown and "Sort" not in shown, shown


def test_the_admin_list_has_the_same_order(django_user_model):
    conversation("old", minutes_ago=60)
    conversation("never", minutes_ago=None)
    conversation("new", minutes_ago=1)
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))

    response = client.get(CHANGELIST)

    assert [row.pk for row in response.context["cl"].result_list] == ["new", "old", "never"]


def test_owners_are_the_distinct_people_conversations_are_handed_to():
    conversation("a", owner="bruna")
    conversation("b", owner="alice")
    conversation("c", owner="bruna")
    conversation("d")

    assert conversations.owners() == ["alice", "bruna"]
    assert conversations.owners(limit=1) == ["alice"]


def test_a_count_is_exact_up_to_its_bound_then_the_planners_estimate():
    Session.objects.bulk_create([Session(id=f"c{n:03d}", version=1, blob={}) for n in range(40)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE agent_sessions")

    assert counting.count(Session.objects.all()) == (40, False)
    assert counting.count(Session.objects.filter(id__lt="c010"), exact_up_to=10) == (10, False)
    total, estimated = counting.count(Session.objects.all(), exact_up_to=10)
    assert estimated is True and total == 40  # what ANALYZE counted


def test_a_page_past_the_bound_says_its_count_is_an_estimate(monkeypatch, django_user_model):
    for n in range(8):
        conversation(f"p{n}", minutes_ago=n + 1)
    monkeypatch.setattr(counting, "EXACT_UP_TO", 5)
    client = staff_client()

    body = client.get(LIST, {"page_size": 3}).json()
    past = client.get(LIST, {"page_size": 3, "page": 40})
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    html = admin.get(CHANGELIST).content.decode()

    assert body["count_is_estimate"] is True and body["count"] >= 6
    assert [row["id"] for row in body["results"]] == ["p0", "p1", "p2"]
    assert past.status_code == 200 and past.json()["results"] == []  # past an estimate: empty, not an error
    assert 'class="falai-count-estimate"' in html and "about" in html


def test_the_desk_queues_walk_the_handed_over_conversations_in_order(django_user_model):
    alice = django_user_model.objects.create_superuser("alice", "a@example.com", "pw")
    conversation("h1", owner="alice", minutes_ago=5, lines=("oi",))
    conversation("h2", owner="alice", minutes_ago=1, lines=("alô",))
    Assignment.objects.create(conversation_id="h2", assignee=alice)
    from falai_django.handoff import desk

    waiting = desk.queue(desk.WAITING, alice)
    shown = plan(*waiting.values("pk")[:100].query.sql_with_params())

    assert list(waiting.values_list("pk", flat=True)) == ["h2", "h1"]
    assert "falai_sess_silenced" in shown, shown


def test_a_database_without_the_search_indexes_gets_a_warning():
    from falai_django.checks import check_search_indexes

    assert check_search_indexes(databases=["default"]) == []
    with connection.cursor() as cursor:
        cursor.execute('DROP INDEX "falai_sess_data_trgm"')  # rolled back with the test

    [warning] = check_search_indexes(databases=["default"])
    assert warning.id == "falai_django.W190" and "falai_sess_data_trgm" in warning.msg
    assert "falai_sess_recent" not in warning.msg
