"""The store contract run against every store: Memory, SQLite, PostgreSQL, Redis, Mongo, Prisma,
OpenSearch.

PostgreSQL and Redis are the real servers (tests/conftest.py fixtures), never mocks. Mongo runs
on `mongomock` (pymongo's API in memory) and, when `FALAI_TEST_MONGO_URL` is set, on that real
server too; Prisma on a recording fake with prisma-client-py's names (tests/stores/prisma_fake.py),
through the plain methods on its sync interface, through `aload`/`asave` on its async one,
and over an SQLite file as Prisma's SQLite provider keeps the table (shared by processes, so
the four-process race runs on Prisma too). OpenSearch runs with the real `opensearch-py` clients
(`OpenSearch`, and `AsyncOpenSearch` through the async methods) against a fake cluster speaking
the REST wire format over HTTP (tests/stores/fake_opensearch.py; the process race reaches it
too) and, when `FALAI_TEST_OPENSEARCH_URL` is set, against that real cluster.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid

import mongomock
import pytest

from falai_django.engine.session import Session
from falai_django.stores.base import Store
from falai_django.stores.memory import MemoryStore
from falai_django.stores.mongo import MongoStore
from falai_django.stores.opensearch import OpenSearchStore
from falai_django.stores.postgres import PostgresStore
from falai_django.stores.prisma import PrismaStore
from falai_django.stores.redis import RedisStore
from falai_django.stores.sqlite import SQLiteStore

from .contract import *  # noqa: F403 - the suite itself
from .contract import StoreHarness
from .fake_opensearch import FakeOpenSearch
from .prisma_fake import FakeAsyncPrisma, FakePrisma, FakeTable, SQLiteTable

MONGO_URL = os.environ.get("FALAI_TEST_MONGO_URL", "")
OPENSEARCH_URL = os.environ.get("FALAI_TEST_OPENSEARCH_URL", "")


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


def mongo_harness(client, database: str, collection: str, spawn=None) -> StoreHarness:
    store = MongoStore(client=client, database_name=database, collections={"sessions": collection})
    raw = client.get_database(database).get_collection(collection)

    def put_raw(sid: str, text: str) -> None:
        raw.replace_one({"_id": sid}, {"_id": sid, "version": 1, "blob": text}, upsert=True)

    return StoreHarness(store=store, new_store=lambda: MongoStore(client=client, database_name=database,
                                                                   collections={"sessions": collection}),
                        put_raw=put_raw, delete=lambda sid: raw.delete_one({"_id": sid}), spawn=spawn,
                        extra={"client": client, "database": database})


def _as_stored(text: str):
    """A Json column hands back the parsed value; what does not parse stays text (a String column)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def prisma_harness(make_client, wrap=lambda store: store) -> StoreHarness:
    table = FakeTable()
    store = wrap(PrismaStore(prisma=make_client(table), tables={"sessions": "agentsession"}))

    def put_raw(sid: str, text: str) -> None:
        with table.lock:
            table.rows[sid] = {"id": sid, "version": 1, "blob": _as_stored(text), "createdAt": None,
                               "updatedAt": None}

    def delete(sid: str) -> None:
        with table.lock:
            table.rows.pop(sid, None)

    return StoreHarness(store=store,
                        new_store=lambda: wrap(PrismaStore(prisma=make_client(table),
                                                           tables={"sessions": "agentsession"})),
                        put_raw=put_raw, delete=delete, extra={"table": table})


def prisma_sqlite_harness(path: str) -> StoreHarness:
    """The Prisma fake over an SQLite file: what Prisma's SQLite provider does, shared by processes."""
    table = SQLiteTable(path)
    store = PrismaStore(prisma=FakePrisma(table))
    return StoreHarness(store=store, new_store=lambda: PrismaStore(prisma=FakePrisma(SQLiteTable(path))),
                        put_raw=table.put, delete=table.remove, spawn=("prisma-sqlite", path), extra={"table": table})


