"""Host bench on PostgreSQL: what one inbound message turn costs the database, what the host adds
per turn, and host throughput with 2 and 4 concurrent client processes beside `pgbench`.

    .venv/bin/python bench/host.py [--quick]

Three parts, each in a child process of its own (its own Django set-up):

1. SQL count (`sql`), with the demo agent: `project.settings` as it is (FALAI of the demo:
   `project.agents.ana`, the offline provider without GEMINI_API_KEY, django-q2's ORM broker,
   the send hand-off the settings pick: a broker row, or a NOTIFY) on a
   PRIVATE PostgreSQL cluster (initdb'd for the bench; `pg_stat_statements` loaded,
   `log_statement = all`, autovacuum off). For each measured turn (an inbound message on an
   existing conversation; Ana answers and re-arms her ten-minute silence wake, checked):
   - `sql_statements_per_turn`: statements the server executed for the bench database during the
     turn, from `pg_stat_statements` (every statement of a multi-statement string counts; the
     health check `SELECT 1`, django-q2's broker INSERT, everything), minus transaction control
     (BEGIN / COMMIT / ROLLBACK), reported apart as `transaction_control_per_turn`, and minus the
     foreign-key checks the server runs itself at COMMIT (Django's foreign keys are DEFERRABLE
     INITIALLY DEFERRED, so pg_stat_statements lists them as top-level), reported apart as
     `fk_checks_per_turn`. A writable CTE is one statement; `sql_write_operations_per_turn`
     counts the INSERT / UPDATE / DELETE parts inside them too;
   - `round_trips_per_turn`: requests the server logged (one simple query or one extended-
     protocol execute each), BEGIN and COMMIT included;
   - `commits_per_turn`: the `pg_stat_database.xact_commit` delta of the bench database (every
     transaction that commits, read-only ones included: an autocommit SELECT is one). The turn's
     own connection calls `pg_stat_force_next_flush()` (through the raw driver, so Django's health
     check is not triggered; on a one-row table, since a backend with no table stats pending skips
     the flush) before and after the turn; the extra commit of that call is taken out by a
     calibration cycle with no turn in it. `write_commits_per_turn`: the COMMIT records the turn
     left in the WAL (pg_waldump), i.e. the commits that wrote;
   - `sql_turn_statements`: the statements of the first measured turn in order (from the log, cut
     to 160 characters) with a label `VERB table`; `sql_by_kind`: the labels counted.
   The same with django-q2's Redis broker (`FALAI_REDIS_URL`, Redis database 9) is reported under
   `sql_redis_broker`.
2. Latency (`latency`), bench settings (`bench.hostbench`: zero-latency scripted provider, null
   sender, ORM broker): `host_p50_ms` / `host_p99_ms` = time in `host.handle` minus the time in
   `agent.turn`; `turns_per_s` one process sequential; `http_turns_per_s` through DRF (Django's
   test client, token auth, no socket).
3. Throughput (`load`): 2 and 4 client PROCESSES (not threads: the GIL), each calling
   `host.handle` round robin over 50 conversations of its own (distinct conversations, bench
   settings), against the shared PostgreSQL server (database `falai_bench`), interleaved with
   `pgbench` at the same client count: `pgbench -n -c N -j N -T 5 -f script` where the script is
   one UPDATE of a 1 KB jsonb on a table of N rows, one row per client (`WHERE id = :client_id`).
   Before any round is timed, every conversation takes STEADY_TURNS turns, so the rounds at 2 and
   at 4 clients run on conversations of the same, steady size (the session at the spec's caps, the
   transcript past HISTORY_LIMIT); `load_grow_turns` says how many turns that took. Then the
   app's tables and pgbench's get `VACUUM (ANALYZE)`, what autovacuum gives a running server's
   grown tables (`load_vacuum_analyze_after_growth`); without it the planner works from whatever
   statistics the tables had before they were emptied.
   pgbench 5 s, host 5 s (then host first, and so on), three rounds per client count; `host_vs_pgbench_2` / `_4` = the median
   of the rounds' host turns/s ÷ pgbench tps. No worker or dispatcher runs, so the sends are
   not made: a turn ends at its commit and its hand-off (a broker row, or a NOTIFY).
   Where the host's CPU goes (Linux): `load_client_cpu_ms_per_turn_N` (the client processes),
   `load_server_cpu_ms_per_turn_N` (every `postgres` process), `load_idle_share_N` (the machine's
   idle + iowait share while the host ran), medians over the rounds.

Writes bench/results/host.json; `main()` returns the same dict. `--quick`: fewer turns, 2 s
windows, one round.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "host.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.hostbench import quick  # noqa: E402

SQL_DATABASE = "falai_sql"
SQL_TURNS = 5
REDIS_BROKER_URL = os.environ.get("FALAI_BENCH_REDIS_BROKER_URL", "redis://127.0.0.1:6379/9")
MARK = "/* falai-bench */"
CLIENTS = (2, 4)
CONVERSATIONS_PER_CLIENT = 50
# Turns each load conversation takes before any round is timed: at two transcript items a turn,
# 100 turns pass the default HISTORY_LIMIT (200); the run's caps (50 inputs / outcomes) come first.
STEADY_TURNS = 100


def _sizes() -> dict[str, Any]:
    if quick():
        return {"turns": 100, "http_turns": 50, "window_s": 2.0, "rounds": 1, "conversations": 20}
    return {"turns": 600, "http_turns": 300, "window_s": 5.0, "rounds": 3, "conversations": CONVERSATIONS_PER_CLIENT}


# ---------------------------------------------------------------------------------------------
# 1. SQL statements, round trips and commits per turn (demo agent, private cluster)
# ---------------------------------------------------------------------------------------------


def _label(statement: str) -> str:
    """`VERB table` for a statement (the first table after FROM / INTO / UPDATE); a writable CTE
    lists its parts: `WITH [INSERT falai_turn, SELECT agent_sessions, ...]`."""
    from bench.hostbench.sqltext import is_transaction_control, strip_literals

    text = " ".join(strip_literals(statement).split())
    if is_transaction_control(text):
        return text.split()[0].upper()
    verb = text.split()[0].upper() if text else "?"
    if re.fullmatch(r"SELECT 1", text, re.IGNORECASE):
        return "SELECT 1 (health check)"
    if verb == "SELECT" and re.search(r"pg_(?:try_)?advisory", text):
        return "SELECT advisory lock"
    if verb == "WITH":
        parts = []
        for m in re.finditer(r'\b(INSERT\s+INTO|DELETE\s+FROM|(?<!DO )UPDATE|FROM)\s+"?([A-Za-z_][\w.]*)"?', text,
                             re.IGNORECASE):
            kind = m.group(1).split()[0].upper()
            kind = "SELECT" if kind == "FROM" else kind
            if m.group(2).lower() in ("s", "t", "h", "w", "x", "only", "jsonb_to_recordset", "unnest"):
                continue  # the CTE's own names, the recordset of a bulk insert
            label = f"{kind} {m.group(2)}"
            if label not in parts and not (kind == "SELECT" and any(p.endswith(f" {m.group(2)}") for p in parts)):
                parts.append(label)
        if "pg_notify" in text:
            parts.append("NOTIFY")
        return f"WITH [{', '.join(parts)}]"
    found = re.search(r'\b(?:FROM|INTO|UPDATE)\s+"?([A-Za-z_][A-Za-z0-9_.]*)"?', text, re.IGNORECASE)
    return f"{verb} {found.group(1)}" if found else verb


def measure_sql() -> dict[str, Any]:
    import psycopg

    from bench.hostbench.pgcluster import PrivateCluster, unavailable
    from bench.hostbench.sqltext import (
        is_fk_check,
        is_transaction_control,
        logged_requests,
        split_statements,
        write_operations,
    )

    reason = unavailable()
    if reason:
        raise RuntimeError(f"the SQL count needs a private PostgreSQL cluster: {reason}")
    broker = os.environ.get("FALAI_BENCH_SQL_BROKER", "orm")
    with PrivateCluster() as pg:
        dsn = pg.create_database(SQL_DATABASE)
        meter = psycopg.connect(pg.dsn("postgres"), autocommit=True)
        meter.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        oid = meter.execute("SELECT oid FROM pg_database WHERE datname = %s", (SQL_DATABASE,)).fetchone()[0]

        # The demo's own settings, on the private cluster.
        os.environ.update(DJANGO_SETTINGS_MODULE="project.settings", DATABASE_URL=dsn)
        os.environ.pop("GEMINI_API_KEY", None)
        if broker == "redis":
            os.environ["FALAI_REDIS_URL"] = REDIS_BROKER_URL
        else:
            os.environ.pop("FALAI_REDIS_URL", None)
        from bench.hostbench import setup_django

        setup_django(truncate=False)
        import logging

        logging.getLogger("django-q").setLevel(logging.WARNING)  # no "Enqueued" line per turn on stderr
        from django.conf import settings
        from django.db import connection

        from bench.hostbench import models as host_models
        from falai_django import host

        models = host_models()
        sids = [f"551199{n:07d}" for n in range(SQL_TURNS + 1)]
        for sid in sids:  # each conversation exists (Ana asked), and the code paths are warm
            host.handle(sid, {"message": "oi", "id": f"{sid}.1"})
        host.handle(sids[0], {"message": "sou a Ana, da ACME", "id": f"{sids[0]}.2"})

        # The flush reads a table of its own: a backend with no pending table stats skips the
        # flush, and its commit counters with it.
        with psycopg.connect(dsn, autocommit=True) as setup:  # one row: an empty table is not counted
            setup.execute("CREATE TABLE IF NOT EXISTS falai_bench_flush (x integer)")
            setup.execute("INSERT INTO falai_bench_flush VALUES (1)")

        def flush() -> None:
            connection.ensure_connection()
            connection.connection.execute(f"SELECT pg_stat_force_next_flush() FROM falai_bench_flush {MARK}")
            time.sleep(0.05)

        def commits() -> tuple[int, int]:
            meter.execute("SELECT pg_stat_clear_snapshot()")
            row = meter.execute("SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datid = %s",
                                (oid,)).fetchone()
            return int(row[0]), int(row[1])

        def lsn() -> str:
            return meter.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]

        def cycle(run) -> dict[str, Any]:
            flush()
            before = commits()
            meter.execute("SELECT pg_stat_statements_reset()")
            offset, start = pg.log_size(), lsn()
            outcome = run()
            end = lsn()
            flush()
            after = commits()
            rows = meter.execute("SELECT query, calls FROM pg_stat_statements WHERE dbid = %s", (oid,)).fetchall()
            rows = [(q, c) for q, c in rows if "falai-bench" not in q and "pg_stat_force_next_flush" not in q]
            requests = [r["sql"] for r in logged_requests(pg.log_text(offset), SQL_DATABASE) if MARK not in r["sql"]]
            return {"outcome": outcome, "commits": after[0] - before[0], "rollbacks": after[1] - before[1],
                    "wal_commits": pg.wal_commits(start, end), "pss": rows, "requests": requests}

        calibration = [cycle(lambda: None) for _ in range(3)]
        base_commits = statistics.median(c["commits"] for c in calibration)
        if any(c["pss"] or c["requests"] for c in calibration):
            raise RuntimeError(f"statements seen with no turn running: {calibration}")

        turns = []
        for n, sid in enumerate(sids[1:]):
            measured = cycle(lambda sid=sid, n=n: host.handle(sid, {"message": "sou a Ana, da ACME",
                                                                      "id": f"{sid}.m{n}"}))
            result = measured["outcome"]
            if result.status != "done" or not getattr(result.result, "schedule", None):
                raise RuntimeError(f"the measured turn must change the session and write a wake: {result}")
            wakes = models["wake"].objects.filter(**{models["wake_session"]: sid}).exclude(state="done")
            if not wakes.exists():
                raise RuntimeError(f"no pending wake row for {sid} after the turn")
            statements = [s for sql in measured["requests"] for s in split_statements(sql)]
            fk_checks = sum(c for q, c in measured["pss"] if is_fk_check(q))
            total = sum(c for _, c in measured["pss"]) - fk_checks
            control = sum(c for q, c in measured["pss"] if is_transaction_control(q))
            turns.append({
                "statements": total - control,
                "transaction_control": control,
                "fk_checks": fk_checks,
                "writes": sum(write_operations(s) for s in statements),
                "round_trips": len(measured["requests"]),
                "commits": measured["commits"] - base_commits,
                "wal_commits": measured["wal_commits"],
                "rollbacks": measured["rollbacks"],
                "logged_statements": len(statements),
                "log": statements,
                "broker": sum(c for q, c in measured["pss"] if "django_q" in q),
                "wake_keys": [e.key for e in result.result.schedule],
            })
        meter.close()
        from django.db import connections

        connections.close_all()
        if broker == "redis":
            _clear_redis_queue(settings)

    first = turns[0]
    by_kind: dict[str, int] = {}
    for statement in first["log"]:
        by_kind[_label(statement)] = by_kind.get(_label(statement), 0) + 1

    def med(key: str) -> float:
        return statistics.median(t[key] for t in turns)

    return {
        "sql_statements_per_turn": med("statements"),
        "sql_statements_with_transaction_control_per_turn": med("statements") + med("transaction_control"),
        "transaction_control_per_turn": med("transaction_control"),
        "round_trips_per_turn": med("round_trips"),
        "commits_per_turn": med("commits"),
        "rollbacks_per_turn": med("rollbacks"),
        "sql_write_operations_per_turn": med("writes"),
        "fk_checks_per_turn": med("fk_checks"),
        "write_commits_per_turn": med("wal_commits"),
        "sql_broker_statements_per_turn": med("broker"),
        "sql_by_kind": by_kind,
        "sql_turn_statements": [f"{_label(s)}: {' '.join(s.split())[:160]}" for s in first["log"]],
        "sql_per_turn_each": [{k: t[k] for k in ("statements", "transaction_control", "round_trips", "commits",
                                                  "wal_commits", "logged_statements")} for t in turns],
        "sql_log_agrees": all(t["logged_statements"] == t["statements"] + t["transaction_control"] for t in turns),
        "sql_wake_written": first["wake_keys"],
        "sql_setup": {
            "settings": "project.settings", "agent": "project.agents.ana (OfflineProvider, no GEMINI_API_KEY)",
            "broker": broker, "send_handoff": _send_handoff(),
            "database": "private PostgreSQL cluster (pg_stat_statements, log_statement=all)",
            "turns_measured": len(turns), "calibration_commits": base_commits,
        },
    }


def _send_handoff() -> str | None:
    from falai_django import conf

    return conf.falai_settings().get("SEND_HANDOFF")


def _clear_redis_queue(settings: Any) -> None:
    """Drop the send tasks this run pushed onto its own Redis database's django-q2 list."""
    try:
        import redis

        client = redis.Redis.from_url(REDIS_BROKER_URL, socket_connect_timeout=2)
        client.delete(f"django_q:{settings.Q_CLUSTER['name']}:q")
        client.close()
    except Exception:  # noqa: BLE001 - a leftover list on the bench's own Redis database is harmless
        pass


