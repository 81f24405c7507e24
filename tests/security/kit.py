"""Shared by tests/security, tests/baddata and tests/faults: a tiny agent, a recording sender,
secrets that must never leak, and clients for every kind of caller.

`FALAI["AGENT"] = "security.kit.current_agent"`, `FALAI["SENDER"] = "security.kit.record"`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from falai_django import falai
from falai_django.testing import fake_clock, mock_provider

# Canaries: each must never appear in a log line, a response body or an error page.
WEBHOOK_SECRET = "whsec_CANARY_5f1e0c9a7d"
API_KEY = "AIzaCANARY_91b2e4d7c3"
DJANGO_SECRET = "django-CANARY-secret-key-3b8d"
SECRETS = (WEBHOOK_SECRET, API_KEY, DJANGO_SECRET)

NAME = re.compile(r"meu nome (?:é|e) (\w+)", re.IGNORECASE)
ENDLESS = 100_000


def understand_reply(request: Any) -> dict[str, Any]:
    found = NAME.findall(request.prompt or "")
    return {"fields": {"nome": found[-1]}} if found else {}


def speak_reply(request: Any) -> dict[str, Any]:
    found = NAME.findall(request.prompt or "")
    return {"message": f"Prazer, {found[-1]}!"} if found else {"message": "Oi! Com quem eu falo?"}


def build_agent(provider: Any = None, clock: Any = None) -> Any:
    """quem (collect nome) -> espera (wait 1h) -> tchau (say)."""
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome da pessoa."}})
    return f.agent(
        name="Ana",
        provider=provider or mock_provider(understand=[understand_reply] * ENDLESS, speak=[speak_reply] * ENDLESS),
        clock=clock,
        events={"pago": {"direction": "inbound"}},
        flows=[
            f.flow({
                "id": "triagem", "name": "Triagem", "on": [{"message": []}],
                "steps": [
                    {"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"]},
                    {"id": "espera", "wait": "1h"},
                    {"id": "tchau", "say": "Obrigado, {{data.nome}}! Até logo."},
                ],
            }),
            f.flow({"id": "campanha", "name": "Campanha",
                    "steps": [{"id": "oi", "say": "Oferta para você."}]}),
        ],
    )


_current: dict[str, Any] = {}


def reset(agent: Any = None) -> Any:
    _current["clock"] = fake_clock("2026-09-20T10:00:00Z")
    _current["agent"] = agent or build_agent(clock=_current["clock"])
    return _current["agent"]


def current_agent() -> Any:
    if "agent" not in _current:
        reset()
    return _current["agent"]


sent: list[Any] = []
_lock = threading.Lock()


def record(message: Any) -> str:
    with _lock:
        sent.append(message)
        return f"ch-{len(sent)}"


def falai_settings(**extra: Any) -> dict[str, Any]:
    # SEND_HANDOFF "queue": sends go through django-q2 (in-line in these tests) on any database,
    # not to a dispatcher by NOTIFY (none runs here).
    return {"AGENT": "security.kit.current_agent", "SENDER": "security.kit.record",
            "WEBHOOK_SECRET": WEBHOOK_SECRET, "SEND_RETRY_BASE_S": 0.01, "TURN_RETRY_BASE_S": 0.01,
            "SEND_HANDOFF": "queue", **extra}


# ------------------------------------------------------------------------------------ callers


def sign_headers(body: bytes, *, secret: str = WEBHOOK_SECRET, timestamp: int | None = None,
                 path: str | None = None, method: str = "POST") -> dict[str, str]:
    """Signature headers for a request to `path` (default: the conversation's messages endpoint;
    the signature binds method and path, so it only verifies for the URL it was made for)."""
    from falai_django.api.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

    ts = str(int(time.time()) if timestamp is None else timestamp)
    path = path if path is not None else api_url("5511999990000", "messages")  # test_matrix's SID
    return {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: sign(secret, ts, body, method=method, path=path)}


def token_client(username: str, *perms: str, staff: bool = True, superuser: bool = False) -> Any:
    """A DRF-token client for a (staff) user holding `perms` (falai_django codenames)."""
    from django.contrib.auth.models import Permission, User
    from django.test import Client
    from rest_framework.authtoken.models import Token

    if superuser:
        user = User.objects.create_superuser(username, f"{username}@example.com", "pw")
    else:
        user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=staff)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(content_type__app_label="falai_django", codename=codename))
    token, _ = Token.objects.get_or_create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    client.user = user
    return client


def login_client(user: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def post_json(client: Any, url: str, data: Any, **headers: str) -> Any:
    body = json.dumps(data).encode()
    return client.post(url, data=body, content_type="application/json", headers=headers or None)


def signed_post(client: Any, url: str, data: Any, **sign_kw: Any) -> Any:
    body = json.dumps(data).encode()
    return client.post(url, data=body, content_type="application/json",
                       headers=sign_headers(body, path=url, **sign_kw))


def api_url(session_id: str, what: str = "") -> str:
    return f"/falai/sessions/{session_id}" + (f"/{what}" if what else "")


def raw_row(session_id: str) -> tuple | None:
    """The conversation row exactly as stored (blob as the database's own text)."""
    from django.db import connection

    from falai_django.models import Conversation

    columns = [f.column for f in Conversation._meta.concrete_fields]
    table = connection.ops.quote_name(Conversation._meta.db_table)
    select = ", ".join(
        f"CAST({connection.ops.quote_name(c)} AS TEXT)" if c == "blob" else connection.ops.quote_name(c)
        for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {select} FROM {table} WHERE id = %s", [session_id])
        return cursor.fetchone()


def put_raw_row(session_id: str, text: str, version: int = 3) -> None:
    """Write a conversation row with arbitrary blob text, bypassing every check."""
    from django.db import connection

    from falai_django.models import Conversation

    table = connection.ops.quote_name(Conversation._meta.db_table)
    cast = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [session_id])
        cursor.execute(f"INSERT INTO {table} (id, version, blob, created_at, updated_at, asking_flow) "
                       f"VALUES (%s, %s, {cast}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, %s)",
                       [session_id, version, text, "triagem"])
