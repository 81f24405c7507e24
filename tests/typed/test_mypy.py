"""The hints serve users: the wheel carries `py.typed`, and a project's module written the README's
way type-checks under `mypy --strict` against the package as a wheel installs it (not this
checkout: an editable install's import hook is invisible to type checkers). Its misuses are
reported, so the names are read, not taken as Any. The library's own run is `make lint`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_MODULE = '''
"""myproject/agents.py and myproject/channel.py, as the README writes them, in one module."""
from __future__ import annotations

import os
from typing import Any

from falai_django import Agent, GeminiProvider, TurnResult, falai, host, parse_duration
from falai_django.host import HostResult
from falai_django.providers.offline import OfflineProvider
from falai_django.sending import OutboundSend

provider: GeminiProvider | OfflineProvider
if os.environ.get("GEMINI_API_KEY"):
    provider = GeminiProvider(api_key=os.environ["GEMINI_API_KEY"], model="gemini-2.5-flash")
else:
    provider = OfflineProvider(language="pt")


def tell_sales(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"ok": True, "told": params.get("message")}


f = falai().fields({
    "nome": {"type": "string", "ask": "Pergunte o nome da pessoa, sem tom de formulário."},
    "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
})
notify = f.action(parameters={"message": {"type": "string"}}, run=tell_sales)
ana: Agent = f.agent(
    name="Ana",
    provider=provider,
    flows=[f.flow({
        "id": "triagem", "name": "Triagem", "on": [{"message": []}],
        "steps": [
            {"id": "quem", "prompt": "Descubra quem é e de onde fala.", "collect": ["nome", "empresa"]},
            {"id": "avisa", "do": "notify", "params": {"message": "{{nome}} de {{empresa}}"}},
            {"id": "tchau", "prompt": "Agradeça e diga que um vendedor continua daqui."},
        ],
    })],
    actions={"notify": notify},
)
FOLLOW_UP_MS: int = parse_duration("24h")


def send(message: OutboundSend) -> str | None:
    print(f"[to {message.session_id}] {message.text}", flush=True)
    return None


def first_reply(session_id: str) -> list[str]:
    result: TurnResult = ana.turn(session_id=session_id, message="oi")
    return [m.text for m in result.messages]


def on_webhook(session_id: str, text: str, message_id: str) -> str:
    handled: HostResult = host.handle_message(session_id, text, id=message_id)
    host.silence(session_id, "human", owner="maria", mode="stop")
    if handled.result is not None:  # None when the input was parked or failed
        print(len(handled.result.messages))
    return handled.status
'''

# each line a misuse mypy must report, with the code it reports it under
MISUSES = {
    "def send_wrong(message: OutboundSend) -> str:\n    return message.txt": "attr-defined",
    "def count(session_id: str) -> int:\n    return ana.turn(session_id=session_id, message='oi').messages": "return-value",
    "def handle_number(session_id: str) -> None:\n    host.handle_message(session_id, 5)": "arg-type",
    "def duration_text() -> str:\n    return parse_duration('5m')": "return-value",
    "def replies(session_id: str) -> int:\n    return len(host.handle_message(session_id, 'oi').result.messages)":
        "union-attr",
}


def _mypy(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH puts the installed wheel first on the interpreter's path, which mypy reads for
    # installed packages; the checkout's editable import hook is not a path mypy can follow.
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("MYPYPATH", None)
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built as a wheel from a copy of this tree (so the build leaves nothing here)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "falai_django", source / "falai_django",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = work / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-4000:]
    (found,) = dist.glob("falai_django-*.whl")
    return found


@pytest.fixture(scope="module")
def site(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-4000:]
    return target


def test_the_wheel_carries_py_typed(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "falai_django/py.typed" in names
    assert "falai_django/engine/agent.py" in names  # the wheel is the package, not only the marker


def test_a_readme_style_module_type_checks_strict_against_the_wheel(site: Path, tmp_path: Path) -> None:
    assert (site / "falai_django" / "py.typed").exists()
    assert not (site / "falai_django" / "__editable__").exists()
    (tmp_path / "agents.py").write_text(USER_MODULE)
    out = _mypy(["--strict", "agents.py"], tmp_path, site)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found in 1 source file" in out.stdout


def test_without_py_typed_mypy_refuses_the_package(site: Path, tmp_path: Path) -> None:
    # The control: the same module against a copy of the install without the marker fails,
    # so the success above is the marker's doing.
    bare = tmp_path / "site"
    shutil.copytree(site, bare)
    (bare / "falai_django" / "py.typed").unlink()
    (tmp_path / "agents.py").write_text(USER_MODULE)
    out = _mypy(["--strict", "agents.py"], tmp_path, bare)
    assert out.returncode == 1
    assert 'module is installed, but missing library stubs or py.typed marker  [import-untyped]' in out.stdout


def test_misuses_are_reported_with_their_codes(site: Path, tmp_path: Path) -> None:
    body = USER_MODULE + "".join(f"\n\n{misuse}\n" for misuse in MISUSES)
    (tmp_path / "agents.py").write_text(body)
    out = _mypy(["--strict", "--show-error-codes", "agents.py"], tmp_path, site)
    assert out.returncode == 1, out.stdout
    errors = [line for line in out.stdout.splitlines() if ": error: " in line]
    lines = body.splitlines()
    reported = {}
    for error in errors:
        number = int(error.split(":")[1])
        code = re.search(r"\[([a-z-]+)\]$", error)
        reported[lines[number - 1].strip()] = code.group(1) if code else None
    expected = {misuse.splitlines()[1].strip(): code for misuse, code in MISUSES.items()}
    assert reported == expected, out.stdout


def _strict_flags() -> list[str]:
    """The flags `mypy --strict` turns on, as its help lists them."""
    out = subprocess.run([sys.executable, "-m", "mypy", "--help"], capture_output=True, text=True, timeout=120)
    help_text = " ".join(out.stdout.split())
    listed = re.search(r"--strict Strict mode; enables the following flags: (.*?)(?: --[a-z-]+ NAME| --disable)",
                       help_text)
    assert listed, "mypy --help no longer lists the strict flags where this test reads them"
    return [flag.replace("- ", "-") for flag in re.findall(r"--[a-z][a-z- ]*[a-z]", listed.group(1))]


def test_the_strict_packages_carry_every_flag_of_mypy_strict() -> None:
    # mypy's `strict = true` cannot be set per module (it turns strict on everywhere), so
    # pyproject spells its flags out for engine/, llm/, stores/, providers/ and testing/; a flag
    # a newer mypy adds to --strict must be added there too.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    (strict,) = [o for o in config["overrides"] if "falai_django.engine.*" in o["module"]]
    assert set(strict["module"]) == {f"falai_django.{p}.*" for p in ("engine", "llm", "stores", "providers",
                                                                      "testing")}
    flags = _strict_flags()
    assert "--disallow-untyped-defs" in flags and "--warn-return-any" in flags
    for flag in flags:
        name = flag.removeprefix("--").replace("-", "_")
        if name.startswith("no_"):
            key, value = name.removeprefix("no_"), False
        else:
            key, value = name, True
        where = config if key in ("warn_redundant_casts", "warn_unused_configs") else strict
        assert where.get(key) == value, f"{flag}: pyproject.toml's strict override lacks {key} = {value}"


def test_no_module_is_let_off_and_ignores_say_why() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert not config.get("ignore_errors") and not any(o.get("ignore_errors") for o in config["overrides"])
    assert config["files"] == ["falai_django"]
    # the Django app's public modules: every function annotated
    (public,) = [o for o in config["overrides"] if "falai_django.host.*" in o["module"]]
    assert public["disallow_untyped_defs"] is True
    assert {"falai_django", "falai_django.conf", "falai_django.host", "falai_django.sending"} <= set(public["module"])
    # every `# type: ignore[...]` in the package names its code and gives its reason
    bad = []
    for path in (ROOT / "falai_django").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "type: ignore" not in line:
                continue
            if not re.search(r"# type: ignore\[[a-z-]+(, ?[a-z-]+)*\]  # \S", line):
                bad.append(f"{path.relative_to(ROOT)}:{number}: {textwrap.shorten(line.strip(), 100)}")
    assert not bad, "\n".join(bad)
