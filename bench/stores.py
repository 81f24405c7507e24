"""Store bench: load+save round trips and compare-and-swap throughput, per store.

    .venv/bin/python bench/stores.py

For each store (Memory, SQLite file, PostgreSQL, Redis — the real servers from
FALAI_TEST_PG_DSN / FALAI_TEST_REDIS_URL, skipped with a note when unreachable):

- round trip: `load` then `save(session, loaded.version)` on one session; p50 / p99 in ms;
- CAS saves/s with 1, 4 and 16 concurrent writers, each on its own session (threads; the
  PostgreSQL store uses a pool with one connection per writer).

Beside them, on the same PostgreSQL database: a plain single-row `UPDATE` loop writing the
same blob text to a table of the same shape, with no version check and no session model
(`UPDATE t SET blob = %s::jsonb, updated_at = NOW() WHERE id = %s`), with 1, 4 and 16
writers. `postgres_save_vs_update_ratio` = PostgresStore saves/s ÷ plain UPDATEs/s with one
writer (target ≥ 0.7), taken as the median of three alternating store/plain pairs so that load
from other processes on the shared machine hits both sides; the ratios at 4 and 16 writers are
reported too.
Writes bench/results/stores.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from falai_django.engine.session import Session  # noqa: E402
from falai_django.stores.base import Store  # noqa: E402
from falai_django.stores.memory import MemoryStore  # noqa: E402
from falai_django.stores.postgres import PostgresStore  # noqa: E402
from falai_django.stores.redis import RedisStore  # noqa: E402
from falai_django.stores.sqlite import SQLiteStore  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "stores.json"
PG_DSN = os.environ.get("FALAI_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("FALAI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
WRITERS = (1, 4, 16)
TARGET_RATIO = 0.7


def typical_session(session_id: str) -> Session:
    """A mid-conversation session: the v4 fixture's shape (two runs, claims, inputs)."""
    blob = json.loads((ROOT / "tests" / "fixtures" / "legacy-blobs" / "v4.json").read_text())
    blob["id"] = session_id
    blob["version"] = 0
    return Session.from_json(blob, session_id)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def round_trips(store: Store, iterations: int) -> dict[str, float]:
    sid = f"rt-{uuid.uuid4().hex[:8]}"
    store.save(typical_session(sid), 0)
    samples = []
    for i in range(iterations):
        start = time.perf_counter()
        session = store.load(sid)
        session.data["n"] = i
        store.save(session, session.version)
        samples.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": round(statistics.median(samples), 3), "p99_ms": round(percentile(samples, 0.99), 3),
            "iterations": iterations}


def throughput(make_writer: Callable[[int], Callable[[], None]], writers: int, seconds: float) -> float:
    """Operations per second of `writers` threads, each looping its own writer for `seconds`."""
    loops = [make_writer(w) for w in range(writers)]
    counts = [0] * writers
    barrier = threading.Barrier(writers + 1)
    stop = threading.Event()

    def run(w: int) -> None:
        barrier.wait()
        op = loops[w]
        n = 0
        while not stop.is_set():
            op()
            n += 1
        counts[w] = n

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def cas_writer(store: Store) -> Callable[[int], Callable[[], None]]:
    def make(w: int) -> Callable[[], None]:
        sid = f"cas-{w}-{uuid.uuid4().hex[:8]}"
        state = {"session": store.save(typical_session(sid), 0)}

        def op() -> None:
            session = state["session"]
            state["session"] = store.save(session, session.version)

        return op

    return make


def bench_store(name: str, store: Store, iterations: int, seconds: float) -> dict[str, Any]:
    store.initialize()
    out: dict[str, Any] = round_trips(store, iterations)
    out["saves_per_s"] = {str(w): round(throughput(cas_writer(store), w, seconds)) for w in WRITERS}
    return out


def plain_update_writer(pool: Any, table: str) -> Callable[[int], Callable[[], None]]:
    """The baseline: a plain single-row UPDATE of the same blob text, no check, no model."""
    text = typical_session("x").to_json_text()

    def make(w: int) -> Callable[[], None]:
        sid = f"plain-{w}-{uuid.uuid4().hex[:8]}"
        with pool.connection() as conn:
            conn.execute(f"INSERT INTO {table} (id, version, blob) VALUES (%s, 1, %s::jsonb)", (sid, text))
        sql = f"UPDATE {table} SET blob = %s::jsonb, updated_at = NOW() WHERE id = %s"

        def op() -> None:
            with pool.connection() as conn:
                conn.execute(sql, (text, sid))

        return op

    return make


