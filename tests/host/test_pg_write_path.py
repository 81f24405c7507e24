"""The PostgreSQL write path: a message turn is two statements (inbox + load, then the write),
the sends are announced by a NOTIFY inside the write, and the dispatcher sends them."""

from __future__ import annotations

import importlib
import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from falai_django import host
from falai_django.models import History, Session, TurnRecord, Wake

from . import agents, senders
from .helpers import texts, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

ASK = "Oi! Com quem eu falo?"
NICE = "Prazer, Ana!"


@pytest.fixture
def notify_mode(settings):
    settings.FALAI = {**settings.FALAI, "SEND_HANDOFF": "notify", "SEND_SWEEP_AFTER_S": 0.2}


def statements(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries]


def broker_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_q_ormq")
        return cursor.fetchone()[0]


def listen():
    """A second connection LISTENing on the send channel."""
    from falai_django.host.jobs import SEND_CHANNEL

    conn = connection.get_new_connection(connection.get_connection_params())
    conn.autocommit = True
    conn.execute(f"LISTEN {SEND_CHANNEL}")
    return conn


def test_a_message_turn_is_two_statements_with_no_broker_row(notify_mode):
    host.handle_message("s1", "oi", id="wamid.1")
    listener = listen()
    before = broker_rows()
    with CaptureQueriesContext(connection) as queries:
        result = host.handle_message("s1", "meu nome é Ana", id="wamid.2")
    sql = statements(queries)
    assert result.status == "done" and result.version == 2 and len(result.result.schedule) == 1
    assert len(sql) == 2, "\n\n".join(sql)  # inbox + session + transcript; then the whole write
    assert sql[0].startswith("WITH t AS (INSERT INTO") and "pg_notify" in sql[1]
    assert broker_rows() == before  # the outbox rows are the work: no django-q2 row per turn
    heard = [n.payload for n in listener.notifies(timeout=1.0, stop_after=1)]
    listener.close()
    assert heard == ["s1"]
    # Everything the turn wrote is there, from that one statement.
    record = TurnRecord.objects.get(input_key="wamid.2")
    assert record.status == "done" and record.version == 2 and record.outcomes and record.attempts == 1
    items = list(History.objects.filter(turn=record).order_by("id").values_list("role", "content", "send_status"))
    assert items == [("user", "meu nome é Ana", None), ("assistant", NICE, "pending")]
    row = Session.objects.get(pk="s1")
    assert row.version == 2 and row.waiting_until == Wake.objects.get(conversation_id="s1").at


def test_a_wake_turn_is_two_statements_and_marks_its_wake_done(notify_mode):
    host.handle_message("s1", "oi", id="wamid.1")
    key = host.handle_message("s1", "meu nome é Ana", id="wamid.2").result.schedule[0].key
    agents.clock().advance("1h")
    with CaptureQueriesContext(connection) as queries:
        result = host.handle_wake("s1", key)
    assert result.status == "done" and len(statements(queries)) == 2, "\n\n".join(statements(queries))
    wake = Wake.objects.get(key=key)
    assert wake.state == "done" and wake.fired_at is not None
    record = TurnRecord.objects.get(kind="wake")  # the run-log row, inserted by the write itself
    assert record.status == "done" and record.input_key == key and record.attempts == 1
    assert History.objects.filter(turn=record, role="assistant").count() == len(result.result.messages)


def test_a_lost_compare_and_swap_writes_nothing_and_replays(notify_mode, monkeypatch):
    """Another writer saves between our load and our write: the one statement changes nothing."""
    from falai_django.host import turns
    from falai_django.stores.django import DjangoStore

    host.handle_message("s1", "oi", id="wamid.1")
    original = turns.load_session_and_history
    raced = {"n": 0}

    def load_then_race(session_id, store=None, **kw):
        session, history = original(session_id, store, **kw)
        if not raced["n"]:
            raced["n"] += 1
            other = session.model_copy(update={"metadata": {"touched": True}})
            DjangoStore().save(other, session.version)
        return session, history

    monkeypatch.setattr(turns, "load_session_and_history", load_then_race)
    result = host.handle_message("s1", "meu nome é Ana", id="wamid.2")
    assert result.status == "done" and result.replays == 1 and result.version == 3
    assert History.objects.filter(content="meu nome é Ana").count() == 1
    assert Wake.objects.filter(conversation_id="s1").count() == 1
    assert DjangoStore().load("s1").metadata == {"touched": True}


