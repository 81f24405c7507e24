"""schemathesis against the app on a real PostgreSQL database, run in a subprocess:
`python -m faults.schemathesis_pg` with DATABASE_URL set (the private cluster).

The same checks as tests/fuzz/test_api_schemathesis.py (no 5xx, every 4xx with a reason), for
schema-valid and schema-violating requests; PostgreSQL refuses values SQLite stores (NUL
characters, lone surrogates in jsonb), so only this run can see those. Prints one JSON line:
{"failures": [...], "statuses": {...}}.
"""

from __future__ import annotations

import json
import sys

import django


def main() -> int:
    django.setup()
    from django.conf import settings
    from django.core.wsgi import get_wsgi_application
    from django.test.utils import setup_test_environment
    from django_q.conf import Conf
    from fuzz.test_api_schemathesis import FUZZER_PERMISSIONS, _fuzz, _operations, load_schema
    from schemathesis import GenerationMode
    from security import kit

    setup_test_environment()
    settings.FALAI = kit.falai_settings()
    settings.ALLOWED_HOSTS = ["*"]
    Conf.SYNC = True
    kit.reset()
    client = kit.token_client("fuzzer", *FUZZER_PERMISSIONS)
    headers = {"Authorization": client.defaults["HTTP_AUTHORIZATION"]}
    schema = load_schema(get_wsgi_application(), headers)
    failures: list[str] = []
    statuses: dict[str, list[int]] = {}
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        for operation in _operations(schema):
            seen: set[int] = set()
            _fuzz(operation, mode, headers, failures, seen)
            statuses.setdefault(f"{operation.method.upper()} {operation.path}", []).extend(sorted(seen))
    sys.stdout.write(json.dumps({"failures": sorted(set(failures))[:40], "statuses": statuses}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
