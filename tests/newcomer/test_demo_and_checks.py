"""The demo's front door, the admin without `None`, the checks' words, `make run`'s console and
its install."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from django.core.management import load_command_class
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_the_demo_root_redirects_to_the_playground(client):
    response = client.get("/")
    assert response.status_code == 302 and response.url == reverse("falai:playground")


@pytest.mark.django_db(transaction=True)
def test_the_admin_page_of_a_finished_conversation_shows_no_none(demo_settings, admin_client):
    from demo import support

    from falai_django import host

    for i, text in enumerate(support.TRIAGE):
        host.handle("5511", {"message": text, "id": f"m{i}"})
    page = admin_client.get(reverse("admin:falai_django_conversation_change", args=["5511"]))
    html = page.content.decode()
    assert page.status_code == 200
    flow_step = re.search(r'field-flow_step.*?<div class="readonly">(.*?)</div>', html, re.S)
    assert flow_step and flow_step.group(1).strip() == "-"
    text = re.sub(r"<[^>]+>", " ", html)
    assert not re.search(r"\bNone\b", text)


def _problems(settings, agent: str, ids: tuple[str, ...]) -> list:
    from falai_django import conf
    from falai_django.checks import check_falai_settings

    settings.FALAI = {"AGENT": agent, "WEBHOOK_SECRET": "x"}
    conf.clear_cache()
    try:
        return [p for p in check_falai_settings() if p.id in ids]
    finally:
        conf.clear_cache()


def test_an_agent_that_fails_to_build_is_reported_with_the_engines_words(settings, tmp_path, monkeypatch):
    (tmp_path / "typo_agent.py").write_text(
        "from falai_django import falai\n"
        "from falai_django.providers.offline import OfflineProvider\n"
        'f = falai().fields({"nome": {"type": "string"}})\n'
        'ana = f.agent(name="Ana", provider=OfflineProvider(), flows=[f.flow({"id": "t", "on": [{"message": []}],'
        ' "steps": [{"id": "q", "collect": ["nme"]}]})])\n'
    )
    (tmp_path / "typo_factory.py").write_text(
        "from falai_django import falai\n"
        "from falai_django.providers.offline import OfflineProvider\n"
        "def build():\n"
        '    f = falai().fields({"nome": {"type": "string"}})\n'
        '    return f.agent(name="Ana", provider=OfflineProvider(), flows=[f.flow({"id": "t", "on": [{"message": []}],'
        ' "steps": [{"id": "q", "collect": ["nme"]}]})])\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ids = ("falai_django.E002", "falai_django.E011")
    for path in ("typo_agent.ana", "typo_factory.build"):
        [problem] = _problems(settings, path, ids)
        assert problem.id == "falai_django.E011", path
        assert 'unknown field "nme" in collect' in problem.msg and "fails to build" in problem.msg
        assert "cannot be imported" not in problem.msg and "importable dotted path" not in problem.hint
    [missing] = _problems(settings, "no_such_module.ana", ids)
    assert missing.id == "falai_django.E002" and "cannot be imported" in missing.msg


def test_the_docs_apps_check(settings):
    from falai_django.checks import check_api_docs_apps

    assert check_api_docs_apps() == []
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "drf_spectacular_sidecar"]
    [warning] = check_api_docs_apps()
    assert warning.id == "falai_django.W010" and "'drf_spectacular_sidecar'" in warning.msg


def test_make_run_runs_the_checks_once(monkeypatch, keep_signal_handlers):
    """W001 used to print four times: migrate, runserver, qcluster and the dispatcher each ran the checks."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_demo_under_test", ROOT / "scripts" / "run_demo.py")
    run_demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_demo)
    ran: list[list[str]] = []

    def started(commands):
        ran.extend([c[2:] for c in commands])
        os.kill(os.getpid(), signal.SIGINT)  # as if Ctrl-C came right away: nothing is started
        return []

    monkeypatch.setattr(run_demo, "manage", lambda *args, **kw: ran.append(list(args)))
    monkeypatch.setattr(run_demo, "setup_django", lambda: None)
    monkeypatch.setattr(run_demo, "ensure_admin", lambda: None)
    monkeypatch.setattr(run_demo, "start", started)
    monkeypatch.chdir(ROOT)
    assert run_demo.main() == 0
    names = [command[0] for command in ran]
    assert names == ["check", "migrate", "runserver", "qcluster", "falai_dispatch_wakes"]
    assert all("--skip-checks" in command for command in ran[1:])  # the one `check` printed them
    for name in names[1:]:  # and each command accepts the flag
        app = {"runserver": "django.core", "migrate": "django.core", "qcluster": "django_q"}.get(name, "falai_django")
        parser = load_command_class(app, name).create_parser("manage.py", name)
        assert parser.parse_args(["--skip-checks"]).skip_checks is True


