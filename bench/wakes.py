"""Wake bench on PostgreSQL: 10,000 pending wakes due over 60 s, fired by the dispatcher through a
real django-q2 cluster (ORM broker) running the turns with a zero-latency scripted provider.

    .venv/bin/python bench/wakes.py

1. Spread: 10,000 conversations each parked on a timer wait, due evenly over 60 s (the first
   15 s after the template is built, so that inserting them never makes the first ones late).
   `manage.py falai_dispatch_wakes` and `manage.py qcluster` run as they would in production.
   Lateness = when the turn honouring the wake committed (`Wake.fired_at`) − its due time.
2. Burst: BURST more wakes all due at once; `wakes_per_s` = how many the cluster honours per
   second (the capacity behind the p99).

Writes bench/results/wakes.json; `main()` returns the same dict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "wakes.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WAKES = int(os.environ.get("FALAI_BENCH_WAKES", "10000"))
SPREAD_S = 60.0
LEAD_S = 15.0  # building and inserting 10,000 conversations takes a few seconds
BURST = int(os.environ.get("FALAI_BENCH_BURST", "3000"))


def _template() -> tuple[str, dict[str, Any]]:
    """One conversation parked on the wait, through the real host; its blob is cloned."""
    from falai_django import host
    from falai_django.models import Conversation

    host.handle_message("tpl", "oi", id="tpl.1")
    host.handle_message("tpl", "meu nome é Ana", id="tpl.2")
    blob = Conversation.objects.get(pk="tpl").blob
    Conversation.objects.filter(pk="tpl").delete()
    return json.dumps(blob), blob


def _park(prefix: str, count: int, lead: timedelta, step: timedelta):
    """Park `count` conversations, due from now + `lead` (counted once the template is built)."""
    from django.utils import timezone

    from falai_django.engine.jstime import to_iso, to_ms
    from falai_django.models import Conversation, Wake
    from falai_django.stores.django import derived_columns

    text, blob = _template()
    first_at = timezone.now() + lead
    run_id = blob["runs"][0]["id"]
    rows, wakes = [], []
    for i in range(count):
        sid = f"{prefix}{i}"
        clone = json.loads(text.replace("tpl", sid))
        at = first_at + step * i
        key = f"{run_id.replace('tpl', sid)}:espera:{to_ms(at)}"
        clone["runs"][0]["waiting"].update(key=key, until=to_iso(at))
        clone["version"] = 1
        rows.append(Conversation(id=sid, version=1, blob=clone, **derived_columns(clone)))
        wakes.append(Wake(conversation_id=sid, key=key, at=at))
    Conversation.objects.bulk_create(rows, batch_size=1000)
    Wake.objects.bulk_create(wakes, batch_size=1000)
    return first_at


def _start(args: list[str]) -> subprocess.Popen:
    from bench.hostbench import environment

    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=environment(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def _wait_done(count: int, deadline: float) -> None:
    """Until `count` wakes in all are done (a cheap count on the state index, once a second)."""
    from falai_django.models import Wake

    while time.monotonic() < deadline:
        if Wake.objects.filter(state="done").count() >= count:
            return
        time.sleep(1.0)


def _lateness(prefix: str) -> tuple[list[float], list[Any]]:
    from falai_django.models import Wake

    rows = list(Wake.objects.filter(conversation__id__startswith=prefix, state="done").values_list("at", "fired_at"))
    return [(fired - at).total_seconds() for at, fired in rows], [fired for _, fired in rows]


def measure() -> dict[str, Any]:
    from bench.hostbench import percentile, setup_django

    setup_django()

    from falai_django.models import Wake

    cluster = _start(["qcluster"])
    dispatcher = _start(["falai_dispatch_wakes", "--poll", "0.1"])
    try:
        time.sleep(3.0)  # both up before the first wake is due
        _park("s", WAKES, timedelta(seconds=LEAD_S), timedelta(seconds=SPREAD_S / WAKES))
        _wait_done(WAKES, time.monotonic() + LEAD_S + SPREAD_S + 120)
        spread, fired = _lateness("s")

        burst_at = _park("b", BURST, timedelta(seconds=2), timedelta(0))
        _wait_done(WAKES + BURST, time.monotonic() + 300)
        burst, burst_fired = _lateness("b")
    finally:
        _stop(dispatcher)
        _stop(cluster)

    burst_span = (max(burst_fired) - burst_at).total_seconds() if burst_fired else float("nan")
    spread_span = (max(fired) - min(fired)).total_seconds() if fired else float("nan")
    honoured = Wake.objects.filter(state="done").count()
    return {
        "database": "postgresql",
        "broker": "orm",
        "workers": int(os.environ.get("FALAI_BENCH_WORKERS", "6")),
        "wakes": WAKES,
        "spread_s": SPREAD_S,
        "fired": len(spread),
        "lateness_p50_s": round(percentile(spread, 50), 3),
        "lateness_p99_s": round(percentile(spread, 99), 3),
        "lateness_max_s": round(max(spread), 3) if spread else None,
        "spread_fired_per_s": round(len(spread) / spread_span, 1) if spread_span else None,
        "burst": BURST,
        "burst_fired": len(burst),
        "wakes_per_s": round(len(burst) / burst_span, 1) if burst_span else None,
        "burst_lateness_p99_s": round(percentile(burst, 99), 3),
        "all_honoured": honoured == WAKES + BURST,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "dispatcher_poll_s": 0.1,
    }


def main() -> dict[str, Any]:
    from bench.hostbench import run_and_record

    return run_and_record(Path(__file__).resolve(), RESULTS, timeout=1200)


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main)
