"""Shared set-up for bench/host.py and bench/wakes.py (a package, so run_all does not list it).

Both benches run on a PostgreSQL database of their own (`falai_bench`, created when missing on
the server `FALAI_BENCH_PG_DSN` / the tests' default), migrated, with the falai tables emptied
before each run. Django is set up with `bench.hostbench.settings` in the bench's own process.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SERVER_DSN = os.environ.get("FALAI_BENCH_PG_DSN",
                            os.environ.get("FALAI_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test"))
DATABASE = "falai_bench"


def bench_dsn() -> str:
    base, _, _ = SERVER_DSN.rpartition("/")
    return f"{base}/{DATABASE}"


def ensure_database() -> None:
    import psycopg

    with psycopg.connect(SERVER_DSN, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.hostbench.settings",
        "DATABASE_URL": bench_dsn(),
        "PYTHONPATH": str(ROOT),
    }


def setup_django() -> None:
    """Migrate the bench database and empty the falai tables (in this process)."""
    ensure_database()
    os.environ.update({k: v for k, v in environment().items() if k in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")})
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, skip_checks=True)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE falai_history, falai_wake, falai_turn, agent_sessions, django_q_ormq, "
                       "django_q_task CASCADE")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {"p50": round(percentile(ms, 50), 3), "p99": round(percentile(ms, 99), 3),
            "mean": round(statistics.fmean(ms), 3) if ms else float("nan")}


def run_child(script: Path, timeout: float = 1800) -> dict[str, Any]:
    """Run `script --measure` in a fresh process (its own Django set-up); return its JSON."""
    import json
    import subprocess

    out = subprocess.run([sys.executable, str(script), "--measure"], cwd=ROOT, env=environment(),
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{script.name} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_and_record(script: Path, results: Path, timeout: float = 1800) -> dict[str, Any]:
    """A Django bench's `main()`: measure in a child process, write the JSON, return it."""
    import json

    result = run_child(script, timeout)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(result, indent=2) + "\n")
    return result


def cli(measure: Any, main: Any) -> None:
    """`python bench/<x>.py` runs main(); the child process it starts runs `--measure`."""
    import json

    if "--measure" in sys.argv:
        print(json.dumps(measure()))
    else:
        print(json.dumps(main(), indent=2))
