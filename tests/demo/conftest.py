"""Demo test setup: django-q2 in-line, the demo agent offline (the file SQLite database comes
from tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def demo_settings(settings, monkeypatch):
    """The demo agent (offline, fake clock) behind the host, and a recording sender."""
    from django_q.conf import Conf

    from falai_django import conf

    from . import support

    # "queue": sends go through django-q2 (in-line here) on any database; "auto" would hand them
    # to the dispatcher by NOTIFY on PostgreSQL, and none runs here (tests/host covers NOTIFY).
    settings.FALAI = {"AGENT": "demo.support.current_agent", "SENDER": "demo.support.record_send",
                      "SEND_HANDOFF": "queue"}
    monkeypatch.setattr(Conf, "SYNC", True)
    conf.clear_cache()
    agent = support.reset()
    yield agent
    conf.clear_cache()
