"""Run the benches several times and write the spread of every target figure.

    .venv/bin/python scripts/bench_spread.py            # 3 runs of bench/run_all.py
    .venv/bin/python scripts/bench_spread.py --runs 5 host wakes

Each run's table is kept as bench/results/runs/run-<n>.json (run-<n>-<benches>.json for a partial
rerun, whose benches replace theirs in spread.json while the others are kept); spread.json holds,
per figure of the table, every run's value, their min, median and max, and how many runs met
the target. The last run's per-bench JSON files stay in bench/results/ (what the docs quote,
through scripts/bench_docs.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def spread(tables: list[list[dict]]) -> dict[str, dict[str, dict]]:
    """bench -> figure -> {values, min, median, max, met, runs} over the runs' tables (nested, so a
    doc quotes it as `<!-- bench:spread.host.host_vs_pgbench_2.min -->`)."""
    out: dict[str, dict[str, dict]] = {}
    for table in tables:
        for row in table:
            figures = out.setdefault(row["bench"], {})
            entry = figures.setdefault(row["key"], {"target": row.get("target"), "values": [], "met": 0})
            if isinstance(row.get("measured"), int | float):
                entry["values"].append(row["measured"])
                entry["met"] += bool(row.get("met"))
    for entry in (e for figures in out.values() for e in figures.values()):
        values = entry["values"]
        entry["runs"] = len(values)
        entry["min"] = min(values) if values else None
        entry["median"] = statistics.median(values) if values else None
        entry["max"] = max(values) if values else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("benches", nargs="*", help="only these benches (default: all)")
    args = parser.parse_args(argv)
    runs_dir = RESULTS / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    tables = []
    for n in range(1, args.runs + 1):
        print(f"== bench run {n} of {args.runs}", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "run_all.py"), *args.benches], check=True, cwd=ROOT)
        suffix = "".join(f"-{name}" for name in args.benches)  # a partial rerun keeps the full runs' tables
        shutil.copyfile(RESULTS / "summary.json", runs_dir / f"run-{n}{suffix}.json")
        tables.append(json.loads((RESULTS / "summary.json").read_text())["table"])
    result = spread(tables)
    path = RESULTS / "spread.json"
    if args.benches and path.exists():  # a partial rerun replaces only the benches it ran
        result = {**json.loads(path.read_text()), **result}
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    rows = [(f"{bench} {key}", entry) for bench, figures in result.items() for key, entry in figures.items()]
    width = max(len(name) for name, _ in rows)
    for name, entry in rows:
        print(f"{name:<{width}}  target {entry['target']!s:<10} min {entry['min']!s:<10} "
              f"median {entry['median']!s:<10} max {entry['max']!s:<10} met {entry['met']}/{entry['runs']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
