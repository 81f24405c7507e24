"""`make run`'s own processes carry out the admin's replay (issue 50): the request only queues it
and django-q2's `qcluster` replays the conversations.

`scripts/run_demo.py` runs on a temporary SQLite file and a free port (`running_demo`, as in
test_sqlite_writers.py). Three customers talk to the demo's Ana through the API; a person stores a
version of the `triagem` flow (disabled: a draft that greets first) and, from its page, asks to
replay the recent conversations against it. The web process answers with a redirect to the run's
page at once; the run is finished by the worker, polled through the page's `?progress=1`, and
its page then lists the three conversations. Nothing of theirs changed.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import urllib.parse

from .test_sqlite_writers import Browser, running_demo

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
    with running_demo(tmp_path) as demo:
        person = Browser(demo.base)
        person.log_in(demo.password)
        for sid in SESSIONS:
            for n, text in enumerate(("oi", "Sou a Rita, da ACME")):
                status, body = person.json("POST", f"/falai/sessions/{sid}/messages", {"text": text, "id": f"{sid}-{n}"})
                assert status == 200, body
        status, body = person.json("PUT", "/falai/flows/triagem", {"spec": DRAFT, "enabled": False})
        assert status in (200, 201), body
        before = conversations(demo.db)

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
        assert progress["state"] == "done", (progress, "".join(demo.output)[-4000:])
        assert progress["total"] == progress["done"] == 3 and progress["errors"] == 0
        assert progress["different"] + progress["needs_model"] == 3  # the draft greets first: every one changes
        status, page = person.open(run_path.group(1))
        assert status == 200 and all(f'data-conversation="{sid}"' in page for sid in SESSIONS)
        assert "Olá! Aqui é a Ana, da versão nova." in page
        assert conversations(demo.db) == before  # the replay wrote nothing of theirs and sent nothing
        # the worker ran it: the web process only queued it
        text = "".join(demo.output)
        assert re.search(r"\[Q\] INFO Process-\S+ processing \S+ 'falai_django.tasks.replay_run'", text), text[-4000:]
