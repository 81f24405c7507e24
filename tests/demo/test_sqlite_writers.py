"""`make run` on SQLite: many writers on one file, none answered "database is locked" (issue 28).

The demo's writers are separate processes on one SQLite file: the web server (admin saves, API
messages), django-q2's `qcluster` (it sends the replies) and `manage.py falai_dispatch_wakes`.
With the old settings (rollback journal, deferred transactions) an admin save, which reads the
object and then writes inside one transaction, got "database is locked" at once whenever another
process was writing: SQLite does not wait (the busy timeout) for a read transaction that wants to
become a write one. The demo settings' OPTIONS (WAL, `transaction_mode` IMMEDIATE, a timeout)
make every writer wait its turn.

Here, on a temporary file migrated with `project.settings` (`SQLITE_PATH`): a real `qcluster`
and a real dispatcher run while two writer processes of five threads each (ten writers) save
flows as the admin does (read, then save, in `transaction.atomic`) and hand messages to
`host.handle` as the API does. No process may say "database is locked", every save and message
must be in the file, and the worker must have sent every reply.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 2
SAVERS = 3  # threads per process saving flows, admin-like
TALKERS = 2  # threads per process handing messages to host.handle, API-like
ROUNDS = 12

WRITER = r'''
import os, sys, threading, time, traceback
import django

django.setup()
from django.db import connection, transaction

from falai_django import host
from falai_django.models import Flow

proc, savers, talkers, rounds, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
failures = []


def spec(flow_id):
    return {"id": flow_id, "on": [{"message": []}], "steps": [{"id": "oi", "say": "Oi"}]}


def save_flows(flow_id):
    for i in range(rounds):
        with transaction.atomic():  # the admin's change view: read the object, then save it
            flow = Flow.objects.get(pk=flow_id)
            flow.name = f"{flow_id} {i + 1}"
            flow.save(note=f"round {i + 1}")


def send_messages(session_id):
    for i in range(rounds):
        result = host.handle(session_id, {"message": f"oi {i}", "id": f"{session_id}-{i}"})
        if result.status != "done":
            raise AssertionError(f"{session_id} message {i}: {result.status}")


def run(target, arg):
    try:
        while not os.path.exists(go):  # every thread of every process starts at once
            time.sleep(0.01)
        target(arg)
    except BaseException:
        failures.append(arg)
        traceback.print_exc()
    finally:
        connection.close()


flows = [f"p{proc}-f{n}" for n in range(savers)]
for flow_id in flows:
    Flow(id=flow_id, spec=spec(flow_id)).save()
connection.close()
threads = [threading.Thread(target=run, args=(save_flows, flow_id)) for flow_id in flows]
threads += [threading.Thread(target=run, args=(send_messages, f"p{proc}-s{n}")) for n in range(talkers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(f"writer {proc}: {len(failures)} failed", file=sys.stderr)
sys.exit(1 if failures else 0)
'''


def demo_env(db: Path) -> dict[str, str]:
    """The demo's own environment on `db`: offline provider, SQLite, django-q2's ORM broker."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "GEMINI_", "OPENAI_", "ANTHROPIC_", "WHATSAPP_", "VIRTUAL_ENV",
                                "DATABASE_URL", "FALAI_"))}
    env.update(DJANGO_SETTINGS_MODULE="project.settings", SQLITE_PATH=str(db), FALAI_OFFLINE_DELAY_MS="0",
               PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    return env


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def sent_and_total(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db, timeout=20) as conn:
        return conn.execute("SELECT COUNT(*) FILTER (WHERE send_status = 'sent'), COUNT(*) FROM falai_history "
                            "WHERE role = 'assistant'").fetchone()


def test_the_demos_writers_share_one_sqlite_file_without_database_is_locked(tmp_path):
    db = tmp_path / "demo.sqlite3"
    env = demo_env(db)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks"], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    go = tmp_path / "go"
    logs = {name: (tmp_path / f"{name}.log").open("w+") for name in
            ("qcluster", "dispatcher", *(f"writer{n}" for n in range(PROCESSES)))}

    def spawn(name: str, args: list[str]) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=logs[name],
                                stderr=subprocess.STDOUT, process_group=0)

    services = [spawn("qcluster", ["manage.py", "qcluster", "--skip-checks"]),
                spawn("dispatcher", ["manage.py", "falai_dispatch_wakes", "--skip-checks"])]
    writers = [spawn(f"writer{n}", ["-c", WRITER, str(n), str(SAVERS), str(TALKERS), str(ROUNDS), str(go)])
               for n in range(PROCESSES)]
    try:
        time.sleep(1.5)  # the writers import Django and create their flows; the cluster starts
        go.touch()
        codes = [writer.wait(60) for writer in writers]
        deadline = time.monotonic() + 20
        while (counts := sent_and_total(db))[0] < counts[1] or counts[1] == 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        alive = [proc.poll() is None for proc in services]
    finally:
        for proc in writers + services:
            stop(proc)
    output = {name: (log.seek(0), log.read())[1] for name, log in logs.items()}
    everything = "\n".join(f"--- {name}\n{text[-3000:]}" for name, text in output.items())
    locked = {name: text.count("database is locked") for name, text in output.items()
              if "database is locked" in text}
    assert not locked, f"'database is locked' said by {locked}\n{everything}"
    assert codes == [0] * PROCESSES and alive == [True, True], everything

    with sqlite3.connect(db) as conn:
        flows = dict(conn.execute("SELECT id, version FROM falai_flow"))
        versions = dict(conn.execute("SELECT flow_id, COUNT(*) FROM falai_flow_version GROUP BY flow_id"))
        inbound = dict(conn.execute("SELECT conversation_id, COUNT(*) FROM falai_history WHERE role = 'user' "
                                    "GROUP BY conversation_id"))
    expected_flows = {f"p{p}-f{n}" for p in range(PROCESSES) for n in range(SAVERS)}
    assert flows == dict.fromkeys(expected_flows, ROUNDS + 1)  # created, then saved ROUNDS times
    assert versions == dict.fromkeys(expected_flows, ROUNDS + 1)
    assert inbound == {f"p{p}-s{n}": ROUNDS for p in range(PROCESSES) for n in range(TALKERS)}
    sent, total = counts
    assert total >= PROCESSES * TALKERS * ROUNDS and sent == total, (sent, total, everything)
