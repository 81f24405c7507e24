"""The command a consumer's tooling runs, against the demo's API served over HTTP:

    st run <schema> --checks all --max-examples N --seed 1

from the repository's root (where `schemathesis.toml` is), with a valid token. Every phase the
CLI runs (examples, coverage, fuzzing, stateful) and every check: the run must report no
failure and no warning (no operation left unreached, none answered only 401/403 or 404).

The coverage phase is what finds the boundary values (`status=`, a blank reason, a key that is
a number): it is the CLI's, so this test runs the CLI, not the pytest integration.
Examples per operation: FALAI_ST_EXAMPLES (default 50, the bar the API is held to).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = os.environ.get("FALAI_ST_EXAMPLES", "50")


@pytest.fixture
def token(demo_settings, django_user_model) -> str:
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_superuser("st", "st@example.com", "pw")
    return Token.objects.create(user=user).key


def _st(live_server, token: str, *extra: str) -> subprocess.CompletedProcess[str]:
    st = Path(sys.executable).with_name("st")
    return subprocess.run(
        [str(st), "run", f"{live_server.url}/falai/schema", "--url", live_server.url,
         "-H", f"Authorization: Token {token}", "--checks", "all", "--max-examples", EXAMPLES, "--seed", "1",
         "--no-color", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false"},
    )


def test_st_run_with_every_check_finds_nothing_and_warns_of_nothing(live_server, token):
    done = _st(live_server, token)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "No issues found" in out, out[-6000:]
    assert "WARNINGS" not in out and "⚠" not in out, out[-6000:]
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in out, (phase, out[-3000:])
    # every operation was selected and tested (the schema lists 14)
    assert "Selected: 14/14" in out and "Tested: 14" in out, out[-3000:]
