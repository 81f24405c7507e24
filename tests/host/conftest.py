"""Host test setup.

- The test database (tests/conftest.py): a file on SQLite, so racing threads wait instead of
  failing with "database table is locked"; a name of the run's own on PostgreSQL.
- PostgreSQL: `FALAI_TEST_DB=postgres` (set by tests/host/test_postgres.py in a subprocess, with
  DATABASE_URL pointing at the real server) runs this folder on PostgreSQL.
- django-q2 runs tasks in-line (`sync`) unless a test starts a real cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ON_POSTGRES = os.environ.get("FALAI_TEST_DB") == "postgres"


@pytest.fixture(autouse=True)
def falai_settings(settings, monkeypatch):
    """Every host test runs against the tiny test agent and the recording sender."""
    from falai_django import conf

    from . import agents, senders

    settings.FALAI = {
        "AGENT": "host.agents.current_agent",
        "SENDER": "host.senders.record",
        "WEBHOOK_SECRET": "s3cret",
        "SEND_RETRY_BASE_S": 0.01,
        "TURN_RETRY_BASE_S": 0.01,
        # Sends through django-q2 (in-line here); the NOTIFY hand-off has its own tests.
        "SEND_HANDOFF": "queue",
    }
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2 reads Q_CLUSTER once, at import
    conf.clear_cache()
    agents.reset()
    senders.reset()
    yield
    conf.clear_cache()


# test_pg_*.py need PostgreSQL (row locks, SKIP LOCKED, real concurrency): collected only in the
# PostgreSQL run, which tests/host/test_postgres.py starts; that runner is not collected inside it.
collect_ignore_glob = ["test_postgres.py"] if ON_POSTGRES else ["test_pg_*.py"]


def pytest_collection_modifyitems(config, items):
    """A test_pg_*.py file named on the command line is collected all the same (collect_ignore
    only applies to folders); outside the PostgreSQL run it would run on SQLite and fail for
    the wrong reason, so it is skipped, saying how to run it."""
    if ON_POSTGRES:
        return
    skip = pytest.mark.skip(reason=(
        "LOUD SKIP: PostgreSQL-only test file run outside the PostgreSQL run; run tests/host/test_postgres.py, "
        "or set FALAI_TEST_DB=postgres and DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test "
        "(pytest -o addopts= -p no:cacheprovider -p no:logging)"))
    for item in items:
        if item.path.name.startswith("test_pg_") and item.path.parent == Path(__file__).parent:
            item.add_marker(skip)
