"""The conversation list: columns, filters, search, and a query count that does not grow with rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from falai_django import host
from falai_django.engine.session import Session
from falai_django.models import Conversation, HistoryItem, Wake
from falai_django.stores.django import DjangoStore

from .conftest import CHANGELIST, admin_client, say

pytestmark = pytest.mark.django_db


def quiet_conversations(count: int, start: int = 0) -> None:
    """`count` conversations straight through the store, each with a transcript line and a wake."""
    store = DjangoStore()
    now = host.agent_now()
    for i in range(start, start + count):
        session_id = f"q{i:03d}"
        session = Session.fresh(session_id)
        session.data = {"cidade": f"Cidade{i}"}
        store.save(session, 0)
        HistoryItem.objects.create(conversation_id=session_id, role="user", content=f"mensagem {i}", at=now)
        Wake.objects.create(conversation_id=session_id, key=f"silence:x:{session_id}:1", at=now + timedelta(hours=i))
        if i % 3 == 0:
            host.silence(session_id, f"human: agent{i % 2}", owner=f"agent{i % 2}")


def changelist_queries(client, url: str = CHANGELIST) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured)


def listed_ids(response) -> list[str]:
    return [row.pk for row in response.context["cl"].result_list]


def test_list_query_count_does_not_grow_with_rows(operator, django_assert_max_num_queries):
    client = admin_client(operator)
    quiet_conversations(3)
    client.get(CHANGELIST)  # warm the session and content-type caches
    few = changelist_queries(client)
    quiet_conversations(47, start=3)

    with django_assert_max_num_queries(few):
        response = client.get(CHANGELIST)

    assert len(listed_ids(response)) == 50
    assert changelist_queries(client, CHANGELIST + "?q=mensagem") == changelist_queries(client, CHANGELIST + "?q=x")


def test_list_never_loads_the_blob(operator):
    quiet_conversations(2)

    with CaptureQueriesContext(connection) as captured:
        admin_client(operator).get(CHANGELIST)

    selects = [q["sql"] for q in captured if 'FROM "agent_sessions"' in q["sql"] and "COUNT" not in q["sql"]]
    assert selects, "the page query was not seen"
    assert all('"agent_sessions"."blob"' not in sql.split(" FROM ")[0] for sql in selects)


def test_list_columns(operator, run_on_commit):
    run_on_commit(say, "5511", "oi", "m1")
    quiet_conversations(1)
    quiet_conversations(1, start=3)  # q003: handed to agent1
    host.silence("q000", "janela fechada")

    html = admin_client(operator).get(CHANGELIST).content.decode()

    assert "triagem · quem" in html
    assert 'falai-status-asking">asking<' in html
    assert 'falai-status-silenced">silenced<' in html
    assert "janela fechada" in html
    for header in ("Status", "Flow · step", "Handoff", "Last user message at", "Last assistant message at",
                   "Next wake"):
        assert f">{header}<" in html, header
    # the owner and the silence reason share the "Handoff" column (the list fits a 1400 px window)
    rows = {pk: next(r for r in html.split("<tr")[1:] if f">{pk}<" in r) for pk in ("q000", "q003")}
    assert '<span class="falai-clip" title="janela fechada">janela fechada</span>' in rows["q000"]
    assert '<strong class="falai-owner">agent1</strong>' in rows["q003"]
    assert '<span class="falai-clip" title="human: agent1">human: agent1</span>' in rows["q003"]


def test_status_filter(operator, run_on_commit):
    run_on_commit(say, "asking1", "oi", "a1")
    run_on_commit(say, "waiting1", "oi, meu nome é Ana da empresa Beta", "w1")
    quiet_conversations(1)  # q000: silenced by quiet_conversations
    DjangoStore().save(Session.fresh("idle1"), 0)
    client = admin_client(operator)

    def ids(status: str) -> set[str]:
        return set(listed_ids(client.get(CHANGELIST, {"status": status})))

    assert ids("asking") == {"asking1"}
    assert ids("waiting") == {"waiting1"}
    assert ids("silenced") == {"q000"}
    assert ids("idle") == {"idle1"}


def test_flow_owner_and_silenced_filters(operator, run_on_commit):
    run_on_commit(say, "asking1", "oi", "a1")
    quiet_conversations(4)  # q000 and q003 are owned by agent0 and agent1
    client = admin_client(operator)

    assert listed_ids(client.get(CHANGELIST, {"flow": "triagem"})) == ["asking1"]
    assert listed_ids(client.get(CHANGELIST, {"human_owner": "agent1"})) == ["q003"]
    assert set(listed_ids(client.get(CHANGELIST, {"silenced": "yes"}))) == {"q000", "q003"}
    assert set(listed_ids(client.get(CHANGELIST, {"silenced": "no"}))) == {"asking1", "q001", "q002"}


def test_search_finds_collected_data_values(operator, run_on_commit):
    run_on_commit(say, "5511", "oi, meu nome é Maria da empresa Zebralandia", "m1")
    quiet_conversations(2)
    assert Conversation.objects.get(pk="5511").blob["data"]["empresa"] == "Zebralandia"

    response = admin_client(operator).get(CHANGELIST, {"q": "zebralandia"})

    assert listed_ids(response) == ["5511"]


def test_search_finds_transcript_text_once(operator, run_on_commit):
    run_on_commit(say, "5511", "quero falar sobre abacaxis", "m1")
    run_on_commit(say, "5511", "abacaxis mesmo", "m2")
    quiet_conversations(2)

    response = admin_client(operator).get(CHANGELIST, {"q": "abacaxis"})

    assert listed_ids(response) == ["5511"]


def test_search_finds_the_id(operator):
    quiet_conversations(12)

    assert listed_ids(admin_client(operator).get(CHANGELIST, {"q": "q011"})) == ["q011"]


def test_next_wake_is_the_earliest_pending_wake(operator):
    quiet_conversations(1)
    wake = Wake.objects.get(conversation_id="q000")
    Wake.objects.create(conversation_id="q000", key="later", at=wake.at + timedelta(days=1))
    Wake.objects.create(conversation_id="q000", key="fired", at=wake.at - timedelta(days=1), state=Wake.State.DONE)

    response = admin_client(operator).get(CHANGELIST)

    assert response.context["cl"].result_list[0].next_wake_at == wake.at
