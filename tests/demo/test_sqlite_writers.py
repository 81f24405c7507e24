"""`make run` on SQLite: ten writers at once over HTTP, none answered "database is locked" (issue 44).

The demo's three processes write one SQLite file: the web server (admin saves, API messages),
django-q2's `qcluster` (it sends the replies) and `manage.py falai_dispatch_wakes`. With the old
settings (rollback journal, deferred transactions) 11 of 25 admin saves were answered 500
"database is locked" while API messages arrived: an admin save reads the object and then writes
inside one transaction, and SQLite does not wait (the busy timeout) for a read transaction that
wants to become a write one. The demo settings' OPTIONS (WAL, `transaction_mode` IMMEDIATE, a
timeout) make every writer wait its turn.

Here `scripts/run_demo.py` itself runs (what `make run` runs: its migrate, its admin user with the
printed password, its three supervised processes) on a temporary file (`SQLITE_PATH`) and a free
port. Ten clients start at once: five save flows through the admin's change form (GET the form,
POST it back with a new name, as a person does) and five post messages to the API, each on its
own conversation. Every request must be answered 2xx/302, no process may say "database is
locked", every save and message must be in the file, and the worker must send every reply.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

from falai_django.testing.postgres import free_port

ROOT = Path(__file__).resolve().parents[2]
SAVERS = 5  # clients saving flows through the admin's change form
TALKERS = 5  # clients posting messages to the API
ROUNDS = 8


class ChangeForm(HTMLParser):
    """The fields of the admin's change form as a browser would post them."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self._in_form = False
        self._textarea: tuple[str, list[str]] | None = None
        self._select: str | None = None
        self._selected: str | None = None
        self._first_option: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("id", "").endswith("_form"):
            self._in_form = True
        if not self._in_form or "name" not in a and tag not in ("option",):
            return
        if tag == "input" and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields.append((a["name"], a.get("value", "on" if a.get("type") == "checkbox" else "")))
        elif tag == "textarea":
            self._textarea = (a["name"], [])
        elif tag == "select":
            self._select, self._selected, self._first_option = a["name"], None, None
        elif tag == "option" and self._select is not None:
            if self._first_option is None:
                self._first_option = a.get("value", "")
            if "selected" in a:
                self._selected = a.get("value", "")

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        elif tag == "textarea" and self._textarea is not None:
            self.fields.append((self._textarea[0], "".join(self._textarea[1]).removeprefix("\n")))
            self._textarea = None
        elif tag == "select" and self._select is not None:
            chosen = self._selected if self._selected is not None else self._first_option
            if chosen is not None:
                self.fields.append((self._select, chosen))
            self._select = None


class Browser:
    """One person's browser: cookies, the admin login, CSRF."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def csrf(self) -> str:
        return next(c.value for c in self.jar if c.name == "csrftoken")

    def open(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None,
             method: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Referer": self.base + path, **(headers or {})})
        try:
            with self.opener.open(request, timeout=60) as answer:
                return answer.status, answer.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def log_in(self, password: str) -> None:
        self.open("/admin/login/")
        form = urllib.parse.urlencode({"username": "admin", "password": password,
                                       "csrfmiddlewaretoken": self.csrf(), "next": "/admin/"}).encode()
        status, page = self.open("/admin/login/?next=/admin/", form)
        assert status == 200 and "Log out" in page, f"the printed password did not log in ({status})"

    def json(self, method: str, path: str, body: dict) -> tuple[int, str]:
        return self.open(path, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                           "X-CSRFToken": self.csrf()}, method)


def save_in_admin(browser: Browser, flow_id: str, name: str) -> int:
    """The admin's change view, as a person uses it: open the form, change the name, save."""
    path = f"/admin/falai_django/flow/{flow_id}/change/"
    status, page = browser.open(path)
    if status != 200:
        return status
    form = ChangeForm()
    form.feed(page)
    fields = [(k, v) for k, v in form.fields if k not in ("name", "note", "_continue", "_addanother")]
    fields += [("name", name), ("note", name), ("_save", "Save")]
    status, answer = browser.open(path, urllib.parse.urlencode(fields).encode())
    if status == 200 and "errornote" in answer:  # the form came back with errors: not saved
        return 422
    return status  # 200 after the redirect to the list (urllib follows the 302)


def demo_env(db: Path, port: int) -> dict[str, str]:
    """A fresh machine's environment for `make run`: offline provider, SQLite at `db`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "GEMINI_", "OPENAI_", "ANTHROPIC_", "WHATSAPP_", "VIRTUAL_ENV",
                                "DATABASE_URL", "FALAI_"))}
    env.update(SQLITE_PATH=str(db), FALAI_DEMO_PORT=str(port), FALAI_OFFLINE_DELAY_MS="0", PYTHONUNBUFFERED="1")
    return env


def replies(db: Path) -> tuple[int, int]:
    """(sent, all) of the assistant's messages in the file."""
    with sqlite3.connect(db, timeout=20) as conn:
        return conn.execute("SELECT COUNT(*) FILTER (WHERE send_status = 'sent'), COUNT(*) FROM falai_history "
                            "WHERE role = 'assistant'").fetchone()


