"""Hostile API input on PostgreSQL (the private cluster): text and JSON PostgreSQL refuses to
store — a NUL character, a lone surrogate — must be a 400 naming the field, never a 500.
(SQLite, the default test database, stores them, so the API tests elsewhere cannot see this.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, TEMPLATE, base_env, new_name
from .hostile_api import CASES


@pytest.fixture(scope="module")
def answers(private_pg):
    database = new_name("hostile")
    env = base_env(private_pg.create_database(database, template=TEMPLATE))
    done = subprocess.run([sys.executable, "-m", "faults.hostile_api"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return {line["case"]: line for line in (json.loads(text) for text in done.stdout.splitlines() if text.strip())}


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_postgres_hostile_input_is_a_4xx_with_a_reason(answers, case):
    answer = answers[case]
    assert answer["status"] < 500, f"{case}: {answer['status']} (PostgreSQL refused the value)"
    if answer["status"] >= 400:
        body = json.loads(answer["body"])
        assert body, answer
