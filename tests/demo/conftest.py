"""Demo test setup: a file SQLite database, django-q2 in-line, the demo agent offline."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        db.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("falai-demo-db") / "test.sqlite3")
        db.setdefault("OPTIONS", {})["timeout"] = 30


@pytest.fixture
def demo_settings(settings, monkeypatch):
    """The demo agent (offline, fake clock) behind the host, and a recording sender."""
    from django_q.conf import Conf

    from falai_django import conf

    from . import support

    settings.FALAI = {"AGENT": "demo.support.current_agent", "SENDER": "demo.support.record_send"}
    monkeypatch.setattr(Conf, "SYNC", True)
    conf.clear_cache()
    agent = support.reset()
    yield agent
    conf.clear_cache()
