"""Host bench on PostgreSQL with a zero-latency scripted provider.

    .venv/bin/python bench/host.py

- `sql_per_inbound_turn`: statements `host.handle` runs for an inbound message on an existing
  conversation (inbox row, session + history load, then ONE transaction: CAS update, run-log
  update, history / outbox insert); `round_trips_per_inbound_turn` counts the load's two
  statements as the one round trip they travel in. The django-q2 hand-off of the send after commit is reported
  apart (`sql_enqueue_after_commit`: one INSERT with the ORM broker, none with Redis).
- `host_p50_ms` / `host_p99_ms`: time in `host.handle` minus the time inside `agent.turn`
  (the engine + the zero-latency provider), i.e. what the host adds per turn.
- `turns_per_s`: inbound turns through the service (`host.handle`), one process, sequential;
  `http_turns_per_s`: the same through the DRF endpoint (Django's in-process test client: the
  whole Django/DRF request stack with token auth, no network socket).

Writes bench/results/host.json; `main()` returns the same dict.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "host.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TURNS = 600
HTTP_TURNS = 300


def measure() -> dict[str, Any]:
    from bench.hostbench import setup_django, summary_ms

    setup_django()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

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

    # Warm up, and open one conversation per lane.
    lanes = [f"bench-{n}" for n in range(20)]
    for sid in lanes:
        host.handle_message(sid, "oi", id=f"{sid}.0")

    # SQL statements for one inbound turn on an existing conversation.
    with CaptureQueriesContext(connection) as queries:
        host.handle_message(lanes[0], "ainda não", id=f"{lanes[0]}.sql")
    # A round trip may carry two statements (the load: session + transcript); count statements.
    round_trips = [q["sql"] for q in queries.captured_queries]
    statements = [part.strip() for sql in round_trips for part in sql.split("; SELECT ")]
    control = [s for s in statements if s.strip().upper() in ("BEGIN", "COMMIT", "ROLLBACK")]
    enqueue = [s for s in statements if "django_q" in s]
    turn_sql = [s for s in statements if "django_q" not in s and s not in control]
    turn_round_trips = [s for s in round_trips if "django_q" not in s and s.strip().upper() not in
                        ("BEGIN", "COMMIT", "ROLLBACK")]

    overhead, totals = [], []
    started = time.perf_counter()
    for i in range(TURNS):
        sid = lanes[i % len(lanes)]
        engine_time[0] = 0.0
        t0 = time.perf_counter()
        result = host.handle_message(sid, "ainda não", id=f"{sid}.t{i}")
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
    for i in range(HTTP_TURNS):
        sid = lanes[i % len(lanes)]
        t0 = time.perf_counter()
        response = client.post(f"/falai/sessions/{sid}/messages", data=json.dumps({"text": "ainda não",
                                                                                   "id": f"{sid}.h{i}"}),
                               content_type="application/json")
        http_totals.append(time.perf_counter() - t0)
        assert response.status_code == 200, response.content
    http_s = time.perf_counter() - started

    over, tot, http = summary_ms(overhead), summary_ms(totals), summary_ms(http_totals)
    return {
        "database": "postgresql",
        "sql_per_inbound_turn": len(turn_sql),
        "sql_statements": turn_sql,
        "round_trips_per_inbound_turn": len(turn_round_trips),
        "sql_enqueue_after_commit": len(enqueue),
        "transaction_control": control,
        "transactions_per_turn": control.count("BEGIN"),
        "host_p50_ms": over["p50"],
        "host_p99_ms": over["p99"],
        "turn_total_p50_ms": tot["p50"],
        "turn_total_p99_ms": tot["p99"],
        "turns_per_s": round(TURNS / service_s, 1),
        "http_p50_ms": http["p50"],
        "http_p99_ms": http["p99"],
        "http_turns_per_s": round(HTTP_TURNS / http_s, 1),
        "load_average": [round(x, 2) for x in __import__("os").getloadavg()],
        "turns": TURNS,
        "http_turns": HTTP_TURNS,
        "notes": "one process, sequential; zero-latency scripted provider; ORM broker for the send hand-off; "
                 "CONN_MAX_AGE=300 (django-q2's ORM broker closes non-persistent connections on every enqueue)",
    }


def main() -> dict[str, Any]:
    from bench.hostbench import run_and_record

    return run_and_record(Path(__file__).resolve(), RESULTS)


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main)
