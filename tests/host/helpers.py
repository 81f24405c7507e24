"""Shared helpers for the host tests: API clients, signing, reading what was sent."""

from __future__ import annotations

import json
import time
from typing import Any

from django.test import Client

from falai_django.api.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

SECRET = "s3cret"


def staff_client() -> Client:
    """A client logged in through a DRF token of a user with the 'change conversation' permission."""
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    user, _ = User.objects.get_or_create(username="operator")
    user.user_permissions.add(Permission.objects.get(codename="change_conversation"))
    token, _ = Token.objects.get_or_create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}")


def post(client: Client, url: str, data: Any) -> Any:
    return client.post(url, data=json.dumps(data), content_type="application/json")


def signed_post(url: str, data: Any, *, secret: str = SECRET, timestamp: int | None = None, client=None):
    body = json.dumps(data).encode()
    ts = str(int(time.time()) if timestamp is None else timestamp)
    headers = {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: sign(secret, ts, body, path=url)}
    return (client or Client()).post(url, data=body, content_type="application/json", headers=headers)


def url(session_id: str, what: str = "") -> str:
    return f"/falai/sessions/{session_id}" + (f"/{what}" if what else "")


def texts(sent: list[Any], session_id: str | None = None) -> list[str]:
    return [m.text for m in sent if session_id is None or m.session_id == session_id]


def wait_for(predicate, seconds: float = 10.0) -> bool:
    """Whether `predicate()` came true within `seconds` (checked every 20 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def redis_broker(client: Any) -> Any:
    """A django-q2 Redis broker on `client` (its own __init__ would read Q_CLUSTER's settings)."""
    from django_q.brokers.redis_broker import Redis as RedisBroker

    broker = RedisBroker.__new__(RedisBroker)
    broker.list_key = "falai-test"
    broker.connection = client
    return broker
