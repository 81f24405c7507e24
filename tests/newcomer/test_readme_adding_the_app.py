"""The README's "Adding the app to an existing project", followed exactly as written.

The section's blocks are read from README.md itself (never copies): each says in its first line
where it goes (`# myproject/agents.py — new file`, `# myproject/settings.py — append`,
`# myproject/urls.py — replace`, `# in a terminal …`). A fresh `django-admin startproject`
gets them as they say; then the section's own commands run (`migrate`, `createsuperuser`,
`drf_create_token`, `runserver`), and its own `curl` is sent over HTTP with the token it made.
The one stand-in: django-q2 runs its tasks in-line (`Q_CLUSTER["sync"]`), in place of the
`qcluster` terminal, so the README's sender prints the reply in the web server's output.
When the README drifts (a module it names but does not show, a sender that cannot run, a
command that fails), these tests fail.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from falai_django.testing.postgres import free_port

ROOT = Path(__file__).resolve().parents[2]
SECTION = re.compile(r"^## Adding the app to an existing project\n(.*?)(?=^## )", re.S | re.M)
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
PLACE = re.compile(r"^# (myproject/[\w/]+\.py) — (new file|append|replace)\s*$")
TERMINAL = re.compile(r"^# in a\b.*terminal")
PACKAGE = "myproject"
USER = "newcomer"


@dataclass
class Block:
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0]


def section() -> str:
    found = SECTION.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, 'README.md has no section "## Adding the app to an existing project"'
    return found.group(1)


def blocks() -> list[Block]:
    return [Block(language, text) for language, text in FENCE.findall(section())]


def python_blocks() -> list[tuple[str, str, Block]]:
    """(path, how, block) for every python block, as its first line says."""
    placed = []
    for block in blocks():
        if block.language == "python":
            where = PLACE.match(block.first_line)
            assert where, f"a python block does not say where it goes: {block.first_line!r}"
            placed.append((where.group(1), where.group(2), block))
    return placed


def commands() -> list[list[str]]:
    """The section's `python manage.py …` lines, split as a shell would (comments dropped)."""
    found = []
    for block in blocks():
        if block.language == "bash":
            for line in block.text.splitlines():
                if line.startswith("python manage.py"):
                    found.append(shlex.split(line, comments=True))
    return found


def curl() -> tuple[str, dict[str, str], str]:
    """The section's curl: (path, headers, body), with `$TOKEN` left for the caller."""
    text = next(b.text for b in blocks() if b.language == "bash" and "curl " in b.text)
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    words = words[words.index("curl"):]
    url = next(word for word in words if word.startswith("http"))
    headers = {}
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "-H":
            name, _, header_value = value.partition(":")
            headers[name.strip()] = header_value.strip()
    body = words[words.index("-d") + 1]
    return "/" + url.split("/", 3)[3], headers, body


def apply(project: Path) -> list[str]:
    """Put every python block where its first line says; the files it wrote or changed."""
    touched = []
    for relative, how, block in python_blocks():
        target = project / relative
        if how == "new file":
            assert not target.exists(), f"{relative} is marked new but startproject made it"
            target.write_text(block.text, encoding="utf-8")
        elif how == "append":
            assert target.exists(), f"{relative} is marked append but does not exist"
            target.write_text(target.read_text(encoding="utf-8") + "\n" + block.text, encoding="utf-8")
        else:
            assert target.exists(), f"{relative} is marked replace but does not exist"
            target.write_text(block.text, encoding="utf-8")
        touched.append(relative)
    return touched


def environment(project: Path, **extra: str) -> dict[str, str]:
    """The test run's environment without anything that would pick a model or a setting for the
    project (no model key: the README's agent must fall back to the offline provider)."""
    drop = ("DJANGO_", "FALAI_", "GEMINI_", "OPENAI_", "ANTHROPIC_", "WHATSAPP_", "DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(PYTHONPATH=str(project), PYTHONUNBUFFERED="1", **extra)
    return env


def manage(project: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=project, env=environment(project, **extra),
                          capture_output=True, text=True, timeout=180)


def startproject(tmp_path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "django", "startproject", PACKAGE, str(tmp_path)], check=True,
                   env=environment(tmp_path))
    return tmp_path


def test_every_block_of_the_section_says_where_it_goes():
    found = blocks()
    assert found, "the section has no code blocks"
    for block in found:
        assert PLACE.match(block.first_line) or TERMINAL.match(block.first_line), (
            f"a {block.language} block does not say in its first line where it goes: {block.first_line!r}")


