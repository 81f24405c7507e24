"""schemathesis against the app's own OpenAPI schema (`/falai/schema`), every operation, with
valid auth (a DRF token of a user holding the permission), in-process against the Django WSGI
application, with the repository's `schemathesis.toml` (what `st run` reads).

For every operation, both schema-valid and schema-violating requests (schemathesis' positive
and negative generation) pass **every** schemathesis check (`--checks all`): no 5xx, only
declared statuses, content types and bodies; a schema-valid request accepted and a
schema-violating one refused; authentication enforced; and, beyond schemathesis:

- no `event: error` inside a streamed answer;
- every 4xx with a reason: a JSON body naming the problem (`detail`, or field -> messages).

The stateful phase (the schema's links, with ids that exist) is the CLI's: tests/fuzz/test_st_cli.py
runs `st run` against a served demo. In-process, Hypothesis replays a stateful run against a
database that the first run already changed, and calls the run flaky.

Examples per operation and mode: FALAI_SCHEMATHESIS_EXAMPLES (default 25); the generation is
derandomized (a fixed seed), so a failure here is the same failure on the next run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from security import kit

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = int(os.environ.get("FALAI_SCHEMATHESIS_EXAMPLES", "25"))
# Every operation of the API: conversations (driving, reading, erasing) and stored flows.
FUZZER_PERMISSIONS = ("change_conversation", "view_conversation", "erase_conversation", "view_flow", "change_flow",
                      "add_flow")
CONFIG = Path(__file__).resolve().parents[2] / "schemathesis.toml"


def every_check() -> list:
    """What `st run --checks all` runs: every check schemathesis has."""
    load_all_checks()
    return list(CHECKS.get_all())


def load_schema(app, headers: dict[str, str]):
    """The app's schema, with the repository's schemathesis.toml (as `st run` reads it there)."""
    return schemathesis.openapi.from_wsgi("/falai/schema", app, headers=headers,
                                          config=schemathesis.Config.from_path(str(CONFIG)))


@pytest.fixture
def api(settings):
    from django.core.wsgi import get_wsgi_application
    from security import kit as shared

    from falai_django import conf

    settings.FALAI = shared.falai_settings()
    settings.ALLOWED_HOSTS = ["*"]
    conf.clear_cache()
    shared.reset()
    client = kit.token_client("fuzzer", *FUZZER_PERMISSIONS)
    token = client.defaults["HTTP_AUTHORIZATION"]
    app = get_wsgi_application()
    return load_schema(app, {"Authorization": token}), {"Authorization": token}


def _reason_problems(response) -> str | None:
    """None when a 4xx carries a reason, else what is wrong."""
    status = response.status_code
    if not 400 <= status < 500:
        return None
    text = response.text or ""
    if not text.strip():
        return f"{status} with an empty body"
    content_type = response.headers.get("Content-Type", response.headers.get("content-type", ""))
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    if "json" in content_type:
        try:
            body = json.loads(text)
        except ValueError:
            return f"{status} with a body that is not JSON: {text[:100]!r}"
        if isinstance(body, dict) and body and all(v not in (None, "", [], {}) for v in body.values()):
            return None
        if isinstance(body, list) and body:
            return None
        return f"{status} without a reason: {text[:200]}"
    return f"{status} that is not JSON ({content_type}): {text[:100]!r}"  # every API answer is JSON


def _stream_problems(response) -> str | None:
    content_type = str(response.headers.get("Content-Type", response.headers.get("content-type", "")))
    if "event-stream" in content_type and "event: error" in (response.text or ""):
        return f"the stream reported an error in-band: {response.text[-300:]}"
    return None


def _operations(schema):
    for result in schema.get_all_operations():
        yield result.ok()


def test_the_schema_lists_every_endpoint(api):
    schema, _ = api
    paths = {op.path for op in _operations(schema)}
    for what in ("", "/messages", "/messages/stream", "/wakes", "/events", "/starts", "/silence", "/unsilence"):
        assert f"/falai/sessions/{{session_id}}{what}" in paths, paths


def _fuzz(operation, mode, headers, failures: list[str], statuses: set[int]) -> None:
    label = f"{operation.method.upper()} {operation.path}"

    checks = every_check()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        response = case.call(headers=headers)
        statuses.add(response.status_code)
        try:
            case.validate_response(response, checks=checks, headers=headers)
        except Exception as exc:  # noqa: BLE001 - collect, report every operation at once
            failures.append(f"{label}: {type(exc).__name__}: {str(exc)[:300]}")
            return
        for problem in (_reason_problems(response), _stream_problems(response)):
            if problem:
                failures.append(f"{label}: {problem} (request {case.body!r:.150})")

    try:
        run()
    except Unsatisfiable:  # nothing schema-violating to generate (e.g. a GET whose only input is a string)
        statuses.add(0)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_every_operation_passes_every_check_and_every_4xx_has_a_reason(api, mode):
    schema, headers = api
    failures: list[str] = []
    seen: dict[str, set[int]] = {}
    for operation in _operations(schema):
        _fuzz(operation, mode, headers, failures, seen.setdefault(f"{operation.method.upper()} {operation.path}", set()))
    assert not failures, "\n".join(sorted(set(failures))[:30])
    assert all(seen.values()), seen

