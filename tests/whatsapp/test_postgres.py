"""Runs this folder again on the real PostgreSQL server, in a subprocess (pytest-django builds one
test database per session): the one-statement turn writer, the advisory send lock and the
conditional status UPDATEs under PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_the_whatsapp_suite_passes_on_postgresql(pg_dsn):
    env = {**os.environ, "DATABASE_URL": pg_dsn, "FALAI_TEST_DB": "postgres"}
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/whatsapp", "-o", "addopts=", "-q", "-p", "no:cacheprovider",
         "--create-db", "--show-capture=no"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    tail = "\n".join((run.stdout + run.stderr).splitlines()[-40:])
    assert run.returncode == 0, tail
    assert " passed" in tail and " skipped" not in tail, tail
