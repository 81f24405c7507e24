"""The store contract run against every store: Memory, SQLite, PostgreSQL and Redis.

PostgreSQL and Redis are the real servers (tests/conftest.py fixtures), never mocks.
"""

from __future__ import annotations

import uuid

import pytest

from falai_django.stores.memory import MemoryStore
from falai_django.stores.postgres import PostgresStore
from falai_django.stores.redis import RedisStore
from falai_django.stores.sqlite import SQLiteStore

from .contract import *  # noqa: F403 - the suite itself
from .contract import StoreHarness


def memory_harness() -> StoreHarness:
    store = MemoryStore()
    return StoreHarness(store=store, new_store=lambda: store, put_raw=lambda sid, text: store.put_raw(sid, text),
                        delete=store.delete)


def sqlite_harness(tmp_path) -> StoreHarness:
    path = str(tmp_path / "sessions.db")
    table = "ana_sessions"
    store = SQLiteStore(client=path, tables={"sessions": table})
    store.initialize()

    def put_raw(sid: str, text: str) -> None:
        with store._connection() as conn:
            conn.execute(f"INSERT OR REPLACE INTO {table} (id, version, blob, created_at, updated_at) "
                         "VALUES (?, 1, ?, 'x', 'x')", (sid, text))

    def delete(sid: str) -> None:
        with store._connection() as conn:
            conn.execute(f"DELETE FROM {table} WHERE id = ?", (sid,))

    return StoreHarness(store=store, new_store=lambda: SQLiteStore(client=path, tables={"sessions": table}),
                        put_raw=put_raw, delete=delete, spawn=("sqlite", path, table))


def postgres_harness(pg_dsn, pg_conn, pg_table) -> StoreHarness:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(pg_dsn, min_size=1, max_size=17, kwargs={"autocommit": True}, open=True)
    store = PostgresStore(client=pool, tables={"sessions": pg_table})
    store.initialize()

    def put_raw(sid: str, text: str) -> None:
        pg_conn.execute(f"INSERT INTO {pg_table} (id, version, blob) VALUES (%s, 1, %s::jsonb) "
                        "ON CONFLICT (id) DO UPDATE SET blob = EXCLUDED.blob", (sid, text))

    def delete(sid: str) -> None:
        pg_conn.execute(f"DELETE FROM {pg_table} WHERE id = %s", (sid,))

    harness = StoreHarness(store=store, new_store=lambda: store, put_raw=put_raw, delete=delete,
                           spawn=("postgres", pg_dsn, pg_table), extra={"raw_is_json_column": True})
    harness.extra["pool"] = pool
    return harness


def redis_harness(redis_url, redis_client) -> StoreHarness:
    import redis

    prefix = f"test:{uuid.uuid4().hex[:10]}:"
    store = RedisStore(client=redis_client, key_prefix=prefix)

    def put_raw(sid: str, text: str) -> None:
        redis_client.hset(store.key(sid), mapping={"version": "1", "blob": text})

    return StoreHarness(store=store, new_store=lambda: RedisStore(client=redis.Redis.from_url(redis_url),
                                                                     key_prefix=prefix),
                        put_raw=put_raw, delete=lambda sid: redis_client.delete(store.key(sid)),
                        spawn=("redis", redis_url, prefix), extra={"prefix": prefix})


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                        pytest.param("redis", marks=pytest.mark.redis)])
def store_factory(request, tmp_path):
    if request.param == "memory":
        yield memory_harness()
    elif request.param == "sqlite":
        yield sqlite_harness(tmp_path)
    elif request.param == "postgres":
        harness = postgres_harness(request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_conn"),
                                   request.getfixturevalue("pg_table"))
        yield harness
        harness.extra["pool"].close()
    else:
        client = request.getfixturevalue("redis_client")
        harness = redis_harness(request.getfixturevalue("redis_url"), client)
        yield harness
        keys = list(client.scan_iter(match=harness.extra["prefix"] + "*"))
        if keys:
            client.delete(*keys)
