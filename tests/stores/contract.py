"""The store contract, as test functions any backend can run (persistence note §1.3, §1.9).

A test module runs the whole suite for its backend(s) with

    from tests_stores_contract_import import *        # i.e. `from .contract import *`

    @pytest.fixture
    def store_factory(...) -> StoreHarness: ...

The fixture returns a `StoreHarness`: the initialised store, a way to build another store
over the same storage (one per thread), raw-row seams for corrupt rows, and optionally a
picklable `spawn` spec for the multi-process race. A Django ORM store plugs in the same way.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from falai_django.engine.errors import InvalidSessionError, SessionConflictError
from falai_django.engine.session import Session
from falai_django.stores.base import Store

__all__ = [
    "StoreHarness",
    "full_session",
    "test_a_3x_row_raises_invalid_session_stores_never_migrate",
    "test_a_bare_session_loads_with_exactly_the_blob_keys",
    "test_a_corrupt_row_raises_invalid_session",
    "test_a_row_whose_blob_id_differs_raises_invalid_session",
    "test_a_row_that_is_not_json_raises_invalid_session",
    "test_async_twins_load_and_save",
    "test_claim_keys_with_dots_survive",
    "test_concurrent_inserts_from_threads_exactly_one_wins",
    "test_concurrent_saves_from_processes_exactly_one_wins",
    "test_concurrent_saves_from_threads_exactly_one_wins",
    "test_two_writers_with_one_expected_version_exactly_one_wins",
    "test_expected_version_must_be_a_whole_number",
    "test_insert_over_an_existing_row_conflicts_with_actual_version",
    "test_insert_returns_a_new_session_at_version_1",
    "test_large_unicode_nested_session_round_trips",
    "test_load_of_a_missing_id_is_none",
    "test_save_does_not_mutate_its_argument",
    "test_save_returns_exactly_the_blob_keys",
    "test_stale_update_conflicts_with_actual_version",
    "test_update_against_a_deleted_row_conflicts_with_no_version",
    "test_update_against_a_missing_row_conflicts_with_no_version",
    "test_update_bumps_the_version_and_stores_new_data",
]

RACERS_THREADS = 16
RACERS_PROCESSES = 4
BLOB_KEYS = {"claims", "data", "id", "inputs", "metadata", "runs", "v", "version"}


@dataclass
class StoreHarness:
    """What the contract needs from a backend."""

    store: Store
    # another store object over the same storage (each racing thread gets its own)
    new_store: Callable[[], Store]
    # write raw blob text under an id, bypassing save (None: no raw seam, those tests skip)
    put_raw: Callable[[str, str], None] | None
    # make a row vanish
    delete: Callable[[str], None]
    # a picklable ("kind", *args) spec `build_store` turns into a store in a child process
    spawn: tuple[Any, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def build_store(spec: tuple[Any, ...]) -> Store:
    """A store from a spawn spec, inside a child process (each opens its own client)."""
    kind = spec[0]
    if kind == "postgres":
        import psycopg

        from falai_django.stores.postgres import PostgresStore

        return PostgresStore(client=psycopg.connect(spec[1], autocommit=True), tables={"sessions": spec[2]})
    if kind == "redis":
        import redis

        from falai_django.stores.redis import RedisStore

        return RedisStore(client=redis.Redis.from_url(spec[1]), key_prefix=spec[2])
    if kind == "sqlite":
        from falai_django.stores.sqlite import SQLiteStore

        return SQLiteStore(client=spec[1], tables={"sessions": spec[2]})
    if kind == "mongo":  # ("mongo", url, database, collection)
        import pymongo

        from falai_django.stores.mongo import MongoStore

        return MongoStore(client=pymongo.MongoClient(spec[1]), database_name=spec[2],
                          collections={"sessions": spec[3]})
    if kind == "opensearch":  # ("opensearch", url, index): the fake's HTTP server or a real cluster
        import opensearchpy

        from falai_django.stores.opensearch import OpenSearchStore

        return OpenSearchStore(opensearchpy.OpenSearch(hosts=[spec[1]]), indices={"sessions": spec[2]})
    if kind == "prisma-sqlite":  # ("prisma-sqlite", path): the Prisma fake over a shared SQLite file
        from falai_django.stores.prisma import PrismaStore
        from tests.stores.prisma_fake import FakePrisma, SQLiteTable

        return PrismaStore(prisma=FakePrisma(SQLiteTable(spec[1])))
    if kind == "django":  # ("django", {env}): the child sets up Django on the same database
        import os

        import django

        os.environ.update(spec[1])
        django.setup()
        from falai_django.stores.django import DjangoStore

        return DjangoStore()
    raise ValueError(f"unknown spawn spec {spec!r}")


def _process_racer(spec, blob_text, expected, barrier, results) -> None:  # runs in a child process
    store = build_store(spec)
    session = Session.from_json_text(blob_text)
    barrier.wait(timeout=60)
    try:
        saved = store.save(session, expected)
        results.put(("won", saved.data["writer"], saved.version))
    except SessionConflictError as exc:
        results.put(("conflict", exc.expected_version, exc.actual_version))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        results.put(("error", repr(exc), None))


# ---------------------------------------------------------------------------------------------
# sessions used by the suite
# ---------------------------------------------------------------------------------------------


def bare(session_id: str = "s1", **data: Any) -> Session:
    session = Session.fresh(session_id)
    session.data.update(data)
    return session


def full_session(session_id: str = "full") -> Session:
    """Every optional feature: user/assistant times, history, a waiting run with nested trigger
    payload and input, a suspended asking run, a claim key with dots, unicode everywhere."""
    payload = {"pedido": {"itens": [{"sku": "tênis-42", "qtd": 2, "preço": 199.9}], "obs": None}, "vip": True}
    return Session.from_json({
        "id": session_id, "v": 4, "version": 0,
        "data": {"nome": "João Ñandú 🚀", "tamanho": "11-50", "endereco": None, "tags": ["a", "b"],
                 "nested": {"deep": {"deeper": [1, 2.5, {"x": "ü"}]}}, "confirmado": False},
        "runs": [
            {"id": "evento#stage:456:T", "flowId": "evento", "anchor": "lead:456", "dedupeKey": "evento:lead:456:",
             "stepId": "w1", "status": "waiting",
             "trigger": {"kind": "event", "key": "stage:456:T", "payload": payload},
             "input": payload, "hop": 1, "startedAt": "2026-09-20T10:00:00.000Z",
             "waiting": {"kind": "event", "key": "evento#stage:456:T:w1:1760954400000",
                         "until": "2026-10-20T10:00:00.000Z", "setAt": "2026-09-20T10:00:00.000Z",
                         "event": "pagamento_confirmado"},
             "asked": {"nome": 1}, "visits": {"p1": 1, "w1": 1},
             "outcomes": [{"runId": "evento#stage:456:T", "flowId": "evento", "stepId": "w1",
                           "key": "evento#stage:456:T:w1:1", "kind": "wait", "status": "waiting",
                           "code": "awaiting-event", "message": "The run waits for an event.",
                           "detail": "pagamento_confirmado", "until": "2026-10-20T10:00:00.000Z",
                           "at": "2026-09-20T10:00:00.000Z"}]},
            {"id": "triagem#wamid.HBgN.abc", "flowId": "triagem", "anchor": session_id,
             "dedupeKey": f"triagem:{session_id}:", "stepId": "porte", "status": "suspended",
             "trigger": {"kind": "message", "key": "wamid.HBgN.abc"}, "hop": 0,
             "startedAt": "2026-09-20T09:00:00.000Z", "suspendedAt": "2026-09-20T10:00:00.000Z",
             "asked": {}, "visits": {"porte": 2}, "outcomes": []},
            {"id": "fim#x", "flowId": "fim", "anchor": session_id, "dedupeKey": f"fim:{session_id}:",
             "stepId": None, "status": "running", "trigger": {"kind": "start", "key": "x"}, "hop": 0,
             "startedAt": "2026-09-20T09:00:00.000Z", "staying": True, "asked": {}, "visits": {}, "outcomes": []},
        ],
        "claims": {f"triagem:{session_id}:": {"at": "2026-09-20T09:00:00.000Z"},
                   "sempre:full:wamid.HBgN.abc": {"at": "2026-09-20T09:30:00.000Z"},
                   "evento:lead:456:": {"at": "2026-09-20T10:00:00.000Z"}},
        "inputs": ["wamid.HBgN.abc", "m2"],
        "lastUserAt": "2026-09-20T10:02:00.000Z",
        "lastAssistantAt": "2026-09-20T10:02:05.123Z",
        "history": [{"role": "user", "content": "olá, ação!"}, {"role": "assistant", "content": "Oi 😊"}],
        "metadata": {"workspaceId": "ws_demo", "canal": "whatsapp", "números": [1, 2, 3]},
    })


def large_session(session_id: str = "large") -> Session:
    """A big blob: 12 runs with 50 outcome lines each, long unicode text, deep nesting."""
    session = full_session(session_id)
    template = session.runs[0].to_json()
    runs = []
    for i in range(12):
        run = json.loads(json.dumps(template))
        run["id"] = f"f{i}#k{i}"
        run["dedupeKey"] = f"f{i}:lead:{i}:"
        run["outcomes"] = [dict(template["outcomes"][0], key=f"f{i}#k{i}:s:{j}", detail="ção 中文 " * 5)
                           for j in range(50)]
        runs.append(run)
    blob = session.to_json()
    blob["runs"] = runs
    blob["data"]["texto"] = "Olá, mundo! Ünïcödé ✓ 漢字 " * 200
    blob["data"]["arvore"] = {"a": {"b": {"c": {"d": {"e": [{"f": [1, [2, [3, {"g": None}]]]}]}}}}}
    blob["claims"].update({f"sempre:lead:{i}:wamid.{i}.x": {"at": f"2026-09-20T10:{i % 60:02d}:00.000Z"}
                           for i in range(120)})
    return Session.from_json(blob)


def expected_json(session: Session, version: int) -> dict[str, Any]:
    return dict(session.to_json(), version=version)


# ---------------------------------------------------------------------------------------------
# the contract
# ---------------------------------------------------------------------------------------------


def test_load_of_a_missing_id_is_none(store_factory: StoreHarness) -> None:
    assert store_factory.store.load("nobody-here") is None


def test_insert_returns_a_new_session_at_version_1(store_factory: StoreHarness) -> None:
    store = store_factory.store
    fresh = bare("s1", nome="Ana")
    saved = store.save(fresh, 0)
    assert saved.version == 1
    assert saved is not fresh
    assert fresh.version == 0
    loaded = store.load("s1")
    assert isinstance(loaded, Session)
    assert loaded.to_json() == expected_json(fresh, 1)
    assert saved.to_json() == loaded.to_json()


def test_insert_over_an_existing_row_conflicts_with_actual_version(store_factory: StoreHarness) -> None:
    store = store_factory.store
    store.save(bare("s1", nome="original"), 0)
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1", nome="intruder"), 0)
    assert caught.value.session_id == "s1"
    assert caught.value.expected_version == 0
    assert caught.value.actual_version == 1
    assert store.load("s1").data == {"nome": "original"}


def test_update_bumps_the_version_and_stores_new_data(store_factory: StoreHarness) -> None:
    store = store_factory.store
    v1 = store.save(bare("s1", nome="Ana"), 0)
    v1.data["empresa"] = "Acme"
    v2 = store.save(v1, 1)
    assert v2.version == 2
    loaded = store.load("s1")
    assert loaded.version == 2
    assert loaded.data == {"nome": "Ana", "empresa": "Acme"}


def test_stale_update_conflicts_with_actual_version(store_factory: StoreHarness) -> None:
    store = store_factory.store
    v1 = store.save(bare("s1", n=1), 0)
    store.save(v1, 1)
    stale = v1.copy_deep()
    stale.data["n"] = 99
    with pytest.raises(SessionConflictError) as caught:
        store.save(stale, 1)
    assert (caught.value.session_id, caught.value.expected_version, caught.value.actual_version) == ("s1", 1, 2)
    loaded = store.load("s1")
    assert loaded.version == 2
    assert loaded.data == {"n": 1}


def test_update_against_a_missing_row_conflicts_with_no_version(store_factory: StoreHarness) -> None:
    store = store_factory.store
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("ghost"), 3)
    assert caught.value.expected_version == 3
    assert caught.value.actual_version is None
    assert "is gone from the store" in str(caught.value)
    assert store.load("ghost") is None


def test_update_against_a_deleted_row_conflicts_with_no_version(store_factory: StoreHarness) -> None:
    store = store_factory.store
    v1 = store.save(bare("s1"), 0)
    store_factory.delete("s1")
    with pytest.raises(SessionConflictError) as caught:
        store.save(v1, 1)
    assert caught.value.actual_version is None
    assert store.load("s1") is None


def test_save_does_not_mutate_its_argument(store_factory: StoreHarness) -> None:
    store = store_factory.store
    session = full_session("s1")
    before = session.to_json()
    saved = store.save(session, 0)
    assert session.to_json() == before
    assert session.version == 0
    assert saved.version == 1


def test_save_returns_exactly_the_blob_keys(store_factory: StoreHarness) -> None:
    saved = store_factory.store.save(bare("s1"), 0)
    assert set(saved.to_json()) == BLOB_KEYS
    full = store_factory.store.save(full_session("s2"), 0)
    assert set(full.to_json()) == BLOB_KEYS | {"lastUserAt", "lastAssistantAt", "history"}


def test_a_bare_session_loads_with_exactly_the_blob_keys(store_factory: StoreHarness) -> None:
    store_factory.store.save(bare("s1"), 0)
    loaded = store_factory.store.load("s1").to_json()
    assert set(loaded) == BLOB_KEYS
    assert loaded == {"id": "s1", "v": 4, "version": 1, "data": {}, "runs": [], "claims": {},
                      "inputs": [], "metadata": {}}


def test_large_unicode_nested_session_round_trips(store_factory: StoreHarness) -> None:
    store = store_factory.store
    for session in (full_session("full"), large_session("large")):
        store.save(session, 0)
        loaded = store.load(session.id)
        assert loaded.to_json() == expected_json(session, 1)
        assert loaded.runs[0].trigger.payload["pedido"]["itens"][0]["sku"] == "tênis-42"
        # and once more through an update
        loaded.data["nome"] = "Zoë ✓"
        store.save(loaded, 1)
        again = store.load(session.id)
        assert again.version == 2
        assert again.to_json() == dict(loaded.to_json(), version=2)


def test_claim_keys_with_dots_survive(store_factory: StoreHarness) -> None:
    session = bare("s1")
    session.claims["sempre:s1:wamid.HBgN.abc"] = {"at": "2026-09-20T09:30:00.000Z"}
    session.claims["a.b.c:s1:"] = {"at": "2026-09-20T09:31:00.000Z"}
    store_factory.store.save(session, 0)
    assert store_factory.store.load("s1").claims == session.claims


def test_expected_version_must_be_a_whole_number(store_factory: StoreHarness) -> None:
    with pytest.raises(TypeError):
        store_factory.store.save(bare("s1"), True)
    with pytest.raises(TypeError):
        store_factory.store.save(bare("s1"), "0")
    with pytest.raises(ValueError):
        store_factory.store.save(bare("s1"), -1)
    assert store_factory.store.load("s1") is None


def test_async_twins_load_and_save(store_factory: StoreHarness) -> None:
    store = store_factory.store

    async def scenario() -> None:
        assert await store.aload("s1") is None
        saved = await store.asave(bare("s1", nome="Ana"), 0)
        assert saved.version == 1
        with pytest.raises(SessionConflictError):
            await store.asave(bare("s1"), 0)
        assert (await store.aload("s1")).data == {"nome": "Ana"}
        await store.ainitialize()

    asyncio.run(scenario())


def _raw_seam(store_factory: StoreHarness) -> Callable[[str, str], None]:
    if store_factory.put_raw is None:
        pytest.skip("this store has no raw seam")
    return store_factory.put_raw


def test_a_corrupt_row_raises_invalid_session(store_factory: StoreHarness) -> None:
    _raw_seam(store_factory)("bad", json.dumps({"nope": True}))
    with pytest.raises(InvalidSessionError) as caught:
        store_factory.store.load("bad")
    assert caught.value.session_id == "bad"
    assert "v is missing, expected 4" in str(caught.value)


def test_a_3x_row_raises_invalid_session_stores_never_migrate(store_factory: StoreHarness, legacy_blobs_dir) -> None:
    text = (legacy_blobs_dir / "prospectar-midflow.json").read_text()
    sid = json.loads(text)["id"]
    _raw_seam(store_factory)(sid, text)
    with pytest.raises(InvalidSessionError, match="v is missing, expected 4"):
        store_factory.store.load(sid)


def test_a_row_whose_blob_id_differs_raises_invalid_session(store_factory: StoreHarness) -> None:
    _raw_seam(store_factory)("row-id", bare("other-id").to_json_text())
    with pytest.raises(InvalidSessionError, match='id is "other-id", expected "row-id"'):
        store_factory.store.load("row-id")


def test_a_row_that_is_not_json_raises_invalid_session(store_factory: StoreHarness) -> None:
    if store_factory.extra.get("raw_is_json_column"):
        pytest.skip("the blob column only holds valid JSON")
    _raw_seam(store_factory)("garbled", "{not json")
    with pytest.raises(InvalidSessionError, match="blob is not valid JSON"):
        store_factory.store.load("garbled")


def _race(store_factory: StoreHarness, expected: int, prepare: Callable[[], Session | None],
          racers: int = RACERS_THREADS) -> list[Any]:
    base = prepare()
    stores = [store_factory.new_store() for _ in range(racers)]
    barrier = threading.Barrier(racers)
    results: list[Any] = [None] * racers

    def racer(i: int) -> None:
        session = (base.copy_deep() if base is not None else bare("race"))
        session.data["writer"] = i
        barrier.wait(timeout=60)
        try:
            saved = stores[i].save(session, expected)
            results[i] = ("won", i, saved.version)
        except SessionConflictError as exc:
            results[i] = ("conflict", exc.expected_version, exc.actual_version)
        except Exception as exc:  # noqa: BLE001
            results[i] = ("error", repr(exc), None)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_concurrent_saves_from_threads_exactly_one_wins(store_factory: StoreHarness) -> None:
    store = store_factory.store
    results = _race(store_factory, 1, lambda: store.save(bare("race", writer=-1), 0))
    winners = [r for r in results if r[0] == "won"]
    losers = [r for r in results if r[0] == "conflict"]
    assert [r for r in results if r[0] == "error"] == []
    assert len(winners) == 1
    assert len(losers) == RACERS_THREADS - 1
    assert all(r == ("conflict", 1, 2) for r in losers)
    stored = store.load("race")
    assert stored.version == 2
    assert stored.data["writer"] == winners[0][1]


def test_two_writers_with_one_expected_version_exactly_one_wins(store_factory: StoreHarness) -> None:
    """The host's own race: two workers loaded version 1 and both save; one wins, one reloads."""
    store = store_factory.store
    results = _race(store_factory, 1, lambda: store.save(bare("race", writer=-1), 0), racers=2)
    assert [r for r in results if r[0] == "error"] == []
    assert sorted(r[0] for r in results) == ["conflict", "won"]
    assert ("conflict", 1, 2) in results
    winner = next(r for r in results if r[0] == "won")
    assert winner[2] == 2
    assert store.load("race").data["writer"] == winner[1]


