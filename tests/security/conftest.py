"""Security tests: the kit's agent and sender, django-q2 in-line, a real webhook secret."""

from __future__ import annotations

import pytest

from . import kit


@pytest.fixture(autouse=True)
def falai_settings(settings, monkeypatch):
    from django_q.conf import Conf

    from falai_django import conf

    settings.FALAI = kit.falai_settings()
    settings.SECRET_KEY = kit.DJANGO_SECRET
    monkeypatch.setattr(Conf, "SYNC", True)
    conf.clear_cache()
    kit.reset()
    kit.sent.clear()
    yield
    conf.clear_cache()