# ---------------------------------------------------------------------------------------------
# 2. What the host adds per turn (bench agent, one process)
# ---------------------------------------------------------------------------------------------


def measure_latency() -> dict[str, Any]:
    from bench.hostbench import setup_django, summary_ms

    sizes = _sizes()
    setup_django()
    from falai_django import conf, host

    agent = conf.get_agent()
    engine_time = [0.0]
    original_turn = type(agent).turn

    def timed_turn(self, **kwargs):
        started = time.perf_counter()
        try:
            return original_turn(self, **kwargs)
        finally:
            engine_time[0] += time.perf_counter() - started

    type(agent).turn = timed_turn
    lanes = [f"bench-{n}" for n in range(20)]
    for sid in lanes:
        host.handle(sid, {"message": "oi", "id": f"{sid}.0"})

    overhead, totals = [], []
    started = time.perf_counter()
    for i in range(sizes["turns"]):
        sid = lanes[i % len(lanes)]
        engine_time[0] = 0.0
        t0 = time.perf_counter()
        result = host.handle(sid, {"message": "ainda não", "id": f"{sid}.t{i}"})
        total = time.perf_counter() - t0
        assert result.status == "done", result
        totals.append(total)
        overhead.append(total - engine_time[0])
    service_s = time.perf_counter() - started

    from django.contrib.auth.models import User
    from django.test import Client
    from rest_framework.authtoken.models import Token

    user, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True, "is_staff": True})
    token, _ = Token.objects.get_or_create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    http_totals = []
    started = time.perf_counter()
    for i in range(sizes["http_turns"]):
        sid = lanes[i % len(lanes)]
        t0 = time.perf_counter()
        response = client.post(f"/falai/sessions/{sid}/messages",
                               data=json.dumps({"text": "ainda não", "id": f"{sid}.h{i}"}),
                               content_type="application/json")
        http_totals.append(time.perf_counter() - t0)
        assert response.status_code == 200, response.content
    http_s = time.perf_counter() - started

    over, tot, http = summary_ms(overhead), summary_ms(totals), summary_ms(http_totals)
    return {
        "host_p50_ms": over["p50"],
        "host_p99_ms": over["p99"],
        "turn_total_p50_ms": tot["p50"],
        "turn_total_p99_ms": tot["p99"],
        "turns_per_s": round(sizes["turns"] / service_s, 1),
        "http_p50_ms": http["p50"],
        "http_p99_ms": http["p99"],
        "http_turns_per_s": round(sizes["http_turns"] / http_s, 1),
        "latency_turns": sizes["turns"],
        "http_turns": sizes["http_turns"],
    }