def paired_ratios(store: Store, plain: Callable[[int], Callable[[], None]], seconds: float,
                  rounds: int = 3) -> tuple[dict[str, float], dict[str, float]]:
    """Store saves/s ÷ plain UPDATEs/s per writer count, measured in alternating pairs (store,
    then plain, `rounds` times) so a load spike from other processes on the shared machine
    hits both sides; the median ratio of the pairs, and the median plain rate."""
    ratios: dict[str, float] = {}
    rates: dict[str, float] = {}
    for w in WRITERS:
        pairs = []
        for _ in range(rounds):
            saves = throughput(cas_writer(store), w, seconds)
            updates = throughput(plain, w, seconds)
            pairs.append((saves / updates, updates))
        ratios[str(w)] = round(statistics.median(r for r, _ in pairs), 3)
        rates[str(w)] = round(statistics.median(u for _, u in pairs))
    return ratios, rates


def main(iterations: int = 400, seconds: float = 1.5) -> dict[str, Any]:
    result: dict[str, Any] = {"bench": "stores", "writers": list(WRITERS), "stores": {}, "skipped": {}}
    result["stores"]["memory"] = bench_store("memory", MemoryStore(), iterations, seconds)

    with tempfile.TemporaryDirectory() as tmp:
        result["stores"]["sqlite"] = bench_store("sqlite", SQLiteStore(client=os.path.join(tmp, "s.db")),
                                                 iterations, seconds)

    try:
        import psycopg
        from psycopg_pool import ConnectionPool

        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except Exception as exc:  # noqa: BLE001
        result["skipped"]["postgres"] = f"PostgreSQL at {PG_DSN} unreachable: {exc}"
    else:
        table = f"bench_{uuid.uuid4().hex[:10]}"
        plain = f"{table}_plain"
        pool = ConnectionPool(PG_DSN, min_size=max(WRITERS), max_size=max(WRITERS),
                              kwargs={"autocommit": True}, open=True)
        pool.wait()
        try:
            store = PostgresStore(client=pool, tables={"sessions": table})
            PostgresStore(client=pool, tables={"sessions": plain}).initialize()
            result["stores"]["postgres"] = bench_store("postgres", store, iterations, seconds)
            ratios, baseline = paired_ratios(store, plain_update_writer(pool, plain), seconds / 3)
            result["postgres_plain_update_per_s"] = baseline
            result["postgres_save_vs_update_ratio_by_writers"] = ratios
            result["postgres_save_vs_update_ratio"] = ratios["1"]
        finally:
            with pool.connection() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
                conn.execute(f"DROP TABLE IF EXISTS {plain}")
            pool.close()

    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        result["skipped"]["redis"] = f"Redis at {REDIS_URL} unreachable: {exc}"
    else:
        prefix = f"bench:{uuid.uuid4().hex[:10]}:"
        try:
            result["stores"]["redis"] = bench_store("redis", RedisStore(client=client, key_prefix=prefix),
                                                    iterations, seconds)
        finally:
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
            client.close()

    for name, figures in result["stores"].items():  # flat keys for an aggregator
        result[f"{name}_p50_ms"] = figures["p50_ms"]
        result[f"{name}_p99_ms"] = figures["p99_ms"]
    ratio = result.get("postgres_save_vs_update_ratio")
    result["target_ratio"] = TARGET_RATIO
    result["meets_target"] = None if ratio is None else ratio >= TARGET_RATIO
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


def print_table(result: dict[str, Any]) -> None:
    header = f"{'store':<10}{'p50 ms':>9}{'p99 ms':>9}" + "".join(f"{f'{w} writer/s':>14}" for w in WRITERS)
    print("load+save round trip and CAS saves/s (distinct sessions per writer)")
    print(header)
    for name, f in result["stores"].items():
        print(f"{name:<10}{f['p50_ms']:>9.3f}{f['p99_ms']:>9.3f}"
              + "".join(f"{f['saves_per_s'][str(w)]:>14}" for w in WRITERS))
    if "postgres_plain_update_per_s" in result:
        base = result["postgres_plain_update_per_s"]
        print(f"{'pg UPDATE':<10}{'':>9}{'':>9}" + "".join(f"{base[str(w)]:>14}" for w in WRITERS))
        by = result["postgres_save_vs_update_ratio_by_writers"]
        print("postgres save / plain UPDATE: " + ", ".join(f"{w} writer(s) {by[str(w)]:.2f}" for w in WRITERS)
              + f" -> {result['postgres_save_vs_update_ratio']:.2f} (target ≥ {TARGET_RATIO}: "
              + ("met" if result["meets_target"] else "MISSED") + ")")
    for name, why in result["skipped"].items():
        print(f"skipped {name}: {why}")


if __name__ == "__main__":
    print_table(main())
    print(f"wrote {RESULTS.relative_to(ROOT)}")
