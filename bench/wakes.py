"""Wake bench on PostgreSQL: 10,000 wakes due over 60 s while 100 inbound message turns/s run on
the same database, fired by the dispatcher through a real django-q2 cluster with 2 workers.

    .venv/bin/python bench/wakes.py [--quick] [--wake-delay-ms 0]

Everything runs as it would in production, each in its own process, on database `falai_bench`
(bench settings: the zero-latency scripted provider, null sender, ORM broker):
`manage.py qcluster` (FALAI_BENCH_WORKERS=2 worker processes), `manage.py falai_dispatch_wakes
--poll 0.1`, and two client processes calling `host.handle` for inbound messages on 200
conversations of their own, paced at 50 turns/s each (open loop; their answers' sends go through
the same cluster). Phases:

1. Spread: 10,000 conversations parked on a timer wait, due evenly over 60 s (the first LEAD_S
   after they are inserted), under the message load. Lateness of a wake = `fired_at` (written in
   the transaction of the turn that honoured it) − its due time, over EVERY wake: one not done
   when the phase ends (GRACE_S after the last is due) counts with the lateness it has by then
   (a lower bound; `spread_not_done` says how many). `lateness_p50_s`, `_p99_s`, `_max_s`.
2. Burst under load: 3,000 more due at once; `wakes_per_s` = how many the cluster honoured per
   second from their due time to the last one (the capacity behind the p99, with the message
   load still running).
3. Burst alone: the message load stopped, 3,000 more due at once: `burst_drain_per_s`.

`--wake-delay-ms N` gives every wake turn a model call that takes N ms (see
bench.hostbench.agents). `--quick`: 1,000 wakes over 10 s, bursts of 300.
Writes bench/results/wakes.json; `main()` returns the same dict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "wakes.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.hostbench import quick  # noqa: E402

WORKERS = 2
MESSAGE_RATE = 100.0
MESSAGE_CLIENTS = 2
MESSAGE_CONVERSATIONS = 200  # per client
POLL_S = 0.1


def _sizes() -> dict[str, Any]:
    if quick():
        return {"wakes": 1000, "spread_s": 10.0, "lead_s": 5.0, "grace_s": 10.0, "burst": 300,
                "burst_timeout_s": 30.0, "conversations": 50}
    return {"wakes": int(os.environ.get("FALAI_BENCH_WAKES", "10000")), "spread_s": 60.0, "lead_s": 15.0,
            "grace_s": 20.0, "burst": int(os.environ.get("FALAI_BENCH_BURST", "3000")), "burst_timeout_s": 30.0,
            "conversations": MESSAGE_CONVERSATIONS}


def _template() -> tuple[str, dict[str, Any]]:
    """One conversation parked on the wait, through the real host; its blob is cloned."""
    from bench.hostbench import models
    from falai_django import host

    session_model = models()["session"]
    host.handle("tpl", {"message": "oi", "id": "tpl.1"})
    host.handle("tpl", {"message": "meu nome é Ana", "id": "tpl.2"})
    blob = session_model.objects.get(pk="tpl").blob
    session_model.objects.filter(pk="tpl").delete()
    return json.dumps(blob), blob


def _park(prefix: str, count: int, lead: timedelta, step: timedelta):
    """Park `count` conversations, due from now + `lead` (counted once the template is built)."""
    from django.utils import timezone

    from bench.hostbench import models
    from falai_django.engine.jstime import to_iso, to_ms
    from falai_django.engine.session import Session
    from falai_django.models.sql import session_columns

    found = models()
    session_model, wake_model = found["session"], found["wake"]
    text, blob = _template()
    first_at = timezone.now() + lead
    run_id = blob["runs"][0]["id"]
    step_id = blob["runs"][0]["stepId"]
    rows, wakes = [], []
    for i in range(count):
        sid = f"{prefix}{i}"
        clone = json.loads(text.replace("tpl", sid))
        at = first_at + step * i
        key = f"{run_id.replace('tpl', sid)}:{step_id}:{to_ms(at)}"
        clone["runs"][0]["waiting"].update(key=key, until=to_iso(at))
        clone["version"] = 1
        columns = session_columns(Session.from_json(clone, sid))
        rows.append(session_model(id=sid, version=1, blob=clone, **columns))
        wakes.append(wake_model(**{found["wake_session"]: sid}, key=key, at=at))
    session_model.objects.bulk_create(rows, batch_size=1000)
    wake_model.objects.bulk_create(wakes, batch_size=1000)
    return first_at


def _start(args: list[str], log_dir: Path) -> subprocess.Popen:
    from bench.hostbench import environment

    env = {**environment(), "FALAI_BENCH_WORKERS": str(WORKERS)}
    log = open(log_dir / f"{args[0]}.log", "wb")  # the child keeps its own descriptor
    process = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    process.log_path = log_dir / f"{args[0]}.log"  # type: ignore[attr-defined]
    log.close()
    return process


def _check_alive(*processes: subprocess.Popen) -> None:
    """A cluster or dispatcher that died makes every wake late: say so, with its log."""
    for process in processes:
        if process.poll() is not None:
            tail = process.log_path.read_text(errors="replace")[-3000:]  # type: ignore[attr-defined]
            raise RuntimeError(f"{' '.join(process.args[2:])} exited with {process.returncode}:\n{tail}")


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def _done(prefix: str) -> int:
    from bench.hostbench import models

    found = models()
    return found["wake"].objects.filter(**{f"{found['wake_session_field']}__pk__startswith": prefix}, state="done").count()


def _wait_done(prefix: str, count: int, deadline: float) -> float:
    """Until the `count` wakes of `prefix` are done or `deadline` (monotonic); the wall time then."""
    from django.utils import timezone

    while time.monotonic() < deadline:
        if _done(prefix) >= count:
            break
        time.sleep(0.5)
    return timezone.now()


def _lateness(prefix: str, ended_at) -> dict[str, Any]:
    """Lateness of every wake of `prefix`: done ones by `fired_at`, the others by `ended_at`."""
    from bench.hostbench import models

    found = models()
    rows = list(found["wake"].objects.filter(**{f"{found['wake_session_field']}__pk__startswith": prefix})
                .values_list("at", "fired_at", "state"))
    done = [(at, fired) for at, fired, state in rows if state == "done" and fired is not None]
    late = [(fired - at).total_seconds() for at, fired in done]
    late += [(ended_at - at).total_seconds() for at, fired, state in rows if not (state == "done" and fired)]
    return {"lateness": late, "fired": [fired for _, fired in done], "count": len(rows), "done": len(done),
            "first_at": min((at for at, _, _ in rows), default=None)}


def _broker_backlog() -> int | None:
    """Tasks waiting in django-q2's ORM queue (sends and wake chunks), None with another broker."""
    try:
        from django_q.models import OrmQ

        return OrmQ.objects.count()
    except Exception:  # noqa: BLE001 - a diagnostic only
        return None


