"""WhatsApp channel tests: the real webhook view, the real sender against a local fake Graph API
(a real HTTP server on 127.0.0.1), django-q2 in-line (`sync`), the database of the host tests."""

from __future__ import annotations

import os

import pytest

from . import agents, fake_graph
from .payloads import APP_SECRET, PHONE_NUMBER_ID

VERIFY_TOKEN = "verify-me"
TOKEN = fake_graph.TOKEN


@pytest.fixture(scope="session")
def graph_server():
    fake = fake_graph.start()
    yield fake
    fake.server.shutdown()


@pytest.fixture
def graph(graph_server):
    graph_server.requests.clear()
    graph_server.script.clear()
    graph_server.media.clear()
    graph_server.gets.clear()
    return graph_server


@pytest.fixture(autouse=True)
def whatsapp_settings(settings, monkeypatch, graph_server):
    from django_q.conf import Conf

    from falai_django import conf

    settings.FALAI = {
        "AGENT": "whatsapp.agents.current_agent",
        "SENDER": "falai_django.channels.whatsapp.send",
        "SEND_RETRY_BASE_S": 30.0,  # a retry is never due within the test unless it says so
        "TURN_RETRY_BASE_S": 0.01,
        "SEND_HANDOFF": "queue",
        "WHATSAPP": {
            "PHONE_NUMBER_ID": PHONE_NUMBER_ID,
            "ACCESS_TOKEN": TOKEN,
            "APP_SECRET": APP_SECRET,
            "VERIFY_TOKEN": VERIFY_TOKEN,
            "GRAPH_URL": graph_server.url,
            "WINDOW": "skip",
        },
    }
    monkeypatch.setattr(Conf, "SYNC", True)
    conf.clear_cache()
    agents.reset()
    yield
    conf.clear_cache()


ON_POSTGRES = os.environ.get("FALAI_TEST_DB") == "postgres"
# test_postgres.py re-runs this folder on PostgreSQL; inside that run it is not collected again,
# nor is the browser test (it looks at the page, which does not depend on the database).
collect_ignore_glob = ["test_postgres.py", "test_browser.py"] if ON_POSTGRES else []
