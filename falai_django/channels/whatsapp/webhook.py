"""The webhook Meta calls: `GET` (the subscription handshake) and `POST` (messages, statuses).

A POST is checked against `X-Hub-Signature-256` (HMAC-SHA256 of the exact bytes received, with
the app secret, compared in constant time), parsed, stored and answered 200 at once: Meta
retries slow webhooks and in the end disables them, so the turns run on the workers.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from falai_django import conf, jsondepth
from falai_django.channels.whatsapp.parse import parse_webhook
from falai_django.channels.whatsapp.receive import store_batch
from falai_django.host.outages import answer_503_when_down

logger = logging.getLogger("falai_django.whatsapp")

SIGNATURE_HEADER = "X-Hub-Signature-256"


def signature(app_secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value Meta sends for `body`."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def _refuse(status: int, reason: str) -> JsonResponse:
    return JsonResponse({"detail": reason}, status=status)


@csrf_exempt
@require_http_methods(["GET", "POST"])
@answer_503_when_down
def webhook(request: HttpRequest) -> HttpResponse:
    settings = conf.whatsapp_settings()
    if settings is None:
        return _refuse(404, 'WhatsApp is not configured (FALAI["WHATSAPP"])')
    if request.method == "GET":
        return handshake(request, settings)
    return deliver(request, settings)


def handshake(request: HttpRequest, settings: dict[str, Any]) -> HttpResponse:
    """Meta's verification: echo `hub.challenge` when `hub.verify_token` is ours."""
    mode = request.GET.get("hub.mode")
    token = request.GET.get("hub.verify_token", "")
    challenge = request.GET.get("hub.challenge", "")
    expected = str(settings.get("VERIFY_TOKEN") or "")
    if mode == "subscribe" and expected and hmac.compare_digest(token.encode(), expected.encode()):
        return HttpResponse(challenge, content_type="text/plain; charset=utf-8")
    return HttpResponse("verify token mismatch", status=403, content_type="text/plain; charset=utf-8")


def deliver(request: HttpRequest, settings: dict[str, Any]) -> HttpResponse:
    body = request.body  # the exact bytes: the signature covers them, accents and emoji included
    given = request.headers.get(SIGNATURE_HEADER)
    if not given:
        return _refuse(401, f"{SIGNATURE_HEADER} is missing")
    secret = str(settings.get("APP_SECRET") or "")
    if not secret or not hmac.compare_digest(given.strip().encode("utf-8", "replace"),
                                             signature(secret, body).encode()):
        return _refuse(403, f"{SIGNATURE_HEADER} does not match the body")
    try:
        payload = jsondepth.loads(body)
    except jsondepth.JSONDepthError as exc:  # refused before the decoder (or `_clean`) recurses into it
        logger.warning("falai whatsapp: refused a signed body: %s", exc)
        return _refuse(400, str(exc))
    except (ValueError, RecursionError):
        return _refuse(400, "the body is not JSON")
    if not isinstance(payload, dict):
        return _refuse(400, "the body must be a JSON object")
    batch = parse_webhook(_clean(payload), str(settings.get("PHONE_NUMBER_ID") or "") or None)
    stored = store_batch(batch)
    return JsonResponse({"inputs": stored.inputs, "reactions": stored.reactions, "statuses": stored.statuses,
                         "skipped": stored.skipped})


def _clean(value: Any) -> Any:
    """Text PostgreSQL can store: no NUL, no lone surrogate (a webhook Meta retries must not fail).

    Recursive, so only ever called on a body `jsondepth` has bounded."""
    if isinstance(value, str):
        return value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value
