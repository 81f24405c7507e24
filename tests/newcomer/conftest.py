"""Issue 15, part B: the playground's sandbox, and what a newcomer tripped on.

The demo agent (Ana, offline, fake clock) behind the host, django-q2 in-line, and a recording
sender standing for a project's real channel (`demo.support.record_send`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def demo_settings(settings, monkeypatch):
    from demo import support
    from django_q.conf import Conf

    from falai_django import conf

    # "queue": sends go through django-q2 (in-line here) on any database; "auto" would hand them
    # to the dispatcher by NOTIFY on PostgreSQL, and none runs here (tests/host covers NOTIFY).
    settings.FALAI = {"AGENT": "demo.support.current_agent", "SENDER": "demo.support.record_send",
                      "SEND_HANDOFF": "queue"}
    monkeypatch.setattr(Conf, "SYNC", True)
    conf.clear_cache()
    agent = support.reset()
    yield agent
    conf.clear_cache()


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client
