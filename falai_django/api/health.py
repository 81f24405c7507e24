"""Probes for process managers and load balancers: `GET <app>/health/live` and `<app>/health/ready`.

Both are unauthenticated (a probe carries no token) and say nothing beyond check names and
states. `live` is 200 while the process serves requests at all; a failing liveness probe gets
the process restarted, so it touches no dependency (a database outage must not restart every
web server). `ready` asks the database and the django-q2 broker; while either cannot answer it
is 503 with `Retry-After`, and a load balancer sends the traffic elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from falai_django.host import outages

logger = logging.getLogger("falai_django.host")

OK = "ok"
UNREACHABLE = "unreachable"  # the dependency did not answer or dropped the connection
FAILING = "failing"  # it answered, with an error


@login_not_required  # a project with LoginRequiredMiddleware would redirect the probe
@require_GET
@never_cache
def live(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": OK})


@login_not_required
@require_GET
@never_cache
def ready(request: HttpRequest) -> JsonResponse:
    checks = {"database": _check("database", _database), "broker": _check("broker", _broker)}
    if all(state == OK for state in checks.values()):
        return JsonResponse({"status": OK, "checks": checks})
    response = JsonResponse({"status": "unavailable", "checks": checks}, status=503)
    response["Retry-After"] = str(outages.RETRY_AFTER_S)
    return response


def _check(name: str, probe: Any) -> str:
    try:
        probe()
    except Exception as exc:  # noqa: BLE001 - a probe reports a state; the log keeps the error
        state = UNREACHABLE if outages.dependency_down(exc) or isinstance(exc, OSError) else FAILING
        logger.warning("falai: health/ready: the %s is %s (%s: %s)", name, state, type(exc).__name__,
                       outages.summary(exc))
        return state
    return OK


def _database() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        # A dropped connection stays broken in this thread until closed: the next probe connects anew.
        with contextlib.suppress(Exception):
            connection.close()
        raise


def _broker() -> None:
    """The django-q2 broker answers a ping. Run in-line (`sync`) there is none; the ORM broker is
    the database, already checked."""
    from django_q.conf import Conf

    if Conf.SYNC or Conf.ORM:
        return
    if _the_broker().ping() is False:
        raise ConnectionError("the broker did not answer its ping")


@functools.cache
def _the_broker() -> Any:
    """One broker (and its connection pool) per process, not one per probe."""
    from django_q.brokers import get_broker

    return get_broker()
