"""The README's "Adding the app" snippets, pasted as a newcomer would into a fresh
`django-admin startproject`, pass `manage.py check` (no KeyError, no W003, no missing import)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = re.compile(r"## Adding the app to an existing project\n(.*?)\n## ", re.S)
BLOCK = re.compile(r"```python\n(.*?)```", re.S)

AGENT = '''\
from falai_django import falai
from falai_django.providers.offline import OfflineProvider

f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome."}})
ana = f.agent(name="Ana", provider=OfflineProvider(), flows=[f.flow({
    "id": "triagem", "name": "Triagem", "on": [{"message": []}],
    "steps": [{"id": "quem", "collect": ["nome"]}],
})])
'''


def snippets() -> dict[str, str]:
    section = SECTION.search((ROOT / "README.md").read_text()).group(1)
    blocks = BLOCK.findall(section)
    found = {}
    for block in blocks:
        first = block.splitlines()[0]
        if first.startswith("# settings.py"):
            found["settings"] = block
        elif first.startswith("# urls.py"):
            found["urls"] = block
        elif "def send(" in block:
            found["sender"] = block
    assert set(found) == {"settings", "urls", "sender"}, found
    return found


def _check(project: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FALAI_"))}
    environ.update(PYTHONPATH=f"{project}{os.pathsep}{ROOT}", **env)
    return subprocess.run([sys.executable, "manage.py", "check"], cwd=project, env=environ,
                          capture_output=True, text=True, timeout=120)


def test_the_snippets_paste_into_a_fresh_startproject_and_pass_check(tmp_path):
    subprocess.run([sys.executable, "-m", "django", "startproject", "myproject", str(tmp_path)], check=True)
    parts = snippets()
    package = tmp_path / "myproject"
    settings = package / "settings.py"
    settings.write_text(settings.read_text() + "\n" + parts["settings"])
    (package / "urls.py").write_text(parts["urls"])
    (package / "channel.py").write_text(parts["sender"])  # `whatsapp` is the reader's own client
    (package / "agents.py").write_text(AGENT)

    without_secret = _check(tmp_path)
    output = without_secret.stdout + without_secret.stderr
    assert without_secret.returncode == 0, output
    assert "KeyError" not in output and "W003" not in output and "W010" not in output
    assert "falai_django.W001" in output  # the one honest warning: signed webhooks are off

    with_secret = _check(tmp_path, FALAI_WEBHOOK_SECRET="s3cret")
    assert with_secret.returncode == 0, with_secret.stderr
    assert "System check identified no issues" in with_secret.stdout, with_secret.stdout + with_secret.stderr


def test_the_sender_kinds_are_documented_as_the_code_writes_them():
    from falai_django.handoff import HUMAN_KIND

    sender = snippets()["sender"]
    for kind in ("ai", "verbatim", HUMAN_KIND):
        assert f'"{kind}"' in sender, kind
