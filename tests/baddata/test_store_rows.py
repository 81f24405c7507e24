"""Malformed session rows, in every store: a loud `InvalidSessionError`, never a fresh session.

For each row of `rows.py` and each store (Memory, SQLite, PostgreSQL, Redis; the Django store
is covered with the host in test_host_rows.py):

- `load` raises `InvalidSessionError` carrying the row's session id and a reason;
- the row is byte-identical afterwards (a load never "repairs" or rewrites it);
- the host loop's first-turn save (`save(fresh, 0)`) cannot replace it: it conflicts.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from falai_django import InvalidSessionError, Session, SessionConflictError
from falai_django.stores.memory import MemoryStore
from falai_django.stores.postgres import PostgresStore
from falai_django.stores.redis import RedisStore
from falai_django.stores.sqlite import SQLiteStore

from .rows import ALL_ROWS, JSON_ONLY, SID, UPSTREAM_LOADS


@dataclass
class Raw:
    store: object
    put: Callable[[str, str], None]
    get: Callable[[str], object]  # the row as stored: (version, blob bytes/text)


def memory_raw(tmp_path) -> Raw:
    store = MemoryStore()
    return Raw(store, lambda sid, text: store.put_raw(sid, text, version=3), lambda sid: store._rows.get(sid))


def sqlite_raw(tmp_path) -> Raw:
    path = str(tmp_path / "rows.db")
    store = SQLiteStore(client=path)
    store.initialize()
    conn = sqlite3.connect(path, isolation_level=None)

    def put(sid: str, text: str) -> None:
        conn.execute("INSERT OR REPLACE INTO agent_sessions (id, version, blob, created_at, updated_at) "
                     "VALUES (?, 3, ?, 'c', 'u')", (sid, text))

    def get(sid: str):
        return conn.execute("SELECT version, blob, created_at, updated_at FROM agent_sessions WHERE id = ?",
                            (sid,)).fetchone()

    return Raw(store, put, get)


@pytest.fixture(scope="module")
def pg_rows_table(request):
    dsn = request.getfixturevalue("pg_dsn")
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)
    table = f"baddata_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(client=conn, tables={"sessions": table})
    store.initialize()
    yield conn, store, table
    conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    conn.close()


def postgres_raw(request) -> Raw:
    conn, store, table = request.getfixturevalue("pg_rows_table")
    conn.execute(f"DELETE FROM {table}")

    def put(sid: str, text: str) -> None:
        conn.execute(f"INSERT INTO {table} (id, version, blob) VALUES (%s, 3, %s::jsonb)", (sid, text))

    def get(sid: str):
        return conn.execute(f"SELECT version, blob::text, created_at, updated_at FROM {table} WHERE id = %s",
                            (sid,)).fetchone()

    return Raw(store, put, get)


def redis_raw(request) -> Raw:
    client = request.getfixturevalue("redis_client")
    prefix = f"baddata:{uuid.uuid4().hex[:10]}:"
    store = RedisStore(client=client, key_prefix=prefix, session_ttl=60)
    request.addfinalizer(lambda: client.delete(store.key(SID)))

    def put(sid: str, text: str) -> None:
        client.hset(store.key(sid), mapping={"version": "3", "blob": text, "createdAt": "c", "updatedAt": "u"})

    def get(sid: str):
        return client.hgetall(store.key(sid))

    return Raw(store, put, get)


STORES = {
    "memory": lambda request, tmp_path: memory_raw(tmp_path),
    "sqlite": lambda request, tmp_path: sqlite_raw(tmp_path),
    "postgres": lambda request, tmp_path: postgres_raw(request),
    "redis": lambda request, tmp_path: redis_raw(request),
}


def _cases():
    for store in STORES:
        rows = JSON_ONLY if store == "postgres" else ALL_ROWS  # jsonb cannot hold text that is not JSON
        marks = [pytest.mark.postgres] if store == "postgres" else [pytest.mark.redis] if store == "redis" else []
        for name, text in rows:
            yield pytest.param(store, text, id=f"{store}-{name}", marks=marks)


@pytest.mark.parametrize(("store_name", "text"), list(_cases()))
def test_a_malformed_row_loads_as_invalid_session_and_stays_untouched(request, tmp_path, store_name, text):
    raw = STORES[store_name](request, tmp_path)
    raw.put(SID, text)
    before = raw.get(SID)

    with pytest.raises(InvalidSessionError) as caught:
        raw.store.load(SID)
    assert caught.value.session_id == SID
    assert caught.value.reason
    assert str(caught.value).startswith("[InvalidSessionError]") and SID in str(caught.value)
    assert raw.get(SID) == before

    # What a host does when it wrongly treats the error as "no session": a first-turn save.
    with pytest.raises(SessionConflictError):
        raw.store.save(Session.fresh(SID), 0)
    assert raw.get(SID) == before


@pytest.mark.parametrize("name,text", ALL_ROWS, ids=[n for n, _ in ALL_ROWS])
def test_from_json_text_refuses_every_malformed_row(name, text):
    with pytest.raises(InvalidSessionError) as caught:
        Session.from_json_text(text, SID)
    assert caught.value.session_id == SID


@pytest.mark.parametrize("name,text", JSON_ONLY, ids=[n for n, _ in JSON_ONLY])
def test_from_json_refuses_every_malformed_blob(name, text):
    import json

    with pytest.raises(InvalidSessionError):
        Session.from_json(json.loads(text), SID)


@pytest.mark.parametrize("name,text", JSON_ONLY, ids=[n for n, _ in JSON_ONLY])
def test_a_turn_never_runs_on_a_malformed_blob(name, text):
    """The blob never reaches `turn()` as a session: the host must load it through a store first,
    and a hand-built Session refuses it too (no fresh conversation is ever made from it)."""
    import json

    from falai_django import migrate_session

    blob = json.loads(text)
    if isinstance(blob, dict) and "v" not in blob and isinstance(blob.get("data"), dict):
        # no `v` and a data object: migrate_session reads it as 3.x, by design (the explicit recipe)
        migrated = migrate_session(blob, session_id=SID, flow_id_of=lambda x: x)
        assert migrated.version == 0 and migrated.id == SID
        return
    with pytest.raises(InvalidSessionError):
        migrate_session(blob, session_id=SID, flow_id_of=lambda x: x)


def _upstream_cases():
    for store in STORES:
        marks = [pytest.mark.postgres] if store == "postgres" else [pytest.mark.redis] if store == "redis" else []
        for name, text in UPSTREAM_LOADS:
            yield pytest.param(store, text, id=f"{store}-{name}", marks=marks)


@pytest.mark.parametrize(("store_name", "text"), list(_upstream_cases()))
def test_a_row_upstream_loads_loads_in_every_store_and_saves_back_as_read(request, tmp_path, store_name, text):
    import json

    raw = STORES[store_name](request, tmp_path)
    raw.put(SID, text)
    stored = json.loads(text)

    loaded = raw.store.load(SID)
    assert loaded.to_json() == stored
    saved = raw.store.save(loaded, 3)
    assert saved.version == 4
    again = raw.store.load(SID)
    assert again.to_json() == {**stored, "version": 4}
    assert again.copy_deep().to_json() == again.to_json()


@pytest.mark.parametrize("name,text", UPSTREAM_LOADS, ids=[n for n, _ in UPSTREAM_LOADS])
def test_from_json_and_from_json_text_load_what_upstream_loads(name, text):
    import json

    blob = json.loads(text)
    for session in (Session.from_json_text(text, SID), Session.from_json(json.loads(text), SID)):
        assert session.to_json() == blob
        assert json.loads(session.to_json_text()) == blob
        assert session.to_blob(9) == {**blob, "version": 9}
