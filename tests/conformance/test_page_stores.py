"""The page's "A store" section: MemoryStore, PostgresStore, initialize(), tables, save(0), bumps.

Written from the user's page and the README alone.
"""

from __future__ import annotations

import json

import pytest

from falai_django import InvalidSessionError, MemoryStore, PostgresStore, Session, SessionConflictError


def _session(sid: str = "demo", **extra) -> Session:
    blob = {"id": sid, "v": 4, "version": 0, "data": {}, "runs": [], "claims": {}, "inputs": [], "metadata": {}}
    blob.update(extra)
    return Session.from_json(blob)


# --------------------------------------------------------------------------- MemoryStore


def test_memory_store_load_of_unknown_id_is_none():
    store = MemoryStore()
    assert store.load("demo") is None


def test_memory_store_save_zero_inserts_then_bumps_by_one():
    store = MemoryStore()
    saved = store.save(_session(), 0)
    assert saved.version == 1
    loaded = store.load("demo")
    assert loaded is not None and loaded.version == 1 and loaded.id == "demo"
    again = store.save(loaded, 1)
    assert again.version == 2
    assert store.load("demo").version == 2


def test_memory_store_save_zero_fails_when_a_row_exists():
    store = MemoryStore()
    store.save(_session(), 0)
    with pytest.raises(SessionConflictError) as info:
        store.save(_session(), 0)
    assert info.value.session_id == "demo"
    assert info.value.expected_version == 0
    assert info.value.actual_version == 1


def test_memory_store_update_with_stale_version_conflicts():
    store = MemoryStore()
    store.save(_session(), 0)
    store.save(store.load("demo"), 1)
    with pytest.raises(SessionConflictError) as info:
        store.save(_session(), 1)
    assert info.value.actual_version == 2
    assert store.load("demo").version == 2


def test_memory_store_save_does_not_mutate_its_argument():
    store = MemoryStore()
    session = _session()
    saved = store.save(session, 0)
    assert session.version == 0
    assert saved is not session


# --------------------------------------------------------------------------- PostgresStore

PAGE_COLUMNS = {
    "id": ("character varying", "NO", None, 255),
    "version": ("integer", "NO", None, None),
    "blob": ("jsonb", "NO", None, None),
    "created_at": ("timestamp with time zone", "NO", "now()", None),
    "updated_at": ("timestamp with time zone", "NO", "now()", None),
}


