"""System checks name what is wrong; the management commands report and are safe to repeat."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from falai_django.checks import check_falai_settings

pytestmark = pytest.mark.django_db(transaction=True)


def ids(settings_override, settings) -> set[str]:
    settings.FALAI = settings_override
    return {problem.id for problem in check_falai_settings()}


def test_a_good_configuration_has_no_errors(settings):
    problems = check_falai_settings()
    assert [p for p in problems if p.id.startswith("falai_django.E")] == []


def test_a_missing_agent_is_e001(settings):
    assert "falai_django.E001" in ids({"SENDER": "host.senders.record"}, settings)


def test_an_agent_that_does_not_import_is_e002_and_names_the_error(settings):
    settings.FALAI = {"AGENT": "nowhere.agents.ana"}
    problems = [p for p in check_falai_settings() if p.id == "falai_django.E002"]
    assert problems and "nowhere.agents.ana" in problems[0].msg and "ModuleNotFoundError" in problems[0].msg


def test_an_agent_that_is_not_an_agent_is_e003(settings):
    assert "falai_django.E003" in ids({"AGENT": "host.agents.NAME"}, settings)


def test_a_sender_that_does_not_import_is_e004(settings):
    assert "falai_django.E004" in ids({"AGENT": "host.agents.current_agent", "SENDER": "x.y.z"}, settings)


@pytest.mark.parametrize(("override", "expected"), [
    ({"CONTEXT": "x.y.z"}, "falai_django.E005"),
    ({"CONTEXT": "host.agents.NAME"}, "falai_django.E005"),  # imports, but is not callable
    ({"SENDER": "host.agents.NAME"}, "falai_django.E004"),
    ({"WEBHOOK_SECRET": 123}, "falai_django.E006"),
])
def test_context_sender_and_secret_problems_are_named(settings, override, expected):
    found = ids({"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x", **override}, settings)
    assert expected in found, found


def test_django_q_missing_or_unconfigured_is_named(settings, monkeypatch):
    from falai_django import checks

    good = {"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x"}
    del settings.Q_CLUSTER
    assert "falai_django.E008" in ids(good, settings)

    class WithoutDjangoQ:  # the app registry stays as it is; only the check's view changes
        INSTALLED_APPS = [app for app in settings.INSTALLED_APPS if app != "django_q"]

        def __getattr__(self, name):
            return getattr(settings, name)

    monkeypatch.setattr(checks, "settings", WithoutDjangoQ())
    assert "falai_django.E007" in ids(good, settings)


def test_an_empty_webhook_secret_is_a_warning(settings):
    assert "falai_django.W001" in ids({"AGENT": "host.agents.current_agent"}, settings)


def test_unknown_keys_and_bad_numbers_are_named(settings):
    found = ids({"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x", "HISTRY_LIMIT": 3,
                 "HISTORY_LIMIT": -1}, settings)
    assert {"falai_django.W002", "falai_django.E009"} <= found


def test_the_orm_broker_without_persistent_connections_is_a_warning(settings):
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    assert "falai_django.W003" in ids({"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x"}, settings)


def test_sqlite_without_immediate_transactions_is_a_warning(settings, monkeypatch):
    """Issue 28: deferred transactions on a SQLite file that several processes write answered
    admin saves with "database is locked"; the demo settings take the write lock at BEGIN."""
    from falai_django import checks

    good = {"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x"}
    demo = settings.DATABASES["default"]
    assert "falai_django.W004" not in ids(good, settings)  # the demo settings (or PostgreSQL)
    if demo["ENGINE"].endswith("sqlite3"):
        assert demo["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
        assert "journal_mode=WAL" in demo["OPTIONS"]["init_command"] and demo["OPTIONS"]["timeout"] >= 20

    class With:  # only the check's view of DATABASES changes, never the connections'
        def __init__(self, default):
            self.DATABASES = {"default": default}

        def __getattr__(self, name):
            return getattr(settings, name)

    sqlite = "django.db.backends.sqlite3"
    for options in ({"timeout": 20}, {"transaction_mode": "DEFERRED"}, {"transaction_mode": None}):
        monkeypatch.setattr(checks, "settings", With({"ENGINE": sqlite, "OPTIONS": options, "CONN_MAX_AGE": 60}))
        assert "falai_django.W004" in ids(good, settings), options
    for default in ({"ENGINE": sqlite, "OPTIONS": {"transaction_mode": "immediate"}, "CONN_MAX_AGE": 60},
                    {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}, "CONN_MAX_AGE": 60}):
        monkeypatch.setattr(checks, "settings", With(default))
        assert "falai_django.W004" not in ids(good, settings), default


def test_migrate_sessions_converts_3x_rows_and_reports_what_failed_and_why(tmp_path, legacy_blobs_dir):
    from falai_django.stores.django import DjangoStore

    lines = []
    for name in ("prospectar-midflow.json", "ilojista-signals.json", "v4.json"):
        blob = json.loads((legacy_blobs_dir / name).read_text())
        lines.append({"id": blob.get("id") or blob.get("sessionId") or name, "blob": blob})
    lines.append({"id": "broken", "blob": {"what": "is this"}})
    source = tmp_path / "old.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    out = StringIO()
    call_command("falai_migrate_sessions", "--jsonl", str(source), stdout=out)
    report = out.getvalue()
    assert "migrated: 3" in report
    assert "failed: 2" in report and "broken:" in report and "<line 5>" in report
    migrated = DjangoStore().load(lines[0]["id"])
    assert migrated is not None and migrated.v == 4 and migrated.version == 1
    again = StringIO()
    call_command("falai_migrate_sessions", "--jsonl", str(source), stdout=again)
    assert "already in the v4 table (left alone): 3" in again.getvalue()


def test_requeue_shows_a_progress_bar_and_a_summary(capsys):
    from falai_django import host

    host.handle_message("s1", "oi", id="m1")
    host.handle_message("s1", "meu nome é Ana", id="m2")
    out = StringIO()
    call_command("falai_requeue_wakes", stdout=out)
    printed = capsys.readouterr().out + out.getvalue()
    assert "100% 1/1" in printed and "1 conversations, 1 wakes queued, 0 failed" in printed


def test_a_send_handoff_that_is_not_one_of_the_three_is_an_error(settings):
    assert "falai_django.E010" in ids({"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x",
                                       "SEND_HANDOFF": "carrier-pigeon"}, settings)
    assert "falai_django.E010" not in ids({"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x",
                                           "SEND_HANDOFF": "queue"}, settings)
    assert "falai_django.E009" in ids({"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x",
                                       "SEND_THREADS": 0}, settings)


def test_the_metrics_settings_are_checked(settings):
    base = {"AGENT": "host.agents.current_agent", "WEBHOOK_SECRET": "x"}
    assert "falai_django.E013" in ids({**base, "METRICS_TOKEN": 12345}, settings)
    assert "falai_django.E013" not in ids({**base, "METRICS_TOKEN": "a-long-secret"}, settings)
    assert "falai_django.E009" in ids({**base, "METRICS_FLUSH_S": 0}, settings)
    assert "falai_django.E009" not in ids({**base, "METRICS_FLUSH_S": 5}, settings)