def test_concurrent_inserts_from_threads_exactly_one_wins(store_factory: StoreHarness) -> None:
    results = _race(store_factory, 0, lambda: None)
    winners = [r for r in results if r[0] == "won"]
    assert [r for r in results if r[0] == "error"] == []
    assert len(winners) == 1
    assert sorted(r for r in results if r[0] == "conflict") == [("conflict", 0, 1)] * (RACERS_THREADS - 1)
    assert store_factory.store.load("race").data["writer"] == winners[0][1]


def test_concurrent_saves_from_processes_exactly_one_wins(store_factory: StoreHarness) -> None:
    if store_factory.spawn is None:
        pytest.skip("this store's storage is not shared across processes")
    store = store_factory.store
    base = store.save(bare("race", writer=-1), 0)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS_PROCESSES)
    queue = ctx.Queue()
    processes = []
    for i in range(RACERS_PROCESSES):
        session = base.copy_deep()
        session.data["writer"] = i
        process = ctx.Process(target=_process_racer,
                              args=(store_factory.spawn, session.to_json_text(), 1, barrier, queue))
        process.start()
        processes.append(process)
    results = [queue.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert [r for r in results if r[0] == "error"] == []
    winners = [r for r in results if r[0] == "won"]
    assert len(winners) == 1
    assert [r for r in results if r[0] == "conflict"] == [("conflict", 1, 2)] * (RACERS_PROCESSES - 1)
    stored = store.load("race")
    assert stored.version == 2
    assert stored.data["writer"] == winners[0][1]
