"""`make run`'s own processes carry out the admin's replay (issue 50): the request only queues it
and django-q2's `qcluster` replays the conversations.

`scripts/run_demo.py` runs on a temporary SQLite file and a free port (as in
test_sqlite_writers.py). Three customers talk to the demo's Ana through the API; a person stores a
version of the `triagem` flow (disabled: a draft that greets first) and, from its page, asks to
replay the recent conversations against it. The web process answers with a redirect to the run's
page at once; the run is finished by the worker, polled through the page's `?progress=1`, and
its page then lists the three conversations. Nothing of theirs changed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse

from falai_django.testing.postgres import free_port

from .test_sqlite_writers import ROOT, Browser, demo_env

SESSIONS = ("5511977700001", "5511977700002", "5511977700003")
DRAFT = {"id": "triagem", "name": "Triagem (rascunho)", "on": [{"message": []}],
         "steps": [{"id": "ola", "say": "Olá! Aqui é a Ana, da versão nova."},
                   {"id": "quem", "collect": ["nome", "empresa"]},
                   {"id": "tchau", "say": "Obrigada, {{data.nome}}!"}]}


def conversations(db) -> list[tuple]:
    with sqlite3.connect(db, timeout=20) as conn:
        return conn.execute("SELECT id, version FROM agent_sessions ORDER BY id").fetchall() + conn.execute(
            "SELECT COUNT(*), 0 FROM falai_history").fetchall()


def test_the_demo_worker_replays_what_the_admin_page_asked_for(tmp_path):
    db, port = tmp_path / "demo.sqlite3", free_port()
    base = f"http://127.0.0.1:{port}"
    demo = subprocess.Popen([sys.executable, "scripts/run_demo.py"], cwd=ROOT, env=demo_env(db, port),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(line.decode(errors="replace") for line in demo.stdout),
                              daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while not (found := re.findall(r"(?m)^\s*Password\s*:\s*(\S+)\s+<- shown once", "".join(output))):
            assert demo.poll() is None, "run_demo exited:\n" + "".join(output)
            assert time.monotonic() < deadline, "the demo never came up:\n" + "".join(output)
            time.sleep(0.2)
        person = Browser(base)
        person.log_in(found[0])
        for sid in SESSIONS:
            for n, text in enumerate(("oi", "Sou a Rita, da ACME")):
                status, body = person.json("POST", f"/falai/sessions/{sid}/messages", {"text": text, "id": f"{sid}-{n}"})
                assert status == 200, body
        status, body = person.json("PUT", "/falai/flows/triagem", {"spec": DRAFT, "enabled": False})
        assert status in (200, 201), body
        before = conversations(db)

        path = "/admin/falai_django/flow/triagem/versions/1/replay/"
        form = urllib.parse.urlencode({"scope": "flow", "limit": "10", "csrfmiddlewaretoken": person.csrf()}).encode()
        status, page = person.open(path, form)
        assert status == 200, page[:2000]  # urllib followed the redirect to the run's page
        assert 'id="falai-replay-progress"' in page and "Replay against version 1 of" in page
        run_path = re.search(r'data-url="(/admin/falai_django/flow/triagem/replays/\d+/)\?progress=1"', page)
        assert run_path, page[:3000]

        deadline = time.monotonic() + 60
        while True:
            status, body = person.open(run_path.group(1) + "?progress=1")
            assert status == 200, body[:500]
            progress = json.loads(body)
            if progress["finished"] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert progress["state"] == "done", (progress, "".join(output)[-4000:])
        assert progress["total"] == progress["done"] == 3 and progress["errors"] == 0
        assert progress["different"] + progress["needs_model"] == 3  # the draft greets first: every one changes
        status, page = person.open(run_path.group(1))
        assert status == 200 and all(f'data-conversation="{sid}"' in page for sid in SESSIONS)
        assert "Olá! Aqui é a Ana, da versão nova." in page
        assert conversations(db) == before  # the replay wrote nothing of theirs and sent nothing
        # the worker ran it: the web process only queued it
        text = "".join(output)
        assert re.search(r"\[Q\] INFO Process-\S+ processing \S+ 'falai_django.tasks.replay_run'", text), text[-4000:]
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        reader.join(5)