def test_the_demo_sender_says_on_the_console_that_it_sent(caplog):
    from django.conf import settings

    from falai_django.sending import OutboundSend, log_sender

    assert settings.LOGGING["loggers"]["falai_django"]["level"] == "INFO"
    assert logging.getLogger("falai_django.sending").isEnabledFor(logging.INFO)
    handlers = logging.getLogger("falai_django").handlers
    assert any(isinstance(h, logging.StreamHandler) for h in handlers)  # printed, not only recorded
    with caplog.at_level(logging.INFO, logger="falai_django"):
        log_sender(OutboundSend(session_id="5511", text="oi", kind="ai", media=None, key=None, run_id=None,
                                step_id=None, after_ms=0, emission_key="e", idempotency_key="abcdef123456789",
                                item_id=1))
    assert "falai send to 5511 [abcdef123456]: oi" in caplog.text


@pytest.fixture
def make_dir(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("LOUD SKIP: `make` is not installed")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def dry(cwd: Path, target: str) -> str:
    """`make -n`: what would run, nothing run. Run as a top-level make (under `make test` the
    inherited MAKELEVEL would add "Entering directory /tmp/pytest-of-…" lines to the output)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", "-n", target], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True).stdout


def test_make_run_installs_the_runtime_and_its_server_and_make_test_adds_the_dev_extras(make_dir):
    run = dry(make_dir, "run")
    assert "-m venv .venv" in run and "pip install -q -e '.[serve]'\n" in run
    assert "[dev]" not in run and "pytest" not in run
    test = dry(make_dir, "test")
    assert "pip install -q -e '.[serve]'\n" in test and "pip install -q -e '.[dev]'" in test and "pytest" in test

    venv = make_dir / ".venv"
    venv.mkdir()
    (venv / ".installed").touch()  # a machine where `make run` already installed the runtime
    assert "pip install" not in dry(make_dir, "run")
    test = dry(make_dir, "test")
    assert "pip install -q -e '.[dev]'" in test and "pip install -q -e '.[serve]'\n" not in test
    (venv / ".installed-dev").touch()
    assert "pip install" not in dry(make_dir, "test") and "pip install" not in dry(make_dir, "run")
    old = time.time() - 100  # then the dependency list changes: both are installed again
    os.utime(venv / ".installed", (old, old))
    os.utime(venv / ".installed-dev", (old, old))
    test = dry(make_dir, "test")
    assert "pip install -q -e '.[serve]'\n" in test and "pip install -q -e '.[dev]'" in test


def test_make_lint_and_make_test_type_check_the_package_before_the_tests(make_dir):
    # CI runs `make test`: a mypy error fails it before a single test runs
    for target in ("lint", "test"):
        out = dry(make_dir, target)
        assert ".venv/bin/ruff check .\n" in out and ".venv/bin/mypy\n" in out, out
    test = dry(make_dir, "test")
    assert test.index(".venv/bin/mypy") < test.index("-m pytest")
    assert "[mypy-" not in (ROOT / "pyproject.toml").read_text()  # one config: pyproject's [tool.mypy]
    assert not any((ROOT / name).exists() for name in ("mypy.ini", ".mypy.ini", "setup.cfg"))


def test_make_run_stops_with_a_sentence_when_the_checks_fail(monkeypatch, capsys, keep_signal_handlers):
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_demo_failing", ROOT / "scripts" / "run_demo.py")
    run_demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_demo)
    ran: list[list[str]] = []

    def manage(*args, **kw):
        ran.append(list(args))
        if args[0] == "check":
            raise subprocess.CalledProcessError(1, ["manage.py", *args])

    monkeypatch.setattr(run_demo, "manage", manage)
    monkeypatch.chdir(ROOT)
    assert run_demo.main() == 1
    assert [c[0] for c in ran] == ["check"]  # nothing migrated, nothing started
    assert "`manage.py check` found errors (above)" in capsys.readouterr().err


def test_make_run_refuses_production_mode_with_a_sentence(monkeypatch, capsys, keep_signal_handlers):
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_demo_production", ROOT / "scripts" / "run_demo.py")
    run_demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_demo)
    ran: list[list[str]] = []
    monkeypatch.setattr(run_demo, "manage", lambda *args, **kw: ran.append(list(args)))
    monkeypatch.setenv("DJANGO_DEBUG", "0")
    monkeypatch.chdir(ROOT)
    assert run_demo.main() == 1
    assert ran == []  # nothing checked, migrated or started
    assert "DJANGO_DEBUG=0 is production mode, which `make run` (runserver) is not" in capsys.readouterr().err