def measure() -> dict[str, Any]:
    from bench.hostbench import environment, percentile, progress, setup_django
    from bench.hostbench.agents import wake_delay_s
    from bench.hostbench.pool import Pool

    sizes = _sizes()
    setup_django()
    from django.db import connections

    work_dir = Path(tempfile.mkdtemp(prefix="falai-wakes-"))
    stop_file = work_dir / "stop"
    cluster = _start(["qcluster"], work_dir)
    dispatcher = _start(["falai_dispatch_wakes", "--poll", str(POLL_S)], work_dir)
    load_results: list[dict[str, Any]] = []
    try:
        with Pool(MESSAGE_CLIENTS, "bench.hostbench.clients:init_django", env=environment()) as clients:
            clients.call("bench.hostbench.clients:warm_host",
                         [{"prefix": f"m{i}-", "conversations": sizes["conversations"]} for i in range(len(clients))])
            time.sleep(1.0)  # the cluster and the dispatcher up before the first wake is due
            _check_alive(cluster, dispatcher)
            load_started = time.monotonic()
            clients.submit_timed("bench.hostbench.clients:host_turns", 3600.0, rate=MESSAGE_RATE / MESSAGE_CLIENTS,
                                 stop_file=str(stop_file))
            try:
                # 1. the spread, under the message load
                parking = time.monotonic()
                _park("s", sizes["wakes"], timedelta(seconds=sizes["lead_s"]),
                      timedelta(seconds=sizes["spread_s"] / sizes["wakes"]))
                park_s = time.monotonic() - parking  # over lead_s: the first wakes were due before they landed
                due_end = parking + sizes["lead_s"] + sizes["spread_s"]
                spread_end = _wait_done("s", sizes["wakes"], due_end + sizes["grace_s"])
                _check_alive(cluster, dispatcher)
                spread = _lateness("s", spread_end)
                backlog = {"after_spread": _broker_backlog()}
                progress(f"wakes: spread {spread['done']}/{spread['count']} done, "
                         f"p99 {percentile(spread['lateness'], 99):.2f}s")
                # 2. a burst, still under the message load
                burst_at = _park("b", sizes["burst"], timedelta(seconds=2), timedelta(0))
                burst_end = _wait_done("b", sizes["burst"], time.monotonic() + 2 + sizes["burst_timeout_s"])
                burst = _lateness("b", burst_end)
                backlog["after_burst_under_load"] = _broker_backlog()
                progress(f"wakes: burst under load {burst['done']}/{burst['count']} done")
            finally:
                stop_file.touch()
                load_results = clients.collect(MESSAGE_CLIENTS, timeout=120)
            load_s = time.monotonic() - load_started
        # 3. a burst alone
        time.sleep(1.0)
        backlog["before_burst_alone"] = _broker_backlog()
        idle_at = _park("i", sizes["burst"], timedelta(seconds=2), timedelta(0))
        idle_end = _wait_done("i", sizes["burst"], time.monotonic() + 2 + sizes["burst_timeout_s"])
        _check_alive(cluster, dispatcher)
        idle = _lateness("i", idle_end)
        progress(f"wakes: burst alone {idle['done']}/{idle['count']} done")
    finally:
        _stop(dispatcher)
        _stop(cluster)
        logs = {name: (work_dir / f"{name}.log").read_text(errors="replace")[-1500:]
                for name in ("qcluster", "falai_dispatch_wakes") if (work_dir / f"{name}.log").exists()}
        import shutil

        shutil.rmtree(work_dir, ignore_errors=True)
        connections.close_all()

    def drain_rate(phase: dict[str, Any], due_at) -> float | None:
        if not phase["fired"]:
            return None
        span = (max(phase["fired"]) - due_at).total_seconds()
        return round(phase["done"] / span, 1) if span > 0 else None

    late = spread["lateness"]
    fired = spread["fired"]
    spread_span = (max(fired) - min(fired)).total_seconds() if len(fired) > 1 else 0
    turns = sum(r["turns"] for r in load_results)
    window = max((r["seconds"] for r in load_results), default=load_s)
    return {
        "database": "postgresql",
        "broker": "orm",
        "workers": WORKERS,
        "quick": quick(),
        "wake_delay_ms": round(wake_delay_s() * 1000, 3),
        "wakes": sizes["wakes"],
        "spread_s": sizes["spread_s"],
        "fired": spread["done"],
        "spread_not_done": spread["count"] - spread["done"],
        "spread_park_s": round(park_s, 2),
        "spread_lead_s": sizes["lead_s"],
        "lateness_p50_s": round(percentile(late, 50), 3),
        "lateness_p99_s": round(percentile(late, 99), 3),
        "lateness_max_s": round(max(late), 3) if late else None,
        "spread_fired_per_s": round(len(fired) / spread_span, 1) if spread_span else None,
        "burst": sizes["burst"],
        "wakes_per_s": drain_rate(burst, burst_at),
        "burst_under_load_done": burst["done"],
        "burst_under_load_lateness_p99_s": round(percentile(burst["lateness"], 99), 3),
        "burst_drain_per_s": drain_rate(idle, idle_at),
        "burst_alone_done": idle["done"],
        "burst_alone_lateness_p99_s": round(percentile(idle["lateness"], 99), 3),
        "message_turns_per_s": round(turns / window, 1) if window else None,
        "message_rate_target": MESSAGE_RATE,
        "message_p50_ms": max((r["p50_ms"] for r in load_results), default=None),
        "message_p99_ms": max((r["p99_ms"] for r in load_results), default=None),
        "message_max_behind_s": max((r["max_behind_s"] for r in load_results), default=None),
        "broker_backlog": backlog,
        # the end of each process's output, when some wake was never honoured (a diagnostic)
        "process_logs": logs if spread["count"] - spread["done"] else {},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "dispatcher_poll_s": POLL_S,
    }