# ---------------------------------------------------------------------------------------------
# 3. Throughput: client processes beside pgbench, interleaved
# ---------------------------------------------------------------------------------------------


def _jsonb_1k() -> str:
    doc: dict[str, Any] = {"id": "5511999990000", "v": 4, "version": 17,
                           "data": {"nome": "João da Silva", "empresa": "Padaria Estrela", "tamanho": "11-50"},
                           "metadata": {"channel": "whatsapp"}, "pad": ""}
    size = len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())
    doc["pad"] = "x" * (1024 - size)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _pgbench_table(dsn: str, rows: int) -> str:
    import psycopg

    table = "bench_pgbench_jsonb"
    blob = _jsonb_1k()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY, blob jsonb NOT NULL)")
        conn.execute(f"INSERT INTO {table} SELECT n, %s::jsonb FROM generate_series(0, %s) n", (blob, rows - 1))
    return table


def _vacuum_analyze(dsn: str, extra: list[str]) -> None:
    """What autovacuum does to a running server's tables, done once after the growth phase: the
    planner gets statistics of the grown tables (without them its plans follow whatever the
    emptied tables kept from an earlier run) and the grown tables lose their dead rows. Servers
    here may run with autovacuum off (this machine's does), so the bench does not wait for it."""
    import psycopg

    from bench.hostbench import falai_tables

    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in [*falai_tables(), *extra]:
            conn.execute(f"VACUUM (ANALYZE) {name}")


