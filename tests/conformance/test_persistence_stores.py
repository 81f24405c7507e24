"""The Store contract (persistence note §1.1–§1.6, §1.9) against MemoryStore, SQLiteStore and the
REAL PostgreSQL and Redis servers. Written from the spec alone."""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
import uuid
from pathlib import Path

import pytest

from falai_django import (
    InvalidSessionError,
    MemoryStore,
    PostgresStore,
    RedisStore,
    Session,
    SessionConflictError,
    SQLiteStore,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-blobs"
LEGACY = json.loads((FIX / "prospectar-midflow.json").read_text(encoding="utf-8"))
V4 = json.loads((FIX / "v4.json").read_text(encoding="utf-8"))


def bare(sid):
    return Session.from_json({"id": sid, "v": 4, "version": 0, "data": {}, "runs": [], "claims": {}, "inputs": [],
                              "metadata": {}})


def full(sid):
    blob = copy.deepcopy(V4)
    blob["id"] = sid
    blob["version"] = 0
    blob["history"] = [{"role": "user", "content": "oi"}]
    blob["runs"][1]["trigger"]["payload"] = {"deal": {"id": 456, "stage": "won"}}
    blob["runs"][1]["input"] = {"deal": {"id": 456}}
    blob["claims"]["sempre:full:wamid.HBgN.abc"] = {"at": "2026-09-20T10:00:00.000Z"}
    return Session.from_json(blob)


# ----------------------------------------------------------------------------- harnesses

class Harness:
    concurrent = True

    def __init__(self, store, put_raw, make_store=None):
        self.store = store
        self.put_raw = put_raw
        self.make_store = make_store or (lambda: store)


@pytest.fixture
def memory_h():
    store = MemoryStore()

    def put_raw(sid, text, version=1):
        store.put_raw(sid, text, version)

    return Harness(store, put_raw)


@pytest.fixture
def sqlite_h(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(client=str(path), tables={"sessions": "conversas"})
    store.initialize()

    def put_raw(sid, text, version=1):
        con = sqlite3.connect(path)
        con.execute("INSERT OR REPLACE INTO conversas (id, version, blob, created_at, updated_at) VALUES (?,?,?,?,?)",
                    (sid, version, text, "x", "x"))
        con.commit()
        con.close()

    return Harness(store, put_raw, lambda: SQLiteStore(client=str(path), tables={"sessions": "conversas"}))


@pytest.fixture
def pg_h(pg_dsn, pg_conn, pg_table):
    import psycopg

    conns = []

    def make():
        c = psycopg.connect(pg_dsn, autocommit=True)
        conns.append(c)
        return PostgresStore(client=c, tables={"sessions": pg_table})

    store = make()
    store.initialize()

    def put_raw(sid, text, version=1):
        pg_conn.execute(f'INSERT INTO "{pg_table}" (id, version, blob) VALUES (%s, %s, %s::jsonb) '
                        "ON CONFLICT (id) DO UPDATE SET blob = EXCLUDED.blob, version = EXCLUDED.version",
                        (sid, version, text))

    yield Harness(store, put_raw, make)
    for c in conns:
        c.close()


@pytest.fixture
def redis_h(redis_client):
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = RedisStore(client=redis_client, key_prefix=prefix)

    def put_raw(sid, text, version=1):
        redis_client.hset(f"{prefix}session:{sid}", mapping={"version": str(version), "blob": text})

    yield Harness(store, put_raw)
    for key in redis_client.scan_iter(f"{prefix}*"):
        redis_client.delete(key)


@pytest.fixture(params=["memory", "sqlite", "pg", "redis"])
def h(request):
    return request.getfixturevalue(f"{request.param}_h")


# ----------------------------------------------------------------------------- contract

def test_load_unknown_is_none(h):
    assert h.store.load("nobody") is None


def test_insert_returns_new_object_with_version_1(h):
    s = full("s1")
    saved = h.store.save(s, 0)
    assert saved is not s
    assert saved.version == 1
    assert s.version == 0
    assert h.store.load("s1").to_json() == {**s.to_json(), "version": 1}


def test_save_returns_exactly_blob_keys(h):
    saved = h.store.save(bare("s1"), 0)
    assert sorted(saved.to_json()) == ["claims", "data", "id", "inputs", "metadata", "runs", "v", "version"]


def test_update_bumps_and_persists(h):
    v1 = h.store.save(bare("s1"), 0)
    v1.data["nome"] = "Ana"
    v2 = h.store.save(v1, 1)
    assert v2.version == 2 and v1.version == 1
    assert h.store.load("s1").data == {"nome": "Ana"}


def test_stale_save_conflict(h):
    v1 = h.store.save(bare("s1"), 0)
    h.store.save(v1, 1)
    with pytest.raises(SessionConflictError) as exc:
        h.store.save(v1, 1)
    e = exc.value
    assert (e.session_id, e.expected_version, e.actual_version) == ("s1", 1, 2)
    assert str(e) == ('[SessionConflictError] Session "s1" was modified concurrently: expected version 1, found 2. '
                      "Reload the session and retry the operation.")
    assert h.store.load("s1").version == 2


def test_insert_over_existing_conflict(h):
    first = bare("s1")
    first.data["x"] = "original"
    h.store.save(first, 0)
    other = bare("s1")
    other.data["x"] = "other"
    with pytest.raises(SessionConflictError) as exc:
        h.store.save(other, 0)
    assert exc.value.actual_version == 1 and exc.value.expected_version == 0
    assert "expected version 0, found 1" in str(exc.value)
    assert h.store.load("s1").data == {"x": "original"}


def test_missing_row_conflict_is_gone(h):
    with pytest.raises(SessionConflictError) as exc:
        h.store.save(bare("s9"), 3)
    e = exc.value
    assert e.actual_version is None and e.expected_version == 3
    assert str(e).startswith('[SessionConflictError] Session "s9" is gone from the store: it was at version 3 '
                             "and has since been deleted or expired.")
    assert h.store.load("s9") is None


def test_concurrent_saves_one_winner(h):
    v1 = h.store.save(bare("s1"), 0)
    results: list = []
    barrier = threading.Barrier(5)

    def worker(i):
        store = h.make_store()
        s = v1.copy_deep() if hasattr(v1, "copy_deep") else copy.deepcopy(v1)
        s.data["who"] = i
        barrier.wait()
        try:
            store.save(s, 1)
            results.append(("ok", i))
        except SessionConflictError as exc:
            results.append(("conflict", exc.actual_version))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [r for r in results if r[0] == "ok"]
    assert len(wins) == 1
    assert all(r == ("conflict", 2) for r in results if r[0] == "conflict")
    assert h.store.load("s1").data["who"] == wins[0][1]


def test_concurrent_inserts_one_winner(h):
    results: list = []
    barrier = threading.Barrier(2)

    def worker(i):
        store = h.make_store()
        barrier.wait()
        try:
            store.save(bare("s2"), 0)
            results.append("ok")
        except SessionConflictError:
            results.append("conflict")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["conflict", "ok"]


def test_bare_round_trip_keys(h):
    h.store.save(bare("s1"), 0)
    out = h.store.load("s1").to_json()
    assert sorted(out) == ["claims", "data", "id", "inputs", "metadata", "runs", "v", "version"]


def test_full_round_trip(h):
    s = full("s1")
    h.store.save(s, 0)
    loaded = h.store.load("s1").to_json()
    expected = {**s.to_json(), "version": 1}
    assert loaded == expected
    assert loaded["runs"][1]["trigger"]["payload"] == {"deal": {"id": 456, "stage": "won"}}
    assert "sempre:full:wamid.HBgN.abc" in loaded["claims"]


def test_corrupt_rows_raise(h):
    h.put_raw("c1", json.dumps({"nope": True}))
    with pytest.raises(InvalidSessionError) as exc:
        h.store.load("c1")
    assert exc.value.session_id == "c1"
    legacy = dict(LEGACY, id="c2")
    h.put_raw("c2", json.dumps(legacy))
    with pytest.raises(InvalidSessionError) as exc:
        h.store.load("c2")
    assert "v is missing, expected 4" in str(exc.value)
    other = dict(V4)
    h.put_raw("c3", json.dumps(other))
    with pytest.raises(InvalidSessionError) as exc:
        h.store.load("c3")
    assert 'id is "conv_v4", expected "c3"' in str(exc.value)


def test_unparseable_text_raises(h):
    if isinstance(h.store, PostgresStore):
        pytest.skip("a JSONB column cannot hold invalid JSON")
    h.put_raw("c4", "{not json")
    with pytest.raises(InvalidSessionError) as exc:
        h.store.load("c4")
    assert "blob is not valid JSON" in str(exc.value)


def test_save_does_not_mutate_argument(h):
    s = full("s1")
    before = s.to_json()
    h.store.save(s, 0)
    assert s.to_json() == before


async def _async_round(store):
    await store.ainitialize()
    saved = await store.asave(bare("a1"), 0)
    loaded = await store.aload("a1")
    return saved.version, loaded.version


def test_async_twins(h):
    import asyncio

    assert asyncio.run(_async_round(h.store)) == (1, 1)


# ----------------------------------------------------------------------------- PostgreSQL specifics

def test_pg_table_ddl(pg_dsn, pg_conn, pg_table):
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as c:
        store = PostgresStore(client=c, tables={"sessions": pg_table})
        store.initialize()
        store.initialize()  # idempotent
    rows = pg_conn.execute(
        "SELECT column_name, data_type, character_maximum_length, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position", (pg_table,)).fetchall()
    assert [r[0] for r in rows] == ["id", "version", "blob", "created_at", "updated_at"]
    types = {r[0]: r[1] for r in rows}
    assert types == {"id": "character varying", "version": "integer", "blob": "jsonb",
                     "created_at": "timestamp with time zone", "updated_at": "timestamp with time zone"}
    assert {r[0]: r[2] for r in rows}["id"] == 255
    assert all(r[3] == "NO" for r in rows)
    defaults = {r[0]: r[4] for r in rows}
    assert "now()" in defaults["created_at"] and "now()" in defaults["updated_at"]
    pk = pg_conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = %s::regclass AND i.indisprimary", (pg_table,)).fetchall()
    assert [r[0] for r in pk] == ["id"]


def test_pg_default_table_name(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as c:
        store = PostgresStore(client=c)
        assert getattr(store, "table", "agent_sessions") == "agent_sessions"


def test_pg_initialize_never_alters(pg_conn, pg_dsn, pg_table):
    import psycopg

    pg_conn.execute(f'CREATE TABLE "{pg_table}" (id TEXT PRIMARY KEY, state JSONB)')
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        PostgresStore(client=c, tables={"sessions": pg_table}).initialize()
    cols = [r[0] for r in pg_conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (pg_table,)).fetchall()]
    assert cols == ["id", "state"]


def test_pg_row_holds_version_and_jsonb_blob(pg_h, pg_conn, pg_table):
    pg_h.store.save(full("s1"), 0)
    version, blob, created, updated = pg_conn.execute(
        f'SELECT version, blob, created_at, updated_at FROM "{pg_table}" WHERE id = %s', ("s1",)).fetchone()
    assert version == 1
    assert blob["version"] == 1 and blob["id"] == "s1" and blob["v"] == 4
    assert created is not None and updated is not None


def test_pg_3x_row_is_invalid_session(pg_h):
    pg_h.put_raw("legacy", json.dumps(dict(LEGACY, id="legacy")), 12)
    with pytest.raises(InvalidSessionError) as exc:
        pg_h.store.load("legacy")
    assert str(exc.value).startswith('[InvalidSessionError] stored session "legacy" is unreadable: '
                                     "v is missing, expected 4")


def test_pg_with_pool(pg_dsn, pg_table):
    pool_mod = pytest.importorskip("psycopg_pool")
    with pool_mod.ConnectionPool(pg_dsn, min_size=1, max_size=2, open=True) as pool:
        store = PostgresStore(client=pool, tables={"sessions": pg_table})
        store.initialize()
        assert store.save(bare("p1"), 0).version == 1
        assert store.load("p1").version == 1


# ----------------------------------------------------------------------------- Redis specifics

def test_redis_hash_layout_and_ttl(redis_client):
    prefix = f"x{uuid.uuid4().hex[:6]}:"
    store = RedisStore(client=redis_client, key_prefix=prefix, session_ttl=60)
    try:
        store.save(bare("s1"), 0)
        key = f"{prefix}session:s1"
        h = {k.decode(): v.decode() for k, v in redis_client.hgetall(key).items()}
        assert h["version"] == "1"
        assert set(h) == {"version", "blob", "createdAt", "updatedAt"}
        assert json.loads(h["blob"])["version"] == 1
        assert 0 < redis_client.ttl(key) <= 60
        created = h["createdAt"]
        store.save(store.load("s1"), 1)
        h2 = {k.decode(): v.decode() for k, v in redis_client.hgetall(key).items()}
        assert h2["createdAt"] == created and h2["version"] == "2"
    finally:
        for k in redis_client.scan_iter(f"{prefix}*"):
            redis_client.delete(k)


def test_redis_default_prefix_and_ttl_zero(redis_client):
    sid = f"d{uuid.uuid4().hex[:8]}"
    store = RedisStore(client=redis_client)
    try:
        store.save(bare(sid), 0)
        assert redis_client.exists(f"agent:session:{sid}")
        assert 0 < redis_client.ttl(f"agent:session:{sid}") <= 604800
    finally:
        redis_client.delete(f"agent:session:{sid}")
    store0 = RedisStore(client=redis_client, session_ttl=0)
    try:
        store0.save(bare(sid), 0)
        assert redis_client.ttl(f"agent:session:{sid}") == -1
    finally:
        redis_client.delete(f"agent:session:{sid}")


def test_redis_hash_without_blob_is_invalid(redis_h, redis_client):
    redis_client.hset(f"{redis_h.store.key_prefix}session:nb", mapping={"version": "1"})
    with pytest.raises(InvalidSessionError):
        redis_h.store.load("nb")


def test_redis_decoded_responses(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    prefix = f"dr{uuid.uuid4().hex[:6]}:"
    store = RedisStore(client=client, key_prefix=prefix)
    try:
        store.save(bare("s1"), 0)
        with pytest.raises(SessionConflictError) as exc:
            store.save(bare("s1"), 0)
        assert exc.value.actual_version == 1
        with pytest.raises(SessionConflictError) as exc:
            store.save(bare("s2"), 4)
        assert exc.value.actual_version is None
        assert store.load("s1").version == 1
    finally:
        for k in client.scan_iter(f"{prefix}*"):
            client.delete(k)
        client.close()


# ----------------------------------------------------------------------------- SQLite specifics

def test_sqlite_table_shape(tmp_path):
    con = sqlite3.connect(tmp_path / "x.db", check_same_thread=False)
    store = SQLiteStore(client=con)
    store.initialize()
    cols = [(r[1], r[2], r[3], r[5]) for r in con.execute("PRAGMA table_info(agent_sessions)")]
    assert cols == [("id", "TEXT", 0, 1), ("version", "INTEGER", 1, 0), ("blob", "TEXT", 1, 0),
                    ("created_at", "TEXT", 1, 0), ("updated_at", "TEXT", 1, 0)]
    store.save(bare("s1"), 0)
    blob, = con.execute("SELECT blob FROM agent_sessions WHERE id = 's1'").fetchone()
    assert json.loads(blob)["version"] == 1


def test_redis_bare_eval_client(redis_client):
    """A client with only hgetall / eval / quit (upstream's RedisClient shape) works too."""

    class Bare:
        def __init__(self, real):
            self.real = real
            self.evals = []

        def hgetall(self, key):
            return self.real.hgetall(key)

        def eval(self, script, numkeys, *args):
            self.evals.append((numkeys, *args))
            return self.real.eval(script, numkeys, *args)

        def quit(self):
            self.quit_called = True

    prefix = f"b{uuid.uuid4().hex[:6]}:"
    bare_client = Bare(redis_client)
    store = RedisStore(client=bare_client, key_prefix=prefix, session_ttl=60)
    try:
        saved = store.save(bare("s1"), 0)
        numkeys, key, expected, nxt, blob, now, ttl = bare_client.evals[0]
        assert (numkeys, key, expected, nxt, ttl) == (1, f"{prefix}session:s1", "0", "1", "60")
        assert json.loads(blob) == saved.to_json() and now.endswith("Z")
        with pytest.raises(SessionConflictError) as exc:
            store.save(bare("s1"), 0)
        assert exc.value.actual_version == 1
        assert store.load("s1").version == 1
        store.disconnect()
        assert bare_client.quit_called
    finally:
        for k in redis_client.scan_iter(f"{prefix}*"):
            redis_client.delete(k)
