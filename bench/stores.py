"""Store bench: load+save round trips and compare-and-swap throughput, per store, and the two
PostgreSQL stores against a plain one-row UPDATE of the same jsonb.

    .venv/bin/python bench/stores.py [--quick]

For each store (Memory, SQLite file, PostgreSQL, Redis — the real servers from
FALAI_TEST_PG_DSN / FALAI_TEST_REDIS_URL, skipped with a note when unreachable):

- round trip: `load` then `save(session, loaded.version)` on one session; p50 / p99 in ms;
- CAS saves/s with 1, 4 and 16 concurrent writers, each on its own session (threads, in this
  process: a quick look at each backend, GIL included).

The ratio figures use WRITER PROCESSES, not threads: with threads the GIL serialises the Python
side (the session model, the ORM), so a store whose Python work is heavier would look bounded
by the interpreter rather than by what it asks of the database, and the plain UPDATE beside it
would share the same lock. 1, 4 and 16 spawned processes (bench.hostbench.pool), each writing
its own row:

- `djangostore_vs_update_<n>`: `DjangoStore.save(session, version)` (the app's sessions table on
  database `falai_bench`, through Django's connection) ÷ a plain
  `UPDATE <sessions> SET blob = %s::jsonb, updated_at = NOW() WHERE id = %s` of the same blob
  text on another row of the same table, through a Django cursor (target ≥ 0.7 at 1, 4, 16);
- `postgresstore_vs_update_<n>`: `PostgresStore.save` on a psycopg autocommit connection ÷ the
  plain UPDATE on the same connection, same table (`postgres_save_vs_update_ratio` = the one-writer
  figure, issue 4's target ≥ 0.7).

Each ratio is the median of store / plain pairs (three by default, windows of 2 s, the order
flipped every other pair), so a load spike from other processes on the shared machine hits both
sides.
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

from bench.hostbench import quick  # noqa: E402
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


def process_ratios(rounds: int, seconds: float) -> dict[str, Any]:
    """Store saves/s ÷ plain UPDATEs/s with 1, 4 and 16 writer processes, for DjangoStore and
    PostgresStore, in alternating pairs (`rounds` of them per figure)."""
    import psycopg

    from bench.hostbench import bench_dsn, ensure_database, environment, progress
    from bench.hostbench.pool import Pool

    ensure_database()
    dsn = bench_dsn()
    table = f"bench_pgstore_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        PostgresStore(client=conn, tables={"sessions": table}).initialize()
    rates: dict[str, dict[str, list[float]]] = {}
    ratios: dict[str, dict[str, list[float]]] = {"django": {}, "postgres": {}}
    prefix = f"bench-store-{uuid.uuid4().hex[:6]}-"
    try:
        with Pool(max(WRITERS), "bench.hostbench.clients:init_django", env=environment()) as pool:
            pool.call("bench.hostbench.clients:migrate", workers=1)
            pool.call("bench.hostbench.clients:prepare_writer", {"store": "django", "prefix": prefix})
            pool.call("bench.hostbench.clients:prepare_writer",
                      {"store": "postgres", "prefix": prefix, "dsn": dsn, "table": table})
            try:
                for w in WRITERS:
                    for store in ("django", "postgres"):
                        for r in range(rounds):
                            ops = {}
                            for mode in (("store", "plain") if r % 2 == 0 else ("plain", "store")):
                                done = pool.timed("bench.hostbench.clients:write_loop", seconds, workers=w,
                                                  store=store, mode=mode)
                                ops[mode] = sum(done) / seconds
                                rates.setdefault(f"{store}_{mode}", {}).setdefault(str(w), []).append(ops[mode])
                            ratios[store].setdefault(str(w), []).append(ops["store"] / ops["plain"])
                        progress(f"stores: {store} {w} writer(s): ratio "
                                 f"{statistics.median(ratios[store][str(w)]):.2f}")
            finally:
                pool.call("bench.hostbench.clients:cleanup_writers")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    out: dict[str, Any] = {"writer_processes": list(WRITERS), "pair_rounds": rounds, "pair_window_s": seconds}
    for store, label in (("django", "djangostore"), ("postgres", "postgresstore")):
        for w in WRITERS:
            out[f"{label}_vs_update_{w}"] = round(statistics.median(ratios[store][str(w)]), 3)
        out[f"{label}_saves_per_s"] = {k: round(statistics.median(v)) for k, v in rates[f"{store}_store"].items()}
        out[f"{label}_plain_update_per_s"] = {k: round(statistics.median(v))
                                             for k, v in rates[f"{store}_plain"].items()}
        out[f"{label}_ratios_each"] = {k: [round(x, 3) for x in v] for k, v in ratios[store].items()}
    return out


def main(iterations: int | None = None, seconds: float | None = None) -> dict[str, Any]:
    iterations = iterations or (100 if quick() else 400)
    seconds = seconds or (0.5 if quick() else 1.5)
    rounds, window = (1, 0.5) if quick() else (3, 2.0)
    result: dict[str, Any] = {"bench": "stores", "writers": list(WRITERS), "stores": {}, "skipped": {},
                              "quick": quick()}
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
        pool = ConnectionPool(PG_DSN, min_size=max(WRITERS), max_size=max(WRITERS),
                              kwargs={"autocommit": True}, open=True)
        pool.wait()
        try:
            store = PostgresStore(client=pool, tables={"sessions": table})
            result["stores"]["postgres"] = bench_store("postgres", store, iterations, seconds)
        finally:
            with pool.connection() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            pool.close()
        result.update(process_ratios(rounds, window))
        result["postgres_save_vs_update_ratio"] = result["postgresstore_vs_update_1"]

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
    result["target_ratio"] = TARGET_RATIO
    django_ratios = [result.get(f"djangostore_vs_update_{w}") for w in WRITERS]
    result["meets_target"] = None if None in django_ratios else min(django_ratios) >= TARGET_RATIO
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    return result


def print_table(result: dict[str, Any]) -> None:
    header = f"{'store':<10}{'p50 ms':>9}{'p99 ms':>9}" + "".join(f"{f'{w} thread/s':>14}" for w in WRITERS)
    print("load+save round trip and CAS saves/s (threads, distinct sessions per writer)")
    print(header)
    for name, f in result["stores"].items():
        print(f"{name:<10}{f['p50_ms']:>9.3f}{f['p99_ms']:>9.3f}"
              + "".join(f"{f['saves_per_s'][str(w)]:>14}" for w in WRITERS))
    if "djangostore_vs_update_1" in result:
        print("writer processes: saves/s and plain UPDATEs/s (same driver, same table), ratio (median of pairs)")
        print(f"{'':<24}" + "".join(f"{f'{w} process(es)':>16}" for w in WRITERS))
        for label in ("djangostore", "postgresstore"):
            saves, plain = result[f"{label}_saves_per_s"], result[f"{label}_plain_update_per_s"]
            print(f"{label + ' save/s':<24}" + "".join(f"{saves[str(w)]:>16}" for w in WRITERS))
            print(f"{'  plain UPDATE/s':<24}" + "".join(f"{plain[str(w)]:>16}" for w in WRITERS))
            print(f"{'  ratio':<24}" + "".join(f"{result[f'{label}_vs_update_{w}']:>16.2f}" for w in WRITERS)
                  + ("   (target ≥ 0.7)" if label == "djangostore" else ""))
    for name, why in result["skipped"].items():
        print(f"skipped {name}: {why}")


if __name__ == "__main__":
    if "--quick" in sys.argv:
        os.environ["FALAI_BENCH_QUICK"] = "1"
    main()
    print(f"wrote {RESULTS.relative_to(ROOT)}")