def run_pgbench(dsn: str, table: str, clients: int, seconds: float) -> dict[str, Any]:
    parsed = urlparse(dsn)
    blob = _jsonb_1k().replace("'", "''")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(f"UPDATE {table} SET blob = '{blob}'::jsonb WHERE id = :client_id;\n")
    try:
        command = ["pgbench", "-h", parsed.hostname or "127.0.0.1", "-p", str(parsed.port or 5432),
                   "-U", parsed.username or "postgres", "-n", "-c", str(clients), "-j", str(clients),
                   "-T", str(max(1, round(seconds))), "-f", script.name, parsed.path.lstrip("/")]
        out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    finally:
        os.unlink(script.name)
    if out.returncode != 0:
        raise RuntimeError(f"pgbench failed: {out.stderr[-2000:]}")
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    latency = re.search(r"latency average = ([\d.]+) ms", out.stdout)
    if not tps:
        raise RuntimeError(f"no tps in pgbench's output:\n{out.stdout[-2000:]}")
    return {"tps": float(tps.group(1)), "latency_ms": float(latency.group(1)) if latency else None}


def measure_load() -> dict[str, Any]:
    from bench.hostbench import bench_dsn, cpu, progress, setup_django
    from bench.hostbench.pool import Pool

    sizes = _sizes()
    setup_django()
    from django.db import connections

    connections.close_all()
    dsn = bench_dsn()
    table = _pgbench_table(dsn, max(CLIENTS))
    rounds: dict[str, list[dict[str, Any]]] = {str(n): [] for n in CLIENTS}
    with Pool(max(CLIENTS), "bench.hostbench.clients:init_django") as pool:
        pids = {process.pid for process, _conn in pool.workers}
        pool.call("bench.hostbench.clients:warm_host",
                  [{"prefix": f"load{i}-", "conversations": sizes["conversations"]} for i in range(len(pool))])
        grown = sum(pool.call("bench.hostbench.clients:grow_host", {"turns_per_conversation": STEADY_TURNS},
                              timeout=1800))
        progress(f"host load: {grown} turns brought the conversations to their steady size")
        _vacuum_analyze(dsn, [table])
        for clients in CLIENTS:
            for r in range(sizes["rounds"]):
                if r % 2 == 0:  # pgbench then host, then the other way round: a trend in load hits both
                    bench = run_pgbench(dsn, table, clients, sizes["window_s"])
                before = cpu.snapshot(pids)
                per = pool.timed("bench.hostbench.clients:host_turns", sizes["window_s"], workers=clients)
                spent = cpu.usage(before, cpu.snapshot(pids), sum(p["turns"] for p in per))
                if r % 2 == 1:
                    bench = run_pgbench(dsn, table, clients, sizes["window_s"])
                turns_s = sum(p["turns"] for p in per) / sizes["window_s"]
                rounds[str(clients)].append({
                    "pgbench_tps": round(bench["tps"], 1), "pgbench_latency_ms": bench["latency_ms"],
                    "host_turns_per_s": round(turns_s, 1), "ratio": round(turns_s / bench["tps"], 4),
                    "host_p50_ms": statistics.median(p["p50_ms"] for p in per),
                    "host_p99_ms": max(p["p99_ms"] for p in per),
                    **spent,
                })
                progress(f"host load: {clients} clients round {r + 1}: pgbench {bench['tps']:.0f} tps, "
                         f"host {turns_s:.0f} turns/s")
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        # What the turns carried at the end (the pgbench row is 1 KB): a conversation that keeps
        # answering "ainda não" grows to the spec's caps (50 inputs, 50 outcomes on its run).
        blob, items = conn.execute(
            "SELECT avg(length(blob::text))::int, (SELECT avg(n)::int FROM (SELECT count(*) n FROM falai_history "
            "WHERE conversation_id LIKE 'load%%' GROUP BY conversation_id) c) FROM agent_sessions "
            "WHERE id LIKE 'load%%'").fetchone()
    out: dict[str, Any] = {"load_rounds": rounds, "load_window_s": sizes["window_s"], "load_grow_turns": grown,
                           "load_conversations_per_client": sizes["conversations"],
                           "load_session_blob_bytes_avg": blob, "load_transcript_items_avg": items,
                           "load_vacuum_analyze_after_growth": True}
    for clients in CLIENTS:
        each = rounds[str(clients)]
        out[f"host_vs_pgbench_{clients}"] = round(statistics.median(r["ratio"] for r in each), 4)
        out[f"host_turns_per_s_{clients}"] = round(statistics.median(r["host_turns_per_s"] for r in each), 1)
        out[f"pgbench_tps_{clients}"] = round(statistics.median(r["pgbench_tps"] for r in each), 1)
        for key in ("client_cpu_ms_per_turn", "server_cpu_ms_per_turn", "idle_share"):
            values = [r[key] for r in each if r.get(key) is not None]
            if values:
                out[f"load_{key}_{clients}"] = round(statistics.median(values), 3)
    return out


