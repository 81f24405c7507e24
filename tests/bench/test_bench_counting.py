"""The counting helpers behind bench/host.py's SQL figures, and issue 12's rows in run_all's table.
Fast: text only, no database."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sqltext = _load("falai_bench_sqltext", ROOT / "bench" / "hostbench" / "sqltext.py")


def test_a_string_with_several_statements_counts_as_several():
    sql = ("SELECT pg_try_advisory_lock(1); SELECT 'a;b', \"odd;name\", E'it\\'s; fine' -- c;d\n"
           "FROM t; /* x; y */ UPDATE t SET j = '{\"k\": \"v;w\"}'::jsonb WHERE id = $q$;$q$;;")
    assert sqltext.split_statements(sql) == [
        "SELECT pg_try_advisory_lock(1)",
        "SELECT 'a;b', \"odd;name\", E'it\\'s; fine' -- c;d\nFROM t",
        "/* x; y */ UPDATE t SET j = '{\"k\": \"v;w\"}'::jsonb WHERE id = $q$;$q$",
    ]


def test_the_server_log_gives_one_request_per_round_trip():
    log = (
        "2026-12-01 22:03:29.875 UTC [14438] db=other LOG:  statement: SELECT 1\n"
        "2026-12-01 22:03:30.031 UTC [14449] db=x LOG:  statement: BEGIN\n"
        "2026-12-01 22:03:30.033 UTC [14449] db=x LOG:  execute <unnamed>: INSERT INTO t VALUES ($1, $2)\n"
        "2026-12-01 22:03:30.033 UTC [14449] db=x DETAIL:  parameters: $1 = '1', $2 = 'a;\n"
        "\tb'\n"
        "2026-12-01 22:03:30.034 UTC [14449] db=x LOG:  statement: SELECT 'x\n"
        "\ty'; SELECT 2\n"
        "2026-12-01 22:03:30.034 UTC [14449] db=x LOG:  statement: COMMIT\n"
    )
    requests = [r["sql"] for r in sqltext.logged_requests(log, "x")]
    assert requests == ["BEGIN", "INSERT INTO t VALUES ($1, $2)", "SELECT 'x\ny'; SELECT 2", "COMMIT"]
    statements = [s for r in requests for s in sqltext.split_statements(r)]
    assert len(statements) == 5
    assert [sqltext.is_transaction_control(s) for s in statements] == [True, False, False, False, True]


def test_write_operations_count_the_parts_of_a_writable_cte_but_not_strings_or_upserts():
    sql = ("WITH s AS (UPDATE \"agent_sessions\" SET blob = 'UPDATE x SET y' WHERE id = 1 RETURNING 1), "
           "w AS (INSERT INTO falai_wake (k) VALUES (1) ON CONFLICT (k) DO UPDATE SET k = 2 RETURNING 1), "
           "d AS (DELETE FROM falai_wake WHERE k = 3 RETURNING 1) SELECT 1 FROM s")
    assert sqltext.write_operations(sql) == 3
    assert sqltext.is_fk_check('SELECT 1 FROM ONLY "public"."agent_sessions" x WHERE "id" OPERATOR(pg_catalog.=) '
                               '$1 FOR KEY SHARE OF x')


def test_run_all_lists_issue_12_targets():
    run_all = _load("falai_bench_run_all_targets", ROOT / "bench" / "run_all.py")
    targets = {(t.bench, t.figure): (t.op, t.value) for t in run_all.TARGETS}
    assert targets[("host", "sql_statements_per_turn")] == ("<=", 6)
    assert targets[("host", "commits_per_turn")] == ("<=", 2)
    assert targets[("host", "host_vs_pgbench_2")] == (">=", 0.1)
    assert targets[("host", "host_vs_pgbench_4")] == (">=", 0.1)
    for writers in (1, 4, 16):
        assert targets[("stores", f"djangostore_vs_update_{writers}")] == (">=", 0.7)
    assert targets[("blob", "host_path_ratio_vs_json")] == ("<=", 3)
    assert targets[("wakes", "lateness_p99_s")] == ("<=", 1)
    assert targets[("wakes", "wakes_per_s")] == (">=", 300)
    assert targets[("wakes", "burst_drain_per_s")] == (">=", 700)
    assert targets[("stream", "first_delta_ms")] == ("<=", 5)


cpu = _load("falai_bench_cpu", ROOT / "bench" / "hostbench" / "cpu.py")


def test_cpu_usage_is_split_per_turn_between_clients_and_server():
    before = {"clients": {1: 10.0}, "server": {7: 4.0, 8: 3.0}, "total": 100.0, "idle": 20.0}
    # backend 8 ended meanwhile (it takes nothing away), backend 9 started (all of it counts)
    after = {"clients": {1: 12.0}, "server": {7: 4.75, 9: 0.25}, "total": 110.0, "idle": 21.5}
    assert cpu.usage(before, after, 1000) == {
        "client_cpu_ms_per_turn": 2.0, "server_cpu_ms_per_turn": 1.0, "idle_share": 0.15}
    assert cpu.usage(before, after, 0) == {} and cpu.usage(None, after, 10) == {}


def test_a_cpu_snapshot_counts_the_given_processes_as_clients():
    import os

    if not os.path.exists("/proc/stat"):
        assert cpu.snapshot(set()) is None
        return
    mine = cpu.snapshot({os.getpid()})
    sum(i * i for i in range(300_000))  # spend some CPU in this process
    again = cpu.snapshot({os.getpid()})
    assert set(mine["clients"]) == {os.getpid()} and again["total"] > mine["total"]
    assert again["clients"][os.getpid()] >= mine["clients"][os.getpid()]
    assert cpu.snapshot(set())["clients"] == {}
