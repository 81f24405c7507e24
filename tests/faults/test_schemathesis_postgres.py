"""schemathesis on PostgreSQL (the private cluster): every operation, valid auth, no 5xx, every
4xx with a reason — where PostgreSQL's own limits (NUL, lone surrogates in jsonb) can bite."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT, TEMPLATE, base_env, new_name


def test_schemathesis_on_postgres_finds_no_5xx_and_no_reasonless_4xx(private_pg):
    env = base_env(private_pg.create_database(new_name("schemathesis"), template=TEMPLATE),
                   FALAI_SCHEMATHESIS_EXAMPLES="20")
    done = subprocess.run([sys.executable, "-m", "faults.schemathesis_pg"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failures"] == [], "\n".join(report["failures"])
    assert all(report["statuses"].values()), report["statuses"]
