"""A dependency that went away: the database or the broker. How to tell, wait and say so.

Long-running processes (the dispatcher, its NOTIFY listener and send pool) must outlive a
database restart or a lost Redis: they classify the failure (`dependency_down`), wait with a
capped backoff (`Backoff`, ≤ 5 s), and log one line when the dependency is lost and one when it is
back (`Outage`), instead of a traceback per poll or an exit. Request handlers answer `503` with
`Retry-After` (`unavailable_response`) rather than an HTML 500 page.
"""

from __future__ import annotations

import logging
import time
from typing import Any

logger = logging.getLogger("falai_django.host")

RETRY_AFTER_S = 5  # what a 503 tells the caller; about one reconnect backoff
BACKOFF_CAP_S = 5.0
UNAVAILABLE_DETAIL = "The service is briefly unavailable; nothing was recorded. Try again shortly."


def _database_errors() -> tuple[type[BaseException], ...]:
    from django.db import InterfaceError, OperationalError

    found: list[type[BaseException]] = [OperationalError, InterfaceError]
    try:
        import psycopg

        found += [psycopg.OperationalError, psycopg.InterfaceError]
    except ImportError:  # pragma: no cover - psycopg is a dependency; SQLite-only installs may lack it
        pass
    return tuple(found)


def _broker_errors() -> tuple[type[BaseException], ...]:
    try:
        import redis
    except ImportError:  # pragma: no cover - Redis is optional
        return ()
    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def dependency_down(exc: BaseException | None) -> str | None:
    """`"database"` or `"broker"` when `exc` (or what it was raised `from`) says that dependency
    cannot be reached or dropped the connection; None for anything else (a bug, bad data). An
    error merely raised while handling an outage is not one: that would hide a bug behind a 503."""
    database, broker = _database_errors(), _broker_errors()
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, database):
            return "database"
        if broker and isinstance(exc, broker):
            return "broker"
        exc = exc.__cause__
    return None


def summary(exc: BaseException) -> str:
    """The first line of an error's text, at most 200 characters (for a log line, never a response)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""


class Backoff:
    """Capped exponential waits: 0.25 s, 0.5 s, 1 s … `cap_s` (5 s), until `reset()`."""

    def __init__(self, first_s: float = 0.25, cap_s: float = BACKOFF_CAP_S) -> None:
        self.first_s, self.cap_s = first_s, cap_s
        self.failures = 0

    def next(self) -> float:
        delay = min(self.cap_s, self.first_s * (2 ** self.failures))
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


class Outage:
    """One process's view of its dependencies: `lost()` logs once per outage, `back()` once when it
    ends (with how long it lasted). `down` names what is away now (for status pages and metrics)."""

    def __init__(self, who: str, log: logging.Logger | None = None) -> None:
        self.who = who
        self.log = log or logger
        self.since: dict[str, float] = {}
        self.outages = 0

    @property
    def down(self) -> list[str]:
        return sorted(self.since)

    def lost(self, dependency: str, exc: BaseException) -> bool:
        """Record `dependency` as away; True (and one warning line) only when it just went."""
        if dependency in self.since:
            return False
        self.since[dependency] = time.monotonic()
        self.outages += 1
        self.log.warning("%s: lost the %s (%s: %s); reconnecting with backoff up to %.0f s", self.who,
                         dependency, type(exc).__name__, summary(exc), BACKOFF_CAP_S)
        return True

    def back(self) -> list[str]:
        """Everything away is reachable again: one info line each; returns what came back."""
        returned = self.down
        now = time.monotonic()
        for dependency in returned:
            self.log.warning("%s: the %s is back after %.1f s", self.who, dependency,
                             now - self.since.pop(dependency))
        return returned


def unavailable_response(dependency: str = "database") -> Any:
    """The 503 a request gets while a dependency is away: JSON, a generic sentence, `Retry-After`."""
    from django.http import JsonResponse

    response = JsonResponse({"detail": UNAVAILABLE_DETAIL, "unavailable": dependency}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response


def answer_503_when_down(view: Any) -> Any:
    """Decorate a plain Django view: a database or broker away gives `unavailable_response()` and
    a log line (with the conversation id when the URL carries one), never an HTML 500 page."""
    import functools

    @functools.wraps(view)
    def wrapped(request: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return view(request, *args, **kwargs)
        except Exception as exc:
            response = refusal(request, exc, kwargs.get("session_id"))
            if response is None:
                raise
            return response

    return wrapped


def refusal(request: Any, exc: BaseException, session_id: str | None = None) -> Any:
    """The 503 (logged) when `exc` says a dependency is away; None for any other error. For a DRF
    view's `handle_exception`, which must answer before DRF turns the error into a 500."""
    down = dependency_down(exc)
    if down is None:
        return None
    log_refused(request, down, exc, session_id)
    return unavailable_response(down)


def log_refused(request: Any, dependency: str, exc: BaseException, session_id: str | None = None) -> None:
    logger.warning("falai: %s %s answered 503 (the %s is away: %s)%s", request.method, request.path, dependency,
                   type(exc).__name__, f" for conversation {session_id}" if session_id else "")