def _columns(conn, table: str) -> dict:
    rows = conn.execute(
        "SELECT column_name, data_type, is_nullable, column_default, character_maximum_length "
        "FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


def _primary_key(conn, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
        (f'"{table}"',),
    ).fetchall()
    return [r[0] for r in rows]


def test_postgres_initialize_creates_exactly_the_pages_table(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    cols = _columns(pg_conn, pg_table)
    assert list(cols) == ["id", "version", "blob", "created_at", "updated_at"]
    for name, (dtype, nullable, default, length) in PAGE_COLUMNS.items():
        got = cols[name]
        assert got[0] == dtype, name
        assert got[1] == nullable, name
        assert got[3] == length, name
        if default is None:
            assert got[2] is None, name
        else:
            assert got[2] is not None and default in got[2].lower(), name
    assert _primary_key(pg_conn, pg_table) == ["id"]
    # initialize() is "create when missing": a second call is harmless
    store.initialize()


def test_postgres_default_table_name_is_agent_sessions(pg_conn):
    store = PostgresStore(client=pg_conn)
    store.initialize()  # CREATE TABLE IF NOT EXISTS agent_sessions: harmless when it exists
    assert list(_columns(pg_conn, "agent_sessions"))[:3] == ["id", "version", "blob"]
    assert store.load("conformance-nobody-" + "x" * 8) is None


def test_postgres_tables_option_renames_the_table(pg_conn):
    pg_conn.execute('DROP TABLE IF EXISTS "ana_sessions"')
    try:
        store = PostgresStore(client=pg_conn, tables={"sessions": "ana_sessions"})
        store.initialize()
        assert list(_columns(pg_conn, "ana_sessions")) == ["id", "version", "blob", "created_at", "updated_at"]
        assert store.load("demo") is None
        store.save(_session(), 0)
        row = pg_conn.execute('SELECT version, blob FROM "ana_sessions" WHERE id = %s', ("demo",)).fetchone()
        assert row[0] == 1
        assert row[1]["id"] == "demo" and row[1]["v"] == 4 and row[1]["version"] == 1
    finally:
        pg_conn.execute('DROP TABLE IF EXISTS "ana_sessions"')


def test_postgres_with_a_connection_save_zero_is_insert_and_bumps(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    assert store.load("demo") is None
    saved = store.save(_session(), 0)
    assert saved.version == 1
    with pytest.raises(SessionConflictError) as info:
        store.save(_session(), 0)
    assert info.value.actual_version == 1
    loaded = store.load("demo")
    assert loaded.version == 1
    assert store.save(loaded, 1).version == 2
    with pytest.raises(SessionConflictError) as info:
        store.save(loaded, 1)
    assert (info.value.expected_version, info.value.actual_version) == (1, 2)
    # an update of a row that is gone: actual version unknown
    with pytest.raises(SessionConflictError) as info:
        store.save(_session("nobody"), 3)
    assert info.value.actual_version is None


def test_postgres_with_a_connection_pool(pg_dsn, pg_conn, pg_table):
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(pg_dsn, min_size=1, max_size=2, open=True)
    try:
        store = PostgresStore(client=pool, tables={"sessions": pg_table})
        store.initialize()
        assert store.load("demo") is None
        assert store.save(_session(), 0).version == 1
        assert store.load("demo").version == 1
        with pytest.raises(SessionConflictError):
            store.save(_session(), 0)
        # committed: another connection sees it
        assert pg_conn.execute(f'SELECT version FROM "{pg_table}"').fetchone()[0] == 1
    finally:
        pool.close()


def test_postgres_a_3x_row_throws_invalid_session(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    legacy = {"id": "old", "currentFlow": "triagem", "currentStep": "quem", "signals": {}, "data": {}}
    pg_conn.execute(
        f'INSERT INTO "{pg_table}" (id, version, blob) VALUES (%s, %s, %s::jsonb)', ("old", 3, json.dumps(legacy))
    )
    with pytest.raises(InvalidSessionError):
        store.load("old")


def test_postgres_round_trips_the_session_blob(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    session = _session(data={"nome": "Ana"}, lastUserAt="2026-09-21T10:00:00.000Z")
    store.save(session, 0)
    loaded = store.load("demo")
    assert loaded.data == {"nome": "Ana"}
    assert loaded.last_user_at == "2026-09-21T10:00:00.000Z"
    assert loaded.to_json()["lastUserAt"] == "2026-09-21T10:00:00.000Z"


# --------------------------------------------------------------------------- "behave the same"


@pytest.fixture(params=["memory", "postgres", "sqlite", "redis"])
def any_store(request):
    import uuid

    kind = request.param
    if kind == "memory":
        yield MemoryStore()
    elif kind == "postgres":
        store = PostgresStore(client=request.getfixturevalue("pg_conn"),
                              tables={"sessions": request.getfixturevalue("pg_table")})
        store.initialize()
        yield store
    elif kind == "sqlite":
        from falai_django import SQLiteStore

        store = SQLiteStore(client=":memory:")
        store.initialize()
        yield store
    else:
        from falai_django import RedisStore

        client = request.getfixturevalue("redis_client")
        prefix = f"conformance:{uuid.uuid4().hex[:8]}:"
        store = RedisStore(client=client, key_prefix=prefix)
        yield store
        for key in client.scan_iter(prefix + "*"):
            client.delete(key)


def test_every_store_keeps_the_same_contract(any_store):
    store = any_store
    assert store.load("demo") is None
    assert store.save(_session(), 0).version == 1
    with pytest.raises(SessionConflictError) as info:
        store.save(_session(), 0)
    assert info.value.actual_version == 1
    loaded = store.load("demo")
    assert loaded.version == 1
    assert store.save(loaded, 1).version == 2
    with pytest.raises(SessionConflictError) as info:
        store.save(loaded, 1)
    assert (info.value.expected_version, info.value.actual_version) == (1, 2)
    assert store.load("demo").version == 2


def test_postgres_with_a_plain_non_autocommit_connection_commits(pg_dsn, pg_conn, pg_table):
    import psycopg

    conn = psycopg.connect(pg_dsn)  # autocommit off, as psycopg.connect() gives it
    try:
        store = PostgresStore(client=conn, tables={"sessions": pg_table})
        store.initialize()
        store.save(_session(), 0)
        with pytest.raises(SessionConflictError):
            store.save(_session(), 0)
        assert store.load("demo").version == 1
        store.save(store.load("demo"), 1)
        # another connection sees every committed write
        assert pg_conn.execute(f'SELECT version FROM "{pg_table}" WHERE id = %s', ("demo",)).fetchone()[0] == 2
    finally:
        conn.close()
