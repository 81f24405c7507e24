"""Shared helpers for the host tests: API clients, signing, reading what was sent."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
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


@contextlib.contextmanager
def listening(handler: logging.Handler, logger_name: str | None = None) -> Iterator[logging.Handler]:
    """`handler` on a logger (the root by default), the logger at DEBUG, for the block."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def conflict_once(monkeypatch: Any) -> None:
    """The host's next turn write meets a compare-and-swap conflict once (it writes nothing and
    the turn is replayed); the writes after it go through."""
    from falai_django.engine.errors import SessionConflictError
    from falai_django.host import turns

    real = turns.write_turn
    calls: list[int] = []

    def write_turn(write: Any, store: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise SessionConflictError(write.session_id, write.expected, write.expected + 1)
        return real(write, store)

    monkeypatch.setattr(turns, "write_turn", write_turn)


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


def whatsapp_configured(settings: Any) -> None:
    """WhatsApp set up with the test payloads' number and app secret (signed deliveries verify)."""
    from whatsapp import payloads

    from falai_django import conf

    settings.FALAI = {**settings.FALAI, "WHATSAPP": {"PHONE_NUMBER_ID": payloads.PHONE_NUMBER_ID,
                                                     "ACCESS_TOKEN": "t", "APP_SECRET": payloads.APP_SECRET,
                                                     "VERIFY_TOKEN": "v"}}
    conf.clear_cache()


# A real `manage.py qcluster` (tests/host/cluster_settings.py) beside the test process.

ROOT = Path(__file__).resolve().parents[2]


def cluster_env(monkeypatch: Any, name: str, redis_url: str | None = None, **extra: str) -> dict[str, str]:
    """Point this process's django-q2 at a cluster named `name` (the ORM broker, or Redis at
    `redis_url`) and return the environment its `qcluster` runs with (`extra` added)."""
    from django.db import connection
    from django_q.conf import Conf

    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "host.cluster_settings",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
        "DATABASE_URL": f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        "FALAI_TEST_Q_NAME": name,
        **extra,
    }
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "PREFIX", name)
    monkeypatch.setattr(Conf, "CLUSTER_NAME", name)
    if redis_url:
        env["FALAI_TEST_Q_REDIS"] = redis_url
        monkeypatch.setattr(Conf, "ORM", None)
        monkeypatch.setattr(Conf, "REDIS", redis_url)
    return env


def start_cluster(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def kill(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def drop_redis_queue(redis_url: str, name: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    client.delete(name)
    client.close()


# -- the metrics endpoint -----------------------------------------------------------------------

METRICS_TOKEN = "scrape-me-7f3a"  # set FALAI["METRICS_TOKEN"] to it


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: Client | None = None, token: str = METRICS_TOKEN) -> Samples:
    """{(sample name, sorted labels): value} of one scrape with the token."""
    from prometheus_client.parser import text_string_to_metric_families

    response = (client or Client()).get("/falai/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def moved(before, after, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)
