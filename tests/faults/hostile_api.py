"""Hostile API inputs against a real PostgreSQL database, run in a subprocess:
`python -m faults.hostile_api` with DATABASE_URL set (the private cluster). Prints one JSON line
per case: {"case", "status", "body"}. PostgreSQL refuses what SQLite stores (a NUL character in
text, a `\\u0000` or lone-surrogate escape in jsonb), so these only show up here.
"""

from __future__ import annotations

import json
import sys

import django

CASES = [
    ("nul in message text", "s1", "messages", {"text": "oi\u0000tudo", "id": "m1"}),
    ("nul in message id", "s1", "messages", {"text": "oi", "id": "m\u00002"}),
    ("nul in session id", "a%00b", "messages", {"text": "oi", "id": "m3"}),
    ("nul in event payload", "s2", "events", {"event": "pago", "key": "k1", "payload": {"a": "x\u0000"}}),
    ("nul in event key", "s2", "events", {"event": "pago", "key": "k\u00002"}),
    ("nul in context", "s3", "messages", {"text": "oi", "id": "m4", "context": {"a": "\u0000"}}),
    ("nul in start input", "s4", "starts", {"flow": "campanha", "key": "c1", "input": ["\u0000"]}),
    ("nul in anchors", "s5", "messages", {"text": "oi", "id": "m6", "anchors": {"lead": {"key": "l\u0000"}}}),
    ("nul in silence reason", "s6", "silence", {"reason": "humano\u0000"}),
    ("lone surrogate in payload", "s7", "events", {"event": "pago", "key": "k3", "payload": {"a": "\ud800"}}),
    ("lone surrogate in text", "s7", "messages", {"text": "oi \ud800", "id": "m7"}),
]


def main() -> int:
    django.setup()
    from django.conf import settings
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django_q.conf import Conf
    from security import kit

    setup_test_environment()
    settings.FALAI = kit.falai_settings()
    settings.ALLOWED_HOSTS = ["*"]
    Conf.SYNC = True
    client = kit.token_client("hostile", "change_conversation", "view_conversation")
    plain = Client(raise_request_exception=False, HTTP_AUTHORIZATION=client.defaults["HTTP_AUTHORIZATION"])
    for name, sid, what, body in CASES:
        response = plain.post(f"/falai/sessions/{sid}/{what}", data=json.dumps(body),
                              content_type="application/json")
        sys.stdout.write(json.dumps({"case": name, "status": response.status_code,
                                     "body": response.content.decode(errors="replace")[:300]}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