def _run_dispatcher():
    from falai_django.host.wakes import Dispatcher

    dispatcher = Dispatcher(poll_s=0.05, sweep_every_s=0.2)
    thread = threading.Thread(target=dispatcher.run, kwargs={"max_seconds": 30}, daemon=True)
    thread.start()
    return dispatcher, thread


def test_the_dispatcher_sends_what_a_notify_announces_once(notify_mode):
    dispatcher, thread = _run_dispatcher()
    try:
        assert wait_for(lambda: dispatcher.sender is not None and dispatcher.sender.listen_conn is not None)
        host.handle_message("s1", "oi", id="wamid.1")
        assert wait_for(lambda: texts(senders.sent) == [ASK])
        assert wait_for(lambda: History.objects.get(role="assistant").send_status == "sent")
    finally:
        dispatcher.stop()
        thread.join(10)
    assert texts(senders.sent) == [ASK]  # the sweep saw it sent: no second delivery


def test_sends_nobody_was_told_about_are_sent_when_the_dispatcher_starts(notify_mode):
    """The process dies between commit and hand-off (here: no dispatcher was listening)."""
    host.handle_message("s1", "oi", id="wamid.1")
    host.handle_message("s2", "oi", id="wamid.2")
    assert senders.sent == [] and History.objects.pending_sends().count() == 2
    time.sleep(0.3)  # older than SEND_SWEEP_AFTER_S
    dispatcher, thread = _run_dispatcher()
    try:
        assert wait_for(lambda: sorted(m.session_id for m in senders.sent) == ["s1", "s2"])
    finally:
        dispatcher.stop()
        thread.join(10)
    assert History.objects.pending_sends().count() == 0


def test_the_demo_agents_silence_wake_is_replaced_in_the_same_statement(notify_mode, settings):
    """Ana (the demo agent) re-arms her silence wake on every reply: the write deletes the one
    `replaces` names and upserts the new one, inside its single statement."""
    from falai_django import conf

    settings.FALAI = {**settings.FALAI, "AGENT": "project.agents.ana"}
    conf.clear_cache()
    sid = "5511999990000"
    host.handle_message(sid, "oi", id="wamid.1")
    first = list(Wake.objects.filter(conversation_id=sid).values_list("key", flat=True))
    assert len(first) == 1 and first[0].startswith("silence:lembrete:")
    time.sleep(0.01)  # a later reply: a later silence key
    with CaptureQueriesContext(connection) as queries:
        result = host.handle_message(sid, "João", id="wamid.2")
    assert result.status == "done" and len(statements(queries)) == 2, "\n\n".join(statements(queries))
    [entry] = [e for e in result.result.schedule if e.key.startswith("silence:")]
    assert entry.replaces == first[0]
    assert list(Wake.objects.filter(conversation_id=sid).values_list("key", flat=True)) == [entry.key]


