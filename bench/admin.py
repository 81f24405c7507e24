"""Admin bench on PostgreSQL: the conversation list with 100,000 conversations (issue 7).

    .venv/bin/python bench/admin.py

Fills `falai_bench` with 100,000 conversations (a third asking, a tenth silenced), 200,000
transcript rows and 50,000 pending wakes, then times the admin's list through Django's test
client as a superuser: the default page, a status filter, an owner filter, a search on a
collected value and a search on transcript words (median of REPEAT, after one warm-up), with
the queries each page ran. Writes bench/results/admin.json; `main()` returns the same dict.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "admin.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CONVERSATIONS, HISTORY, REPEAT = 100_000, 200_000, 5
PAGES = {"list": "", "filter_status": "?status=asking", "filter_owner": "?human_owner=agent3",
         "search_data": "?q=Empresa+77777", "search_transcript": "?q=mensagem+1234567"}
FILL = [
    f"""INSERT INTO agent_sessions (id, version, blob, created_at, updated_at, asking_flow, asking_step,
        silenced_reason, human_owner, last_user_at, last_assistant_at, run_count)
      SELECT 'c' || n, 1, jsonb_build_object('id', 'c' || n, 'v', 4, 'version', 1,
             'data', jsonb_build_object('empresa', 'Empresa ' || n)), now(), now(),
             CASE WHEN n % 3 = 0 THEN 'triagem' END, CASE WHEN n % 3 = 0 THEN 'quem' END,
             CASE WHEN n % 10 = 0 THEN 'human: agent' || n % 5 END, CASE WHEN n % 10 = 0 THEN 'agent' || n % 5 END,
             now() - n * interval '1 second', now() - n * interval '1 second', n % 3
      FROM generate_series(1, {CONVERSATIONS}) n""",
    f"""INSERT INTO falai_history (conversation_id, role, content, at, after_ms, send_attempts, send_error)
      SELECT 'c' || (n % {CONVERSATIONS} + 1), CASE WHEN n % 2 = 0 THEN 'user' ELSE 'assistant' END,
             'mensagem ' || n, now(), 0, 0, '' FROM generate_series(1, {HISTORY}) n""",
    f"""INSERT INTO falai_wake (conversation_id, key, at, state, attempts)
      SELECT 'c' || n, 'silence:x:c' || n, now() + n * interval '1 second', 'pending', 0
      FROM generate_series(1, {CONVERSATIONS}, 2) n""",
    "ANALYZE",
]


def measure() -> dict[str, Any]:
    from bench.hostbench import setup_django

    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    with connection.cursor() as cursor:
        for sql in FILL:
            cursor.execute(sql)
    user = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser(
        "bench-admin", "bench@example.com", "unused")
    client = Client()
    client.force_login(user)
    result: dict[str, Any] = {"database": "postgresql", "conversations": CONVERSATIONS,
                              "history_rows": HISTORY, "repeat": REPEAT}
    for name, query in PAGES.items():
        url = "/admin/falai_django/conversation/" + query
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200, url
        result[f"{name}_queries"] = len(queries)  # now: the next request clears the log
        times = []
        for _ in range(REPEAT):
            started = time.perf_counter()
            client.get(url)
            times.append(time.perf_counter() - started)
        result[f"{name}_ms"] = round(statistics.median(times) * 1000, 1)
    return result


def main() -> dict[str, Any]:
    from bench.hostbench import run_and_record

    result = run_and_record(Path(__file__).resolve(), RESULTS)
    print(f"admin list with {result['conversations']:,} conversations (median of {result['repeat']}):")
    for name in PAGES:
        print(f"  {name:<20}{result[f'{name}_ms']:>10} ms{result[f'{name}_queries']:>6} queries")
    return result


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main)
