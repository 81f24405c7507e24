"""Flows-as-data test setup: the test agent behind the host, django-q2 in-line, a recording
sender, and the flows cache forgotten between tests."""

from __future__ import annotations

import pytest

from . import agents


@pytest.fixture(autouse=True)
def flows_settings(settings, monkeypatch):
    from django_q.conf import Conf

    from falai_django import conf
    from falai_django.flows import running

    settings.FALAI = {"AGENT": "flows_data.agents.current_agent", "SENDER": "flows_data.conftest.record_send",
                      "FLOWS_DB": True, "FLOWS_RELOAD_S": 2.0}
    settings.LANGUAGE_CODE = "en"
    monkeypatch.setattr(Conf, "SYNC", True)
    conf.clear_cache()
    running.invalidate()
    agents.reset()
    SENT.clear()
    yield
    conf.clear_cache()
    running.invalidate()


SENT: list[str] = []


def record_send(message) -> str:  # noqa: ANN001
    SENT.append(message.text)
    return f"sent-{len(SENT)}"


@pytest.fixture
def staff(db):
    from django.contrib.auth.models import User

    return User.objects.create_superuser("flora", "flora@example.com", "pw")