# ---------------------------------------------------------------------------------------------


def measure(part: str = "latency") -> dict[str, Any]:
    return {"sql": measure_sql, "latency": measure_latency, "load": measure_load}[part]()


def main() -> dict[str, Any]:
    from bench.hostbench import environment, run_child, write_result

    script = Path(__file__).resolve()
    result: dict[str, Any] = {"database": "postgresql", "quick": quick(), "errors": {}}

    def part(name: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """One child's figures; a part that fails is reported in `errors`, the others still run."""
        try:
            return run_child(script, part=name.split(":")[0], env=env)
        except Exception as exc:  # noqa: BLE001
            result["errors"][name] = str(exc)[-2000:]
            return {}

    result.update(part("sql", {**environment(), "FALAI_BENCH_SQL_BROKER": "orm"}))
    redis = part("sql:redis", {**environment(), "FALAI_BENCH_SQL_BROKER": "redis"})
    result["sql_redis_broker"] = {k: redis[k] for k in (
        "sql_statements_per_turn", "transaction_control_per_turn", "round_trips_per_turn", "commits_per_turn",
        "write_commits_per_turn", "sql_by_kind") if k in redis}
    result.update(part("latency"))
    result.update(part("load"))
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    write_result(RESULTS, result)
    print_table(result)
    return result


def print_table(r: dict[str, Any]) -> None:
    redis = r.get("sql_redis_broker", {})

    def get(key: str, source: dict[str, Any] = r) -> Any:
        return source.get(key, "-")

    rows = [
        ("SQL statements per inbound turn (demo agent, ORM broker)", get("sql_statements_per_turn"), "≤ 6"),
        ("  + transaction control (BEGIN/COMMIT)", get("transaction_control_per_turn"), ""),
        ("  write operations (INSERT/UPDATE/DELETE, CTE parts too)", get("sql_write_operations_per_turn"), ""),
        ("round trips per turn", get("round_trips_per_turn"), ""),
        ("commits per turn (pg_stat_database.xact_commit)", get("commits_per_turn"), "≤ 2"),
        ("  of which wrote (WAL COMMIT records)", get("write_commits_per_turn"), ""),
        ("foreign-key checks at commit (server side, not counted)", get("fk_checks_per_turn"), ""),
        ("SQL statements / commits per turn, Redis broker",
         f"{get('sql_statements_per_turn', redis)} / {get('commits_per_turn', redis)}", ""),
        ("host overhead p50 / p99 ms", f"{get('host_p50_ms')} / {get('host_p99_ms')}", ""),
        ("turns/s, one process / HTTP", f"{get('turns_per_s')} / {get('http_turns_per_s')}", ""),
        ("load: session blob bytes / transcript items at the end (avg)",
         f"{get('load_session_blob_bytes_avg')} / {get('load_transcript_items_avg')}", ""),
    ]
    for clients in CLIENTS:
        rows.append((f"{clients} clients: host turns/s vs pgbench tps",
                     f"{get(f'host_turns_per_s_{clients}')} / {get(f'pgbench_tps_{clients}')}", ""))
        rows.append((f"host_vs_pgbench_{clients}", get(f"host_vs_pgbench_{clients}"), "≥ 0.1"))
    for label, value, target in rows:
        print(f"{label:<58}{value!s:>20}  {target}")
    if r.get("sql_by_kind"):
        print("statements of one turn: " + ", ".join(f"{k} ×{v}" for k, v in r["sql_by_kind"].items()))
    for name, error in r.get("errors", {}).items():
        print(f"{name} FAILED: {error.strip().splitlines()[-1] if error.strip() else '?'}")


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main)
