"""The command a consumer's tooling runs, against the demo's API served over HTTP:

    st run <schema> --checks all --max-examples N --seed 1

from the repository's root (where `schemathesis.toml` is), with a valid token. Every phase the
CLI runs (examples, coverage, fuzzing, stateful) and every check: the run must report no
failure and no warning (no operation left unreached, none answered only 401/403 or 404), but
one that depends on the walk: see the test.

The coverage phase is what finds the boundary values (`status=`, a blank reason, a key that is
a number): it is the CLI's, so this test runs the CLI, not the pytest integration.
Examples per operation: FALAI_ST_EXAMPLES (default 50, the bar the API is held to).
"""

from __future__ import annotations

import os
import re
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

    from falai_django import host

    user = django_user_model.objects.create_superuser("st", "st@example.com", "pw")
    # A demo that has been used, as the one a consumer points the tool at: conversations whose
    # first message scheduled the follow-up wake (GET sessions -> read -> fire its pending wake).
    for number in range(5):
        assert host.handle_message(f"55119999900{number:02d}", "oi").result.schedule
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
    assert "generated, " in out and "❌" not in out and not re.search(r"\d+ (unique )?failures?", out), out[-6000:]
    # No warning, but one: firing a wake needs a key a timer made, which the stateful walk reaches
    # through two links (a conversation, then its pending wake) on some runs and not others
    # (test_api_contract fires one by those links, every time). Any other warning fails.
    warnings = out.split("WARNINGS", 1)[1].split("SUMMARY", 1)[0] if "WARNINGS" in out else ""
    unreached = [line.strip() for line in warnings.splitlines() if line.strip().startswith("- ")]
    assert set(unreached) <= {"- POST /falai/sessions/{session_id}/wakes"}, out[-6000:]
    assert "Authentication failed" not in warnings and "validation" not in warnings.lower(), out[-6000:]
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in out, (phase, out[-3000:])
    # every operation was selected and tested (the schema lists 14)
    assert "Selected: 14/14" in out and "Tested: 14" in out, out[-3000:]
