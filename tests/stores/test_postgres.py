"""PostgresStore specifics, on the real server: table shape, one CAS statement, transactions, jsonb."""

from __future__ import annotations

import psycopg
import pytest

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.session import Session
from falai_django.stores.postgres import PostgresStore

from .contract import bare, full_session

pytestmark = pytest.mark.postgres


class CountingConnection:
    """A psycopg connection that counts the statements the store sends through it."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn
        self.statements: list[str] = []

    def execute(self, query, params=None):
        self.statements.append(" ".join(str(query).split()))
        return self._conn.execute(query, params)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def columns(pg_conn, table: str) -> list[tuple]:
    return pg_conn.execute(
        "SELECT column_name, data_type, character_maximum_length, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position", (table,)
    ).fetchall()


def test_initialize_creates_the_pages_table(pg_conn, pg_table):
    PostgresStore(client=pg_conn, tables={"sessions": pg_table}).initialize()
    assert columns(pg_conn, pg_table) == [
        ("id", "character varying", 255, "NO", None),
        ("version", "integer", None, "NO", None),
        ("blob", "jsonb", None, "NO", None),
        ("created_at", "timestamp with time zone", None, "NO", "now()"),
        ("updated_at", "timestamp with time zone", None, "NO", "now()"),
    ]
    primary = pg_conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary", (pg_table,)
    ).fetchall()
    assert primary == [("id",)]


def test_initialize_is_idempotent_and_never_alters_an_existing_table(pg_conn, pg_table):
    pg_conn.execute(f"CREATE TABLE {pg_table} (id TEXT PRIMARY KEY, version INTEGER NOT NULL, blob JSONB NOT NULL)")
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    store.initialize()
    assert [c[0] for c in columns(pg_conn, pg_table)] == ["id", "version", "blob"]


def test_default_table_name_is_agent_sessions(pg_conn):
    assert PostgresStore(client=pg_conn).table == "agent_sessions"


@pytest.mark.parametrize("name", ["ana sessions", "x; DROP TABLE y", "", "1abc", None])
def test_untrusted_table_names_are_refused(pg_conn, name):
    with pytest.raises(ValueError, match="not a plain table name"):
        PostgresStore(client=pg_conn, tables={"sessions": name})


def test_a_save_is_one_statement_and_a_conflict_reads_the_version_once(pg_conn, pg_table):
    PostgresStore(client=pg_conn, tables={"sessions": pg_table}).initialize()
    counting = CountingConnection(pg_conn)
    store = PostgresStore(client=counting, tables={"sessions": pg_table})
    v1 = store.save(bare("s1"), 0)
    assert len(counting.statements) == 1
    assert counting.statements[0].startswith(f"INSERT INTO {pg_table} (id, version, blob)")
    assert "ON CONFLICT (id) DO NOTHING RETURNING version" in counting.statements[0]
    counting.statements.clear()
    store.save(v1, 1)
    assert len(counting.statements) == 1
    assert counting.statements[0].startswith(f"UPDATE {pg_table} SET version = %s, blob = %s::jsonb")
    assert counting.statements[0].endswith("WHERE id = %s AND version = %s RETURNING version")
    counting.statements.clear()
    with pytest.raises(SessionConflictError) as caught:
        store.save(v1, 1)
    assert caught.value.actual_version == 2
    assert counting.statements == [counting.statements[0], f"SELECT version FROM {pg_table} WHERE id = %s"]


def test_claims_survive_a_jsonb_round_trip_in_any_key_order(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    session = bare("s1")
    # jsonb sorts keys by length then bytes: insertion order is lost on purpose here
    for i in range(60):
        session.claims[f"sempre:s1:{'x' * (60 - i)}{i}"] = {"at": f"2026-09-20T10:{i:02d}:00.000Z"}
    session.claims["a:s1:"] = {"at": "2026-09-20T09:00:00.000Z"}
    store.save(session, 0)
    loaded = store.load("s1")
    assert list(loaded.claims) != list(session.claims)  # the database did reorder them
    assert loaded.claims == session.claims  # ...and lost nothing
    by_time = sorted(loaded.claims, key=lambda k: (loaded.claims[k]["at"], k))
    assert by_time == sorted(session.claims, key=lambda k: (session.claims[k]["at"], k))


def test_the_row_keeps_created_at_and_moves_updated_at(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    v1 = store.save(bare("s1"), 0)
    created, updated = pg_conn.execute(f"SELECT created_at, updated_at FROM {pg_table}").fetchone()
    pg_conn.execute("SELECT pg_sleep(0.01)")
    store.save(v1, 1)
    created2, updated2, version, blob = pg_conn.execute(
        f"SELECT created_at, updated_at, version, blob FROM {pg_table}").fetchone()
    assert created2 == created
    assert updated2 > updated
    assert version == 2
    assert blob["version"] == 2  # the blob carries the new version too
    assert set(blob) == {"id", "v", "version", "data", "runs", "claims", "inputs", "metadata"}


def test_a_save_inside_the_callers_transaction_commits_with_it(pg_dsn, pg_conn, pg_table):
    PostgresStore(client=pg_conn, tables={"sessions": pg_table}).initialize()
    with psycopg.connect(pg_dsn) as conn:  # not autocommit
        store = PostgresStore(client=conn, tables={"sessions": pg_table})
        with conn.transaction():
            store.save(bare("kept"), 0)
            # not visible to others until the caller's block commits
            assert PostgresStore(client=pg_conn, tables={"sessions": pg_table}).load("kept") is None
        assert PostgresStore(client=pg_conn, tables={"sessions": pg_table}).load("kept") is not None

        class Boom(Exception):
            pass

        with pytest.raises(Boom), conn.transaction():
            store.save(bare("never"), 0)
            raise Boom
        assert PostgresStore(client=pg_conn, tables={"sessions": pg_table}).load("never") is None

        # idle connection, no block: the store commits its own statement
        store.save(bare("own"), 0)
        assert PostgresStore(client=pg_conn, tables={"sessions": pg_table}).load("own").version == 1


def test_a_conflict_on_a_plain_connection_leaves_it_usable(pg_dsn, pg_conn, pg_table):
    PostgresStore(client=pg_conn, tables={"sessions": pg_table}).initialize()
    with psycopg.connect(pg_dsn) as conn:
        store = PostgresStore(client=conn, tables={"sessions": pg_table})
        store.save(bare("s1"), 0)
        with pytest.raises(SessionConflictError):
            store.save(bare("s1"), 0)
        assert store.save(bare("s2"), 0).version == 1
        assert store.load("s1").version == 1


def test_the_stored_jsonb_is_the_v4_blob(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    session = full_session("s1")
    store.save(session, 0)
    raw = pg_conn.execute(f"SELECT blob FROM {pg_table} WHERE id = 's1'").fetchone()[0]
    assert raw == dict(session.to_json(), version=1)
    assert Session.from_json(raw, "s1").to_json() == store.load("s1").to_json()


def test_claims_pruning_after_a_postgres_round_trip_goes_by_time(pg_conn, pg_table):
    # Ruling 7 through the real jsonb column: the keys come back in jsonb's order (length, then
    # bytes), which here is the reverse of their age; the turn must still drop the oldest by `at`.
    from falai_django import falai
    from falai_django.engine.jstime import ms_to_iso
    from falai_django.testing import fake_clock, mock_provider

    t0_ms = 1789898400000  # 2026-09-20T10:00:00.000Z
    clock = fake_clock("2026-09-20T10:00:00Z")
    flow = {"id": "camp", "name": "Camp", "on": [{"event": "ev"}], "steps": [{"id": "a", "do": "ok"}]}
    f = falai().fields({})
    agent = f.agent(name="Ana", provider=mock_provider(), clock=clock, flows=[f.flow(flow)], events={"ev": {}},
                    actions={"ok": {"parameters": {}, "run": lambda p, ctx: {"ok": True}}})
    session = bare("s1")
    for i in reversed(range(50)):  # written oldest (longest key) first; jsonb returns shortest first
        session.claims[f"camp:s1:{'k' * (i + 1)}"] = {"at": ms_to_iso(t0_ms - (i + 1) * 60_000)}
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    store.save(session, 0)
    loaded = store.load("s1")
    assert list(loaded.claims) != list(session.claims)  # jsonb did reorder the keys

    r = agent.turn(session_id="s1", event="ev", key="new", session=loaded)
    kept = set(r.session.claims)
    oldest = f"camp:s1:{'k' * 50}"
    assert len(kept) == 50 and oldest not in kept
    assert "camp:s1:new" in kept and "camp:s1:k" in kept
    store.save(r.session, loaded.version)
    assert set(store.load("s1").claims) == kept