def main() -> dict[str, Any]:
    from bench.hostbench import run_child, write_result

    result = write_result(RESULTS, run_child(Path(__file__).resolve(), timeout=900))
    print_table(result)
    return result


def print_table(r: dict[str, Any]) -> None:
    print(f"{r['wakes']} wakes due over {r['spread_s']:.0f} s, {r['workers']} workers, message load "
          f"{r['message_turns_per_s']} turns/s (target {r['message_rate_target']:.0f}), wake model delay "
          f"{r['wake_delay_ms']} ms")
    rows = [
        ("lateness p50 / p99 / max s (every wake)",
         f"{r['lateness_p50_s']} / {r['lateness_p99_s']} / {r['lateness_max_s']}", "p99 ≤ 1 s"),
        ("not done by the end of the spread", r["spread_not_done"], ""),
        ("fired/s during the spread", r["spread_fired_per_s"], ""),
        (f"burst of {r['burst']} under load: wakes/s", r["wakes_per_s"], "≥ 300"),
        (f"burst of {r['burst']} alone: drained/s", r["burst_drain_per_s"], "≥ 700"),
        ("message turn p50 / p99 ms", f"{r['message_p50_ms']} / {r['message_p99_ms']}", ""),
    ]
    for label, value, target in rows:
        print(f"{label:<44}{value!s:>26}  {target}")


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main, options={"--wake-delay-ms": "FALAI_BENCH_WAKE_DELAY_MS"})
