"""`make run` from a clean copy of the tree in a fresh virtual environment.

The working tree (what `git ls-files` lists plus untracked files that are not ignored: what a
clone of the next commit holds) is copied to a temporary directory. Its `.venv` is a new
virtual environment that reuses this one's installed packages through a `.pth` file, so the
test stays fast and needs no network; the install stamp is touched so `make` skips `pip`.
Then `make run` starts on a free port, the admin login page must answer, the printed password
must log in, and a Ctrl-C (SIGINT to the foreground process group, as a terminal sends it)
must stop every process it started.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from falai_django.testing.postgres import free_port

from .conftest import alive

ROOT = Path(__file__).resolve().parents[2]


def copy_tree(dest: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = ROOT / rel
        if rel.startswith(".venv/") or not source.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def fresh_venv(clone: Path) -> None:
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = list((venv / "lib").glob("python3*/site-packages"))
    # Reuse this environment's packages (not its editable install of /work/main: .pth files inside a
    # directory named by a .pth line are not run, so `falai_django` comes from the clone).
    (site / "reuse-installed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (venv / ".installed").touch()  # newer than pyproject.toml: `make` skips pip


def descendants(root_pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root_pid}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def log_in(base: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{base}/admin/login/").read()
    token = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode({"username": "admin", "password": password, "csrfmiddlewaretoken": token,
                                   "next": "/falai/playground/"}).encode()
    page = opener.open(urllib.request.Request(f"{base}/admin/login/?next=/falai/playground/", data=form,
                                              headers={"Referer": f"{base}/admin/login/"}))
    assert page.url.endswith("/falai/playground/"), "the printed password did not log in"
    assert "Provider: offline" in page.read().decode()
    return opener, next(c.value for c in jar if c.name == "csrftoken")  # rotated at login


def chat_and_see_it_sent(base: str, opener: urllib.request.OpenerDirector, token: str) -> None:
    """A message through the streaming API; then the worker (qcluster) must send the reply."""
    request = urllib.request.Request(
        f"{base}/falai/sessions/make-run/messages/stream", data=json.dumps({"text": "oi", "id": "m1"}).encode(),
        headers={"Content-Type": "application/json", "X-CSRFToken": token})
    body = opener.open(request, timeout=30).read().decode()
    assert "event: delta" in body and "event: done" in body and "[offline]" in body, body
    deadline = time.monotonic() + 30
    while True:
        state = json.loads(opener.open(f"{base}/falai/sessions/make-run", timeout=10).read())
        statuses = [item["send_status"] for item in state["history"] if item["role"] == "assistant"]
        if statuses == ["sent"]:
            return
        assert time.monotonic() < deadline, f"the worker never sent the reply: {statuses}"
        time.sleep(0.3)


def test_make_run_from_a_clean_clone(tmp_path):
    if shutil.which("make") is None:
        pytest.fail("`make` is not installed")
    clone = tmp_path / "clone"
    copy_tree(clone)
    assert not (clone / "db.sqlite3").exists()
    fresh_venv(clone)
    port = free_port()
    # A fresh machine's environment: no settings module, key or database URL of the test run
    # (`make run` sets up its own SQLite file; the suite may be running on PostgreSQL).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "GEMINI_", "VIRTUAL_ENV", "DATABASE_URL", "FALAI_TEST_"))}
    env.update(FALAI_DEMO_PORT=str(port), PYTHONUNBUFFERED="1")
    demo = subprocess.Popen(["make", "run"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(line.decode(errors="replace") for line in demo.stdout),
                              daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{port}"
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while True:
            assert demo.poll() is None, "make run exited early:\n" + "".join(output)
            try:
                if urllib.request.urlopen(f"{base}/admin/login/", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the admin login page never answered:\n" + "".join(output)
            time.sleep(0.3)
        time.sleep(2)  # let the worker fork its processes
        children = descendants(demo.pid)
        text = "".join(output)
        passwords = re.findall(r"(?m)^\s*Password\s*:\s*(\S+)\s+<- shown once", text)
        assert len(passwords) == 1, text
        assert re.search(r"(?m)^\s*Provider\s*:\s*offline", text), text
        assert text.count("falai_django.W001") <= 1, text  # the checks run once, not in every child
        opener, token = log_in(base, passwords[0])
        chat_and_see_it_sent(base, opener, token)
        commands = {b" ".join(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3]).decode(errors="replace")
                    for pid in children if alive(pid)}
        for name in ("manage.py runserver", "manage.py qcluster", "manage.py falai_dispatch_wakes"):
            assert name in commands, commands
    finally:
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C in the terminal
        try:
            demo.wait(timeout=30)
        except subprocess.TimeoutExpired:
            for pid in children | descendants(demo.pid):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            os.killpg(demo.pid, signal.SIGKILL)
            pytest.fail("make run did not stop within 30 s of Ctrl-C:\n" + "".join(output))
    reader.join(5)
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in children if alive(pid)]
    for pid in left:  # never leave strays behind, even when failing
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after Ctrl-C: {left}\n" + "".join(output)
    assert len(children) >= 4  # run_demo, the web server, the cluster (and its workers), the dispatcher
    assert "run_demo: all stopped." in "".join(output)