def test_a_wake_chunk_reads_its_wakes_sessions_and_transcripts_in_one_statement(notify_mode):
    from falai_django.host.wakes import fire_wakes

    keys = {}
    for sid in ("s1", "s2", "s3"):
        host.handle_message(sid, "oi", id=f"{sid}.1")
        keys[sid] = host.handle_message(sid, "meu nome é Ana", id=f"{sid}.2").result.schedule[0].key
    agents.clock().advance("1h")
    ids = list(Wake.objects.values_list("id", flat=True))
    with CaptureQueriesContext(connection) as queries:
        assert fire_wakes(ids) == 3
    every = statements(queries)
    sql = [q for q in every if not q.startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(sql) == 1 + 3, "\n\n".join(sql)  # the chunk's read, then one write per wake
    assert every.count("BEGIN") == 1 and every.count("COMMIT") == 1  # one transaction (one commit) for the chunk; a savepoint a wake
    assert set(Wake.objects.values_list("state", flat=True)) == {"done"}
    assert TurnRecord.objects.filter(kind="wake", status="done").count() == 3
    with CaptureQueriesContext(connection) as queries:
        assert fire_wakes(ids) == 0  # all done: nothing fires twice
    assert [q for q in statements(queries) if q not in ("BEGIN", "COMMIT")][0].startswith("SELECT w.")


def test_a_wake_that_fails_in_a_chunk_leaves_the_others_written(notify_mode, monkeypatch):
    """One wake's unique-key violation is undone by its savepoint and replayed; the chunk commits."""
    from falai_django.host import outbox
    from falai_django.host.wakes import fire_wakes

    for sid in ("s1", "s2"):
        host.handle_message(sid, "oi", id=f"{sid}.1")
        host.handle_message(sid, "meu nome é Ana", id=f"{sid}.2")
    agents.clock().advance("1h")
    taken = History.objects.filter(conversation_id="s1", role="assistant").first().emission_key
    original = outbox.emission_key
    calls = {"n": 0}

    def colliding(*args):
        calls["n"] += 1
        return taken if calls["n"] == 1 else original(*args)

    monkeypatch.setattr(outbox, "emission_key", colliding)
    assert fire_wakes(list(Wake.objects.values_list("id", flat=True))) == 2
    records = TurnRecord.objects.filter(kind="wake").order_by("conversation_id")
    assert [(r.conversation_id, r.status, r.replays) for r in records] == [("s1", "done", 1), ("s2", "done", 0)]
    assert set(Wake.objects.values_list("state", flat=True)) == {"done"}


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def _saves(store, session_id: str, count: int):
    from falai_django.engine.session import Session as EngineSession

    session = EngineSession.fresh(session_id)
    session.data = {"notes": "x" * 30_000}
    saved = store.save(session, 0)
    for _ in range(count):
        saved = store.save(saved, saved.version)
    return saved


def test_the_store_binds_the_blob_server_side_and_prepares_past_the_threshold(notify_mode):
    """A 30 KB blob travels as a parameter (not escaped into the SQL text), and with the
    database's `prepare_threshold` (the demo settings: 5) the save is prepared on the server."""
    from falai_django.stores.django import DjangoStore

    connection.close()  # a new connection with the settings' options
    connection.ensure_connection()
    assert connection.connection.prepare_threshold == 5
    store = DjangoStore()
    saved = _saves(store, "big", 8)  # past the threshold
    with CaptureQueriesContext(connection) as queries:
        saved = store.save(saved, saved.version)
    [sql] = statements(queries)
    assert "x" * 100 not in sql and len(sql) < 2000  # the blob is a parameter, not a literal
    assert store.load("big").data == {"notes": "x" * 30_000} and saved.version == 10
    assert any('UPDATE "agent_sessions"' in s and "$1" in s for s in _prepared_statements())


def test_nothing_is_prepared_when_the_database_options_say_none(notify_mode):
    """`OPTIONS["prepare_threshold"] = None` (a transaction-pooling PgBouncer before 1.21): the
    same saves and turns leave no prepared statement on the server."""
    from falai_django import host
    from falai_django.stores.django import DjangoStore

    connection.close()
    options = connection.settings_dict.setdefault("OPTIONS", {})
    before = options.get("prepare_threshold", "absent")
    options["prepare_threshold"] = None
    try:
        connection.ensure_connection()
        assert connection.connection.prepare_threshold is None
        saved = _saves(DjangoStore(), "big", 8)
        for n in range(7):
            assert host.handle("s1", {"message": "oi", "id": f"m{n}"}).status == "done"
        assert saved.version == 9 and _prepared_statements() == []
    finally:
        connection.close()
        if before == "absent":
            options.pop("prepare_threshold", None)
        else:
            options["prepare_threshold"] = before


def test_the_turn_statements_are_prepared_and_reused(notify_mode):
    """The loop's load and write statements are built once per shape: after a few turns on one
    connection both are prepared, and the text of each is the same from turn to turn."""
    from falai_django import host

    connection.close()
    with CaptureQueriesContext(connection) as queries:
        for n in range(12):
            assert host.handle("s1", {"message": "oi", "id": f"m{n}"}).status == "done"
    texts = statements(queries)
    loads = {s for s in texts if s.startswith("WITH t AS (INSERT")}
    writes = [s for s in texts if s.startswith("WITH s AS (UPDATE")]
    assert len(loads) == 1 and len(writes) == 11 and len(set(writes)) <= 2  # a shape or two, each reused
    prepared = _prepared_statements()
    assert any(s.startswith("WITH t AS (INSERT") for s in prepared)
    assert any(s.startswith("WITH s AS (UPDATE") for s in prepared)


def test_a_chunk_past_its_time_budget_commits_what_it_fired_and_hands_the_rest_back(notify_mode):
    """A chunk of slow turns must not outlive django-q2's task timeout: past its budget it stops,
    commits the wakes it fired, and puts the untried ones back to pending for the next poll."""
    from falai_django.host.wakes import dispatch_once, fire_wakes

    for sid in ("s1", "s2", "s3"):
        host.handle_message(sid, "oi", id=f"{sid}.1")
        host.handle_message(sid, "meu nome é Ana", id=f"{sid}.2")
    agents.clock().advance("1h")
    from falai_django.host.wakes import claim_due

    claimed = claim_due()
    ids = [row[0] for row in claimed]
    assert len(ids) == 3 and set(Wake.objects.values_list("state", flat=True)) == {"queued"}
    assert fire_wakes(ids, budget_s=0) == 1  # the first always runs; the budget is spent after it
    states = sorted(Wake.objects.values_list("state", flat=True))
    assert states == ["done", "pending", "pending"]
    assert Wake.objects.filter(state="pending", claimed_at__isnull=False).count() == 0
    assert TurnRecord.objects.filter(kind="wake", status="done").count() == 1
    # the next poll claims the two handed back, and they fire
    assert dispatch_once() == 2
    assert set(Wake.objects.values_list("state", flat=True)) == {"done"}
    assert TurnRecord.objects.filter(kind="wake", status="done").count() == 3


def test_the_chunk_budget_is_half_the_task_timeout(monkeypatch):
    from django_q.conf import Conf

    from falai_django.host.wakes import chunk_budget_s

    monkeypatch.setattr(Conf, "TIMEOUT", 40)
    assert chunk_budget_s() == 20.0
    monkeypatch.setattr(Conf, "TIMEOUT", None)
    assert chunk_budget_s() == 30.0


RELAX = "set_config('synchronous_commit', 'off', true)"


def test_an_inline_turns_inbox_commit_does_not_wait_for_its_flush_the_result_does(notify_mode):
    with CaptureQueriesContext(connection) as queries:
        result = host.handle_message("s1", "oi", id="wamid.1")
    sql = statements(queries)
    assert result.status == "done" and len(sql) == 2
    assert RELAX in sql[0]  # the inbox row: the result's commit below flushes it
    assert "synchronous_commit" not in sql[1]  # the result: a commit that waits for its flush
    with connection.cursor() as cursor:  # set for that one transaction only, not the connection
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    assert TurnRecord.objects.get(input_key="wamid.1").status == "done"


def test_a_turn_inside_a_callers_transaction_leaves_its_commit_synchronous(notify_mode):
    from django.db import transaction

    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        result = host.handle_message("s1", "oi", id="wamid.1")
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            inside = cursor.fetchone()[0]
    assert result.status == "done" and inside == "on"
    assert not any(RELAX in s for s in statements(queries))


def test_a_streamed_turns_inbox_commit_waits_for_its_flush(notify_mode):
    # A stream shows its text before the result commits: the inbox row must be on disk first.
    with CaptureQueriesContext(connection) as queries:
        events = list(host.stream("s1", {"message": "oi", "id": "wamid.1"}))
    assert events[-1]["done"] and events[-1]["host"].status == "done"
    assert not any(RELAX in s for s in statements(queries))


def test_a_parked_turns_inbox_row_is_committed_again_with_its_reason(notify_mode):
    # The relaxed inbox commit is followed by the park's own (synchronous) commit.
    from falai_django.engine.errors import ProviderError

    host.handle_message("s1", "oi", id="wamid.1")
    failing = agents.scripted_provider(understand=[ProviderError("mock", "overload", "busy")] * 3)
    agents.use(agents.ana(provider=failing, clock=agents.clock()))
    with CaptureQueriesContext(connection) as queries:
        result = host.handle_message("s1", "meu nome é Ana", id="wamid.2")
    row = TurnRecord.objects.get(input_key="wamid.2")
    assert result.status == row.status == "retry" and "busy" in row.error
    sql = statements(queries)
    assert RELAX in sql[0] and len(sql) >= 2 and "synchronous_commit" not in " ".join(sql[1:])


def _generic_transcript_plan(conversation: str) -> str:
    """EXPLAIN ANALYZE of the turn's transcript read as a prepared statement's generic plan (the
    plan psycopg's prepared statements end up with), on one conversation."""
    from falai_django.host.turns import _transcript_sql

    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute(f"PREPARE falai_transcript_plan(text) AS SELECT {_transcript_sql(connection, '$1')}")
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE falai_transcript_plan(%s)", [conversation])
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE ALL")
            cursor.execute("RESET plan_cache_mode")


@pytest.mark.parametrize(("conversations", "items"), [(20, 700), (3, 700)])
def test_a_long_conversations_transcript_is_read_newest_first_through_its_index(notify_mode, conversations, items):
    """Long conversations, interleaved, with fresh statistics (what autovacuum gives a running
    server): the generic plan reads the conversation's own index entries only, and on a table of
    some size walks them newest first and stops at HISTORY_LIMIT. Written as
    `conversation_id = $1 ORDER BY id DESC`, the planner walked the whole table's primary key
    newest first, skipping the other conversations' rows (a read that grows with everybody's
    traffic); as `conversation_id BETWEEN $1 AND $1` it read and sorted the whole conversation."""
    from django.utils import timezone

    sids = [f"long-{n}" for n in range(conversations)]
    for sid in sids:
        host.handle_message(sid, "oi", id=f"{sid}.0")
    now = timezone.now()
    History.objects.bulk_create(
        [History(conversation_id=sids[n % conversations], role="user", content=f"m{n}", at=now)
         for n in range(conversations * items)], batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {History._meta.db_table}")
    plan = _generic_transcript_plan("long-1")
    assert "falai_hist_conv_id" in plan and "falai_history_pkey" not in plan, plan
    removed = [int(line.split(":")[1]) for line in plan.splitlines() if "Rows Removed by Filter" in line]
    assert sum(removed) == 0, plan  # no other conversation's row was looked at
    if conversations * items > 10_000:  # on a table this size, nor the whole conversation read and sorted
        assert "Index Scan Backward using falai_hist_conv_id" in plan and " rows=200 " in plan, plan
        assert "Sort" not in plan.replace("Sort Key", ""), plan
    _session, transcript = host.load_session_and_history("long-1")
    newest = max(n for n in range(conversations * items) if n % conversations == 1)
    assert len(transcript) == 200 and transcript[-1]["content"] == f"m{newest}"
    assert transcript == host.load_history("long-1")  # the ORM's reading, used off PostgreSQL


def test_the_transcript_read_in_binary_keeps_every_character_and_its_order(notify_mode):
    """The load statement reads the transcript as two text arrays in binary: text that array or
    JSON syntax would escape (quotes, braces, commas, backslashes, newlines, NULs aside) and
    non-ASCII arrive as written, in order, and the wake chunk's read gives the same."""
    from django.utils import timezone

    from falai_django.host.turns import load_wakes

    host.handle_message("odd", "oi", id="odd.0")
    odd = ['a "quoted", {braced} text', "back\\slash \\N NULL", "linha 1\nlinha 2\ttab", "não, é só", "",
           "emoji \U0001F600 and \u00e7", "NULL"]
    now = timezone.now()
    History.objects.bulk_create([History(conversation_id="odd", role=("user", "assistant", "system")[n % 3],
                                         content=text, at=now) for n, text in enumerate(odd)])
    _session, transcript = host.load_session_and_history("odd")
    assert transcript[-len(odd):] == [{"role": ("user", "assistant", "system")[n % 3], "content": text}
                                      for n, text in enumerate(odd)]
    assert transcript == host.load_history("odd")
    Wake.objects.create(conversation_id="odd", key="odd-wake", at=now, state="pending", attempts=0)
    [(sid, key, loaded, _at)] = load_wakes(list(Wake.objects.filter(conversation_id="odd").values_list("id", flat=True)))
    assert (sid, key) == ("odd", "odd-wake") and loaded is not None and loaded[1] == transcript


def test_a_conversation_without_a_transcript_reads_an_empty_one(notify_mode):
    """No transcript rows at all: the arrays come back empty (not NULL) and read as []."""
    from falai_django.engine.session import Session as Blob

    Session.objects.create(id="bare", version=1, blob={**Blob.fresh("bare").to_json(), "version": 1})
    session, transcript = host.load_session_and_history("bare")
    assert session is not None and session.id == "bare" and transcript == []


def test_a_saved_session_blob_is_compressed_with_lz4(notify_mode):
    """Migration 0007: a blob past the TOAST threshold is compressed with lz4, not pglz."""
    host.handle_message("big", "oi", id="big.0")
    for n in range(1, 30):  # the run's inputs and outcomes grow the blob past 2 KB
        host.handle_message("big", f"mensagem {n}", id=f"big.{n}")
    table = Session._meta.db_table
    migration = importlib.import_module("falai_django.migrations.0007_session_blob_lz4")
    if not migration.lz4_available(connection):
        pytest.skip("this PostgreSQL was built without lz4; the migration leaves pglz")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT length(blob::text), pg_column_compression(blob) FROM {table} WHERE id = %s", ["big"])
        size, method = cursor.fetchone()
    assert size > 2048, size
    assert method == "lz4"
