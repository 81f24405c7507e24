"""The probes: `health/live` answers while the process serves, whatever its dependencies do;
`health/ready` is 200 only while the database and the broker answer, and 503 naming the one that
does not (with Retry-After, no driver text). Unauthenticated, and never a redirect to a login."""

from __future__ import annotations

import json
import os

import pytest
from django.test import Client

from falai_django.api import health
from falai_django.testing.postgres import free_port

from .helpers import redis_broker as redis_broker_on
from .test_outages import database_away

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("FALAI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_broker(monkeypatch):
    """The readiness check sees a django-q2 Redis broker whose connection the test chooses."""
    redis = pytest.importorskip("redis")
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", None)
    chosen: list = []

    def use(client) -> None:
        chosen.append(redis_broker_on(client))

    health._the_broker.cache_clear()
    monkeypatch.setattr(health, "_the_broker", lambda: chosen[-1])
    yield use, redis


def test_live_is_ok_without_a_login_even_while_the_database_is_away(tmp_path):
    with database_away(tmp_path):
        response = Client().get("/falai/health/live")
    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_ready_is_ok_when_the_database_and_broker_answer():
    response = Client().get("/falai/health/ready")
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


def test_ready_is_503_naming_the_database_while_it_is_away_and_ok_once_back(tmp_path):
    with database_away(tmp_path):
        response = Client().get("/falai/health/ready")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    body = json.loads(response.content)
    assert body == {"status": "unavailable", "checks": {"database": "unreachable", "broker": "ok"}}
    again = Client().get("/falai/health/ready")  # the broken connection was closed, not kept
    assert again.status_code == 200, again.content


def test_ready_is_503_naming_a_redis_broker_that_does_not_answer(redis_broker):
    use, redis = redis_broker
    use(redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1))  # nothing listens
    response = Client().get("/falai/health/ready")
    assert response.status_code == 503
    assert json.loads(response.content)["checks"] == {"database": "ok", "broker": "unreachable"}
    assert b"Redis" not in response.content and b"Error" not in response.content


def test_ready_asks_a_redis_broker_that_answers(redis_broker):
    use, redis = redis_broker
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Redis at {REDIS_URL} is not reachable in CI: {exc}")
        pytest.skip(f"LOUD SKIP: Redis at {REDIS_URL} is not reachable ({exc})")
    use(client)
    response = Client().get("/falai/health/ready")
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["checks"]["broker"] == "ok"


def test_only_get_is_allowed():
    assert Client().post("/falai/health/ready").status_code == 405


def test_a_project_that_requires_a_login_everywhere_still_lets_the_probes_in(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.contrib.auth.middleware.LoginRequiredMiddleware"]
    assert Client().get("/falai/health/live").status_code == 200
    assert Client().get("/falai/health/ready").status_code == 200
    assert Client().get("/falai/sessions").status_code in (302, 401, 403)  # the rest stays behind it