def scraped(browser: Browser, sent: int) -> dict:
    """The demo's /falai/metrics (as the logged-in admin) once it counts `sent` replies sent, or
    after 10 s: {(name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    deadline = time.monotonic() + 10
    while True:
        status, text = browser.open("/falai/metrics")
        assert status == 200, text[:500]
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(text) for s in family.samples}
        if samples.get(("falai_sends_total", (("channel", "log"), ("result", "sent")))) == sent or \
                time.monotonic() > deadline:
            return samples
        time.sleep(0.5)


@contextlib.contextmanager
def running_demo(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """`scripts/run_demo.py` (what `make run` runs) on a temporary SQLite file and a free port,
    from its printed admin password to the end of the block, then stopped with Ctrl-C. Yields
    `base` (the URL), `db`, `password`, `output` (its lines so far, read as they come) and
    `process`."""
    db, port = tmp_path / "demo.sqlite3", free_port()
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
        yield SimpleNamespace(base=f"http://127.0.0.1:{port}", db=db, password=found[0], output=output, process=demo)
    finally:
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C, as in a terminal
        try:
            demo.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        reader.join(5)


def test_make_runs_three_processes_take_ten_concurrent_writers_without_database_is_locked(tmp_path):
    statuses: dict[str, list[int]] = {}
    failures: list[str] = []
    with running_demo(tmp_path) as running:
        base, db, password, output, demo = (running.base, running.db, running.password, running.output,
                                            running.process)
        time.sleep(2)  # the worker forks its processes, the dispatcher starts listening

        flows = [f"salvo-{n}" for n in range(SAVERS)]
        setup = Browser(base)
        setup.log_in(password)
        for flow_id in flows:  # one flow per admin client, made through the API
            spec = {"id": flow_id, "on": [{"message": []}], "steps": [{"id": "oi", "say": "Oi"}]}
            status, body = setup.json("PUT", f"/falai/flows/{flow_id}", {"spec": spec, "enabled": False})
            assert status in (200, 201), body

        go = threading.Event()

        def admin(flow_id: str) -> None:
            browser = Browser(base)
            browser.log_in(password)
            go.wait()
            statuses[flow_id] = [save_in_admin(browser, flow_id, f"{flow_id} {i + 1}") for i in range(ROUNDS)]

        def api(session_id: str) -> None:
            browser = Browser(base)
            browser.log_in(password)
            go.wait()
            got = statuses[session_id] = []
            for i in range(ROUNDS):
                status, body = browser.json("POST", f"/falai/sessions/{session_id}/messages",
                                            {"text": f"oi {i}", "id": f"{session_id}-{i}"})
                got.append(status)
                if status != 200:
                    failures.append(f"{session_id} message {i}: {status} {body[:300]}")

        def guarded(target, arg) -> None:
            try:
                target(arg)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
                failures.append(f"{arg}: {exc!r}")

        sessions = [f"5511900000{n:02d}" for n in range(TALKERS)]
        clients = [threading.Thread(target=guarded, args=(admin, f)) for f in flows]
        clients += [threading.Thread(target=guarded, args=(api, s)) for s in sessions]
        for client in clients:
            client.start()
        time.sleep(1.0)  # every client logged in: they all start together
        go.set()
        for client in clients:
            client.join(120)
        assert not any(c.is_alive() for c in clients), "a client is stuck"

        deadline = time.monotonic() + 30
        while (counts := replies(db))[0] < counts[1] or counts[1] == 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert demo.poll() is None, "run_demo exited:\n" + "".join(output)
        metrics = scraped(setup, counts[0])
    text = "".join(output)
    assert "database is locked" not in text, f"{text.count('database is locked')} lock errors:\n{text[-6000:]}"
    assert failures == [], f"{failures}\n{text[-4000:]}"
    expected = {**{f: [200] * ROUNDS for f in flows}, **{s: [200] * ROUNDS for s in sessions}}
    assert statuses == expected, text[-4000:]
    restarted = re.findall(r"run_demo: `[^`]+` (?:exited|killed)[^\n]*", text)
    assert restarted == [], text[-4000:]  # none of the three exited and was restarted

    with sqlite3.connect(db) as conn:
        names = dict(conn.execute("SELECT id, name FROM falai_flow"))
        versions = dict(conn.execute("SELECT flow_id, COUNT(*) FROM falai_flow_version GROUP BY flow_id"))
        inbound = dict(conn.execute("SELECT conversation_id, COUNT(*) FROM falai_history WHERE role = 'user' "
                                    "GROUP BY conversation_id"))
    assert {f: names.get(f) for f in flows} == {f: f"{f} {ROUNDS}" for f in flows}
    assert {f: versions.get(f) for f in flows} == dict.fromkeys(flows, ROUNDS + 1)  # made, then saved ROUNDS times
    assert inbound == dict.fromkeys(sessions, ROUNDS)
    sent, total = counts
    assert total >= TALKERS * ROUNDS and sent == total, (sent, total)
    # Out of the box, across the three processes: the web server ran the API's turns, the worker
    # sent the replies; the web server's /falai/metrics has both.
    assert f"{base}/falai/metrics" in text and f"{base}/falai/health/ready" in text  # the banner names them
    assert metrics[("falai_turns_total", (("kind", "message"), ("status", "done")))] == TALKERS * ROUNDS
    assert metrics[("falai_sends_total", (("channel", "log"), ("result", "sent")))] == sent