class LoopThreadDriven(Store):
    """Runs a store over an async client whose connections belong to one event loop
    (AsyncOpenSearch's aiohttp session): every call, plain or awaited from any loop, is run on
    the wrapper's own loop in its own thread."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="store-loop", daemon=True)
        self.thread.start()

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def load(self, session_id: str) -> Session | None:
        return self._call(self.inner.aload(session_id)).result(timeout=60)

    def save(self, session: Session, expected_version: int) -> Session:
        return self._call(self.inner.asave(session, expected_version)).result(timeout=60)

    def initialize(self) -> None:
        self._call(self.inner.ainitialize()).result(timeout=60)

    async def aload(self, session_id: str) -> Session | None:
        return await asyncio.wrap_future(self._call(self.inner.aload(session_id)))

    async def asave(self, session: Session, expected_version: int) -> Session:
        return await asyncio.wrap_future(self._call(self.inner.asave(session, expected_version)))

    async def ainitialize(self) -> None:
        await asyncio.wrap_future(self._call(self.inner.ainitialize()))

    def shut(self) -> None:
        self._call(self.inner.aclose()).result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def opensearch_harness(url: str, index: str, asynchronous: bool = False) -> StoreHarness:
    import opensearchpy

    raw = opensearchpy.OpenSearch(hosts=[url])
    drivers: list[LoopThreadDriven] = []

    def new_store() -> Store:
        if not asynchronous:
            return OpenSearchStore(opensearchpy.OpenSearch(hosts=[url]), indices={"sessions": index})
        driver = LoopThreadDriven(OpenSearchStore(opensearchpy.AsyncOpenSearch(hosts=[url]),
                                                  indices={"sessions": index}))
        drivers.append(driver)
        return driver

    store = new_store()
    store.initialize()

    def put_raw(sid: str, text: str) -> None:
        raw.index(index=index, id=sid, body={"id": sid, "version": 1, "blob": _as_stored(text)}, refresh=True)

    def delete(sid: str) -> None:
        raw.delete(index=index, id=sid, refresh=True, ignore=[404])

    def shut() -> None:
        for driver in drivers:
            driver.shut()
        raw.indices.delete(index=index, ignore=[404])
        raw.close()

    return StoreHarness(store=store, new_store=new_store, put_raw=put_raw, delete=delete,
                        spawn=("opensearch", url, index), extra={"shut": shut, "raw": raw, "index": index})


class AsyncDriven(Store):
    """Runs the contract's plain calls through a store's async methods (each in its own loop)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def load(self, session_id: str) -> Session | None:
        return asyncio.run(self.inner.aload(session_id))

    def save(self, session: Session, expected_version: int) -> Session:
        return asyncio.run(self.inner.asave(session, expected_version))

    async def aload(self, session_id: str) -> Session | None:
        return await self.inner.aload(session_id)

    async def asave(self, session: Session, expected_version: int) -> Session:
        return await self.inner.asave(session, expected_version)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                        pytest.param("redis", marks=pytest.mark.redis), "mongomock",
                        # the real server only when one is named (tests/stores/test_mongo.py says so loudly)
                        *(["mongo"] if MONGO_URL else []), "prisma", "prisma-async", "prisma-sqlite",
                        "opensearch", "opensearch-async",
                        # a real cluster only when one is named (tests/stores/test_opensearch.py says so loudly)
                        *(["opensearch-cluster"] if OPENSEARCH_URL else [])])
def store_factory(request, tmp_path):
    if request.param in ("opensearch", "opensearch-async"):
        with FakeOpenSearch() as fake:
            harness = opensearch_harness(fake.url, "ana_sessions", asynchronous=request.param == "opensearch-async")
            yield harness
            harness.extra["shut"]()
    elif request.param == "opensearch-cluster":
        harness = opensearch_harness(OPENSEARCH_URL, f"falai_test_{uuid.uuid4().hex[:10]}")
        yield harness
        harness.extra["shut"]()
    elif request.param == "mongomock":
        yield mongo_harness(mongomock.MongoClient(), "falai", "ana_sessions")
    elif request.param == "mongo":
        import pymongo

        client = pymongo.MongoClient(MONGO_URL)
        database = f"falai_test_{uuid.uuid4().hex[:10]}"
        yield mongo_harness(client, database, "ana_sessions", spawn=("mongo", MONGO_URL, database, "ana_sessions"))
        client.drop_database(database)
        client.close()
    elif request.param == "prisma":
        yield prisma_harness(FakePrisma)
    elif request.param == "prisma-async":
        yield prisma_harness(FakeAsyncPrisma, wrap=AsyncDriven)
    elif request.param == "prisma-sqlite":
        harness = prisma_sqlite_harness(str(tmp_path / "prisma.db"))
        yield harness
        harness.extra["table"].conn.close()
    elif request.param == "memory":
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
