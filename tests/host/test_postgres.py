"""Runs this folder again on the real PostgreSQL server, in a subprocess.

pytest-django builds one test database per session from `DATABASES`, so the PostgreSQL run is a
second pytest process with `DATABASE_URL` pointing at the server (`project/settings.py` reads it)
and `FALAI_TEST_DB=postgres`, which also collects the PostgreSQL-only files (`test_pg_*.py`:
races, the real django-q2 cluster with the ORM and the Redis broker). The `pg_dsn` and
`redis_url` fixtures make a missing server a failure under CI=true, never a skip; the run's
JUnit report proves the PostgreSQL-only tests ran and passed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_the_host_suite_passes_on_postgresql(pg_dsn, redis_url, tmp_path):
    report = tmp_path / "pg.xml"
    env = {**os.environ, "DATABASE_URL": pg_dsn, "FALAI_TEST_DB": "postgres", "FALAI_TEST_REDIS_URL": redis_url}
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/host", "-o", "addopts=", "-q", "-rs", "-p", "no:cacheprovider",
         "--create-db", "--show-capture=no", "-p", "no:logging", f"--junitxml={report}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500,
    )
    tail = "\n".join((run.stdout + run.stderr).splitlines()[-60:])
    assert run.returncode == 0, tail
    cases = ET.parse(report).getroot().iter("testcase")
    outcome = {(c.get("classname", "") + "::" + c.get("name", "")): [child.tag for child in c] for c in cases}
    pg_only = {name: tags for name, tags in outcome.items() if ".test_pg_" in name}
    assert len(pg_only) >= 3, tail  # races + the cluster with both brokers
    assert all(tags == [] for tags in pg_only.values()), pg_only  # ran and passed: no skip, no failure
