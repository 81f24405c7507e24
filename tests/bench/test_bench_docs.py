"""scripts/bench_docs.py rewrites marked figures from bench results and `--check` catches stale ones.
Fast: a temporary results directory and doc, no database, no bench run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("falai_bench_docs", ROOT / "scripts" / "bench_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DOC = """# Figures

| figure | measured |
|---|---|
| host vs pgbench, 2 clients | <!-- bench:host.host_vs_pgbench_2 -->0.05<!-- /bench --> |
| p99 | <!-- bench:wakes.lateness_p99_s|.2f -->9.99<!-- /bench --> s |
| writes/s at 16 | <!-- bench:stores.saves.16 -->1<!-- /bench --> |
Plain text around a figure stays: SQL <!-- bench:host.sql_statements_per_turn -->8<!-- /bench --> per turn.
"""


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    results.mkdir()
    (results / "host.json").write_text(json.dumps({"host_vs_pgbench_2": 0.12345, "sql_statements_per_turn": 6}))
    (results / "wakes.json").write_text(json.dumps({"lateness_p99_s": 0.8412}))
    (results / "stores.json").write_text(json.dumps({"saves": {"16": 2345.6}}))
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    return results, doc


def test_the_script_rewrites_marked_values_from_the_results(tmp_path):
    script = _script()
    results, doc = _setup(tmp_path)
    assert script.main([str(doc), "--results", str(results)]) == 0
    text = doc.read_text()
    assert "<!-- bench:host.host_vs_pgbench_2 -->0.123<!-- /bench -->" in text
    assert "<!-- bench:wakes.lateness_p99_s|.2f -->0.84<!-- /bench --> s" in text
    assert "<!-- bench:stores.saves.16 -->2346<!-- /bench -->" in text
    assert "SQL <!-- bench:host.sql_statements_per_turn -->6<!-- /bench --> per turn." in text
    assert text.replace("0.123", "0.05").replace("0.84", "9.99").replace("2346", "1").replace(
        "-->6<", "-->8<") == DOC  # nothing else changed
    assert script.main([str(doc), "--results", str(results), "--check"]) == 0  # fresh now


def test_check_detects_a_stale_doc_and_writes_nothing(tmp_path, capsys):
    script = _script()
    results, doc = _setup(tmp_path)
    assert script.main([str(doc), "--results", str(results), "--check"]) == 1
    assert doc.read_text() == DOC
    out = capsys.readouterr().out
    assert "host.host_vs_pgbench_2: '0.05' -> '0.123' (stale)" in out
    script.main([str(doc), "--results", str(results)])
    (results / "host.json").write_text(json.dumps({"host_vs_pgbench_2": 0.2, "sql_statements_per_turn": 6}))
    assert script.main([str(doc), "--results", str(results), "--check"]) == 1  # a new result: stale again


def test_a_missing_figure_is_reported_and_left_alone(tmp_path, capsys):
    script = _script()
    results, doc = _setup(tmp_path)
    (results / "wakes.json").unlink()
    assert script.main([str(doc), "--results", str(results)]) == 1
    text = doc.read_text()
    assert "<!-- bench:wakes.lateness_p99_s|.2f -->9.99<!-- /bench -->" in text
    assert "-->0.123<" in text  # the others are still rewritten
    assert "wakes.lateness_p99_s: MISSING (wakes.json not found" in capsys.readouterr().out
