"""bench/run_all.py keeps going when a bench is missing, broken or raising, and writes one table."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _runner():
    spec = importlib.util.spec_from_file_location("falai_bench_run_all", ROOT / "bench" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_missing_broken_and_raising_benches_are_listed_as_not_run(tmp_path, monkeypatch):
    run_all = _runner()
    (tmp_path / "blob.py").write_text("def main():\n    return {'ratio_vs_json': 1.5}\n")
    (tmp_path / "stores.py").write_text("def main():\n    return {'postgres_save_vs_update_ratio': 0.5}\n")
    (tmp_path / "turn.py").write_text("import no_such_module_here\n")
    (tmp_path / "stream.py").write_text("def main():\n    raise RuntimeError('server down')\n")
    (tmp_path / "wakes.py").write_text("X = 1\n")
    monkeypatch.setattr(run_all, "BENCH_DIR", tmp_path)
    summary = run_all.run(results_path=tmp_path / "results" / "summary.json")

    rows = {row["figure"]: row for row in summary["table"]}
    assert rows["blob ratio_vs_json"]["met"] is True and rows["blob ratio_vs_json"]["ratio"] == 0.5
    stores = rows["stores postgres_save_vs_update_ratio"]
    assert stores["met"] is False and abs(stores["ratio"] - 1.4) < 1e-9  # ≥ target: target / measured
    assert "import failed: ModuleNotFoundError" in rows["turn message_p50_ms"]["note"]
    assert "main() raised RuntimeError: server down" in rows["stream first_delta_ms"]["note"]
    assert "does not exist yet" in rows["host sql_statements_per_turn"]["note"]
    assert "has no main()" in rows["wakes wakes_per_s"]["note"]
    assert (summary["met"], summary["missed"], summary["not_run"]) == (1, 1, len(run_all.TARGETS) - 2)
    written = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert [r["figure"] for r in written["table"]] == [r["figure"] for r in summary["table"]]
    for line in ("figure", "blob ratio_vs_json", "NOT RUN", "MISSED"):
        assert line in summary["text"]


def test_the_targets_are_the_issue_table():
    run_all = _runner()
    assert [(t.bench, t.figure, t.op, t.value) for t in run_all.TARGETS] == [
        ("blob", "ratio_vs_json", "<=", 3), ("blob", "host_path_ratio_vs_json", "<=", 3),
        ("stores", "postgres_save_vs_update_ratio", ">=", 0.7),
        ("stores", "djangostore_vs_update_1", ">=", 0.7), ("stores", "djangostore_vs_update_4", ">=", 0.7),
        ("stores", "djangostore_vs_update_16", ">=", 0.7),
        ("turn", "message_p50_ms", "<=", 1), ("turn", "message_p99_ms", "<=", 3),
        ("turn", "wake_p50_ms", "<=", 0.5), ("turn", "runs_1_message_p50_ms", "<=", 0.25),
        ("turn", "runs_50_message_p50_ms", "<=", 0.5), ("stream", "first_delta_ms", "<=", 5),
        ("host", "sql_statements_per_turn", "<=", 6), ("host", "commits_per_turn", "<=", 2),
        ("host", "host_vs_pgbench_2", ">=", 0.1), ("host", "host_vs_pgbench_4", ">=", 0.1),
        ("wakes", "lateness_p99_s", "<=", 1), ("wakes", "wakes_per_s", ">=", 300),
        ("wakes", "burst_drain_per_s", ">=", 700),
        ("instruments", "instruments_share_of_turn_cpu_pct", "<=", 5),  # issue 46
        ("replay", "turns_per_second", ">=", 2000),  # issue 50
        ("scale", "desk_poll_p95_ms", "<=", 50), ("scale", "admin_list_worst_p95_ms", "<=", 200),  # issue 52
        ("scale", "admin_search_worst_p95_ms", "<=", 200), ("scale", "api_worst_p95_ms", "<=", 100),
        ("scale", "conversation_page_p95_ms", "<=", 150), ("scale", "turn_vs_1k", "<=", 1.1),
    ]


def test_a_bench_without_targets_runs_alone_and_is_listed(tmp_path, monkeypatch):
    """`run_all.py admin`: a bench with no target makes an empty table, not a crash."""
    run_all = _runner()
    (tmp_path / "admin.py").write_text("def main():\n    return {'list_ms': 48.0}\n")
    monkeypatch.setattr(run_all, "BENCH_DIR", tmp_path)
    summary = run_all.run(["admin"], results_path=tmp_path / "results" / "summary.json")
    assert summary["table"] == [] and summary["benches"]["admin"]["result"] == {"list_ms": 48.0}
    assert "admin    ran in" in summary["text"]