def test_every_module_the_settings_name_is_shown_in_the_section():
    placed = {path: block.text for path, _how, block in python_blocks()}
    settings = placed[f"{PACKAGE}/settings.py"]
    named = re.findall(r'"(AGENT|SENDER)":\s*"([\w.]+)"', settings)
    assert {name for name, _ in named} == {"AGENT", "SENDER"}, named
    for _name, dotted in named:
        module, _, attribute = dotted.rpartition(".")
        path = module.replace(".", "/") + ".py"
        assert path in placed, f"{dotted} is named in the settings but {path} is not shown"
        assert re.search(rf"^(def {attribute}\(|{attribute} = )", placed[path], re.M), (
            f"{path} does not define {attribute}")


def test_the_sender_kinds_are_documented_as_the_code_writes_them():
    from falai_django.handoff import HUMAN_KIND

    sender = dict((path, block.text) for path, _how, block in python_blocks())[f"{PACKAGE}/channel.py"]
    for kind in ("ai", "verbatim", HUMAN_KIND):
        assert f'"{kind}"' in sender, kind


def test_the_commands_are_the_ones_the_test_follows():
    names = [words[2] for words in commands()]
    assert names[:3] == ["migrate", "createsuperuser", "drf_create_token"], names
    for process in ("runserver", "qcluster", "falai_dispatch_wakes"):
        assert process in names, f"the section never says to run {process}"
    path, headers, body = curl()
    assert headers.get("Authorization") == "Token $TOKEN", headers
    assert re.fullmatch(r"/falai/sessions/[^/]+/messages", path), path
    assert json.loads(body)["text"]


def test_a_fresh_startproject_reaches_a_first_reply_by_the_section_alone(tmp_path):
    project = startproject(tmp_path)
    touched = apply(project)
    assert sorted(touched) == sorted({f"{PACKAGE}/settings.py", f"{PACKAGE}/agents.py",
                                      f"{PACKAGE}/channel.py", f"{PACKAGE}/urls.py"}), touched
    # The one stand-in: django-q2 runs tasks in-line in place of the `qcluster` terminal.
    settings = project / PACKAGE / "settings.py"
    settings.write_text(settings.read_text(encoding="utf-8") + '\nQ_CLUSTER["sync"] = True\n', encoding="utf-8")

    for words in commands():
        name = words[2]
        if name == "migrate":
            done = manage(project, *words[2:])
            assert done.returncode == 0, done.stdout + done.stderr
            checked = manage(project, "check")
            output = checked.stdout + checked.stderr
            assert checked.returncode == 0, output
            assert "falai_django.E" not in output and "W003" not in output and "W004" not in output, output
            assert "falai_django.W001" in output  # the honest warning the section names
        elif name == "createsuperuser":  # the section's prompt, answered by the environment
            done = manage(project, name, "--noinput", "--username", USER, "--email", "n@example.com",
                          DJANGO_SUPERUSER_PASSWORD="a-long-pass-phrase-1")
            assert done.returncode == 0, done.stdout + done.stderr
        elif name == "drf_create_token":
            done = manage(project, name, USER)
            assert done.returncode == 0, done.stdout + done.stderr
            token = re.search(r"\b([0-9a-f]{40})\b", done.stdout).group(1)

    port = free_port()
    log = tmp_path / "runserver.log"
    output = log.open("a", encoding="utf-8")  # append: the server's writes always land at the end
    server = subprocess.Popen([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
                              cwd=project, env=environment(project), stdout=output, stderr=subprocess.STDOUT)
    try:
        path, headers, body = curl()
        headers = {name: value.replace("$TOKEN", token) for name, value in headers.items()}
        wait_listening(port, server, log)
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body.encode(), headers=headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, answer = response.status, json.loads(response.read())
        except urllib.error.HTTPError as refused:
            pytest.fail(f"{refused.code}: {refused.read()[:2000]!r}\n{_read(log)}")
        assert status == 200, answer
        assert answer["status"] == "done", answer
        replies = [message["text"] for message in answer["messages"]]
        assert replies and replies[0].startswith("[offline]"), replies
        conversation = path.split("/")[3]
        deadline = time.monotonic() + 30
        while f"[to {conversation}] {replies[0]}" not in _read(log):
            assert time.monotonic() < deadline, "the README's sender never printed the reply:\n" + _read(log)
            time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=30)
        output.close()


def wait_listening(port: int, server: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    """Until the server accepts connections on 127.0.0.1:port; its log in the failure when it
    exits first or never listens."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert server.poll() is None, _read(log)
            assert time.monotonic() < deadline, f"{server.args[:4]} never listened:\n" + _read(log)
            time.sleep(0.2)


def _read(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")
