"""Shared set-up for the Django benches (a package, so run_all does not list it).

They run on a PostgreSQL database of their own (`falai_bench`, created when missing on the
server `FALAI_BENCH_PG_DSN` / the tests' default), migrated, with the falai tables emptied
before each run. Django is set up with `bench.hostbench.settings` in the bench's own child
process (`run_child`), never in the process that runs `run_all.py`.

Short runs for development: `FALAI_BENCH_QUICK=1` (or `--quick` on any bench, or on run_all.py).
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
# Another name keeps two checkouts (e.g. an old commit and the working tree) on schemas of their own.
DATABASE = os.environ.get("FALAI_BENCH_DATABASE", "falai_bench")
QUICK_ENV = "FALAI_BENCH_QUICK"


def quick() -> bool:
    """A short development run (`--quick` / FALAI_BENCH_QUICK=1): small sizes, same code paths."""
    return os.environ.get(QUICK_ENV, "").strip().lower() not in ("", "0", "false", "no")


def bench_dsn(database: str = DATABASE) -> str:
    base, _, _ = SERVER_DSN.rpartition("/")
    return f"{base}/{database}"


def ensure_database(database: str = DATABASE) -> None:
    import psycopg

    with psycopg.connect(SERVER_DSN, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.hostbench.settings",
        "DATABASE_URL": bench_dsn(),
        "PYTHONPATH": str(ROOT),
    }


def setup_django(*, migrate: bool = True, truncate: bool = True) -> None:
    """Set Django up in this process with the environment's settings and database (the bench
    ones unless a caller set DJANGO_SETTINGS_MODULE / DATABASE_URL), migrate, empty the tables."""
    defaults = environment()
    for key in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL"):
        os.environ.setdefault(key, defaults[key])
    if os.environ["DATABASE_URL"] == bench_dsn():
        ensure_database()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    if migrate:
        call_command("migrate", verbosity=0, skip_checks=True)
    if truncate:
        truncate_tables()


def models() -> dict[str, Any]:
    """The host's models, whatever they are called today (the one place to update after a rename):
    session, history, wake, turn; `wake_session` (the wake's foreign key to its session, attname) and
    `wake_session_field` (its field name, for lookups)."""
    from django.apps import apps

    app = apps.get_app_config("falai_django")

    def get(*names: str) -> Any:
        for name in names:
            try:
                return app.get_model(name)
            except LookupError:
                continue
        raise LookupError(f"none of {names} in falai_django")

    found = {"session": get("Session", "Conversation"), "history": get("History", "HistoryItem"),
             "wake": get("Wake"), "turn": get("TurnRecord")}
    fk = next(f for f in found["wake"]._meta.concrete_fields
              if f.is_relation and f.related_model in (found["session"], found["session"]._meta.concrete_model))
    found["wake_session"], found["wake_session_field"] = fk.attname, fk.name
    return found


def falai_tables() -> list[str]:
    """The app's tables (whatever the models are called today) and django-q2's."""
    from django.apps import apps

    tables = [m._meta.db_table for m in apps.get_app_config("falai_django").get_models()
              if not m._meta.proxy and m._meta.managed]
    return list(dict.fromkeys(tables)) + ["django_q_ormq", "django_q_task"]


def truncate_tables() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(falai_tables())} CASCADE")


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


def run_child(script: Path, timeout: float = 1800, part: str | None = None,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `script --measure [part]` in a fresh process (its own Django set-up); return its JSON
    (the last stdout line). The child's stderr (progress lines) is echoed as it comes."""
    import json
    import subprocess
    import threading
    from collections import deque

    command = [sys.executable, str(script), "--measure", *([part] if part else [])]
    process = subprocess.Popen(command, cwd=ROOT, env=env or environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    tail: deque[str] = deque(maxlen=80)

    def echo() -> None:
        for line in process.stderr:
            tail.append(line)
            sys.stderr.write(line)
            sys.stderr.flush()

    # stdout is read by a thread of its own: `communicate()` would also read (and close) stderr,
    # racing the echo thread for the progress lines.
    out: list[str] = []
    reader = threading.Thread(target=echo, daemon=True)
    collector = threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)
    reader.start()
    collector.start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise RuntimeError(f"{script.name} --measure {part or ''} took over {timeout:.0f}s") from None
    collector.join(timeout=10)
    reader.join(timeout=5)
    stdout = "".join(out)
    if process.returncode != 0:
        raise RuntimeError(f"{script.name} --measure {part or ''} failed:\n{''.join(tail)[-4000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


def write_result(results: Path, result: dict[str, Any]) -> dict[str, Any]:
    import json
    import math

    def finite(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [finite(v) for v in value]
        return value

    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(finite(result), indent=2) + "\n")
    return result


def run_and_record(script: Path, results: Path, timeout: float = 1800) -> dict[str, Any]:
    """A Django bench's `main()`: measure in a child process, write the JSON, return it."""
    return write_result(results, run_child(script, timeout))


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def cli(measure: Any, main: Any, options: dict[str, str] | None = None) -> None:
    """`python bench/<x>.py [--quick] [--json] [--option value]` runs main() (which prints its
    table; `--json` prints the result too); the child process it starts runs `--measure [part]`. `options` maps a command-line flag to the environment variable it
    sets (so run_all's `main()` and the child see the same choice)."""
    import json

    argv = sys.argv[1:]
    if "--quick" in argv:
        argv.remove("--quick")
        os.environ[QUICK_ENV] = "1"
    for flag, variable in (options or {}).items():
        if flag in argv:
            at = argv.index(flag)
            os.environ[variable] = argv[at + 1]
            del argv[at : at + 2]
    if argv and argv[0] == "--measure":
        part = argv[1] if len(argv) > 1 else None
        result = measure(part) if part else measure()
        print(json.dumps(result))
    else:
        result = main()
        if "--json" in argv:
            print(json.dumps(result, indent=2))
