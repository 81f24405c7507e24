"""An unexpected error, answered with a sentence and an error id; the details stay in the log.

An exception's text can carry SQL, file paths, a provider's answer or a customer's data, so it
never reaches an API client or a playground user, whatever `DEBUG` says. The caller gets a
generic sentence and a short id; the server's log line (level ERROR, with the traceback) carries
the same id and the conversation id, so an operator finds the one from the other.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.utils.translation import gettext_lazy as _

from falai_django.host import outages

logger = logging.getLogger("falai_django.api")

REQUEST_FAILED = _("The request failed on the server. The server log has the details under this error id.")
STREAM_FAILED = _("The turn failed after the reply started. The server log has the details under this error id.")


def new_error_id() -> str:
    """Twelve hex digits: short enough to read out, unique enough to grep for."""
    return uuid.uuid4().hex[:12]


def report(exc: BaseException, what: str, session_id: str | None = None) -> str:
    """Log `exc` (traceback included) under a new error id and return the id.

    `what` says what failed ("POST /falai/sessions/…/messages", "the stream").
    """
    error_id = new_error_id()
    logger.error("falai: %s failed%s (error_id=%s): %s", what,
                 f" for conversation {session_id}" if session_id else "", error_id, type(exc).__name__,
                 exc_info=(type(exc), exc, exc.__traceback__))
    return error_id


def body(error_id: str, sentence: object = REQUEST_FAILED, key: str = "detail") -> dict[str, str]:
    """The JSON a caller gets: the sentence under `key` and the id."""
    return {key: str(sentence), "error_id": error_id}


def answer_json_errors(view: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a plain Django view that answers JSON (the playground's), outermost: a database or
    broker away is the API's 503 (`outages.refusal`); any other unexpected error a JSON 500
    `{"error": sentence, "error_id"}`, logged under the id; 404 and 403 are left to Django."""

    @functools.wraps(view)
    def wrapped(request: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return view(request, *args, **kwargs)
        except (Http404, PermissionDenied):
            raise
        except Exception as exc:
            session_id = kwargs.get("session_id")
            refused = outages.refusal(request, exc, session_id)
            if refused is not None:
                return refused
            error_id = report(exc, f"{request.method} {request.path}", session_id)
            return JsonResponse(body(error_id, key="error"), status=500)

    return wrapped
