"""Authentication and permission classes for the API.

- DRF token and session authentication (the project's defaults) identify people and services;
  they need the `falai_django.change_conversation` permission (superusers have it); erasing a
  conversation (`DELETE sessions/<id>`) needs `falai_django.erase_conversation` instead.
- `WebhookSignatureAuthentication`: a channel signs each request with the shared secret
  `FALAI["WEBHOOK_SECRET"]`: `X-Falai-Timestamp: <unix seconds>` and
  `X-Falai-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<METHOD> <path>.<raw body>")>`,
  where `<path>` is the request's path with its query string (`/falai/sessions/5511.../messages`).
  Binding the method and path means a delivery signed for one conversation (or endpoint) cannot
  be replayed onto another. A timestamp outside `FALAI["WEBHOOK_TOLERANCE_S"]` (300 s) of now is
  refused (replay window); a repeated delivery inside the window is harmless: the engine drops a
  message id it has seen.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions, permissions

from falai_django import conf

TIMESTAMP_HEADER = "X-Falai-Timestamp"
SIGNATURE_HEADER = "X-Falai-Signature"


def sign(secret: str, timestamp: int | str, body: bytes, *, method: str = "POST", path: str) -> str:
    """The signature header value for a request: `sha256=<hex>` over timestamp, method, path, body."""
    signed = f"{timestamp}.{method.upper()} {path}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


class ServiceClient:
    """The identity of a service authenticated by a shared secret rather than as a user: no
    permissions of its own; what it may do is its permission class's to say."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    username = "service"
    pk = None

    def __str__(self) -> str:
        return self.username

    def has_perm(self, perm: str, obj=None) -> bool:
        return False


class WebhookClient(ServiceClient):
    """The identity of a correctly signed webhook."""

    username = "webhook"


class WebhookSignatureAuthentication(authentication.BaseAuthentication):
    """HMAC-signed webhooks. Requests without either header are left to other classes; one with
    a timestamp but no signature is refused (401), not quietly read as unsigned."""

    def authenticate(self, request):
        signature = request.headers.get(SIGNATURE_HEADER)
        if signature is None:
            if request.headers.get(TIMESTAMP_HEADER):  # half a signature is a mistake to hear about
                raise exceptions.AuthenticationFailed(
                    _("A signed webhook sends both %(ts)s and %(sig)s; this request has no %(sig)s.")
                    % {"ts": TIMESTAMP_HEADER, "sig": SIGNATURE_HEADER})
            return None
        secret = conf.get("WEBHOOK_SECRET")
        if not secret:
            raise exceptions.AuthenticationFailed(_("Signed webhooks are not enabled on this server."))
        raw_ts = request.headers.get(TIMESTAMP_HEADER, "")
        try:
            timestamp = int(raw_ts)
        except ValueError:
            raise exceptions.AuthenticationFailed(
                _("The %(header)s header must be unix seconds.") % {"header": TIMESTAMP_HEADER}
            ) from None
        if abs(time.time() - timestamp) > conf.get("WEBHOOK_TOLERANCE_S"):
            raise exceptions.AuthenticationFailed(_("The webhook timestamp is outside the replay window."))
        expected = sign(secret, raw_ts, request._request.body, method=request.method,
                        path=request._request.get_full_path())
        if not hmac.compare_digest(expected, signature.strip()):
            raise exceptions.AuthenticationFailed(_("The webhook signature does not match."))
        return WebhookClient(), "webhook"

    def authenticate_header(self, request) -> str:
        return 'FalaiSignature header="X-Falai-Signature"'


class CanDriveConversations(permissions.BasePermission):
    """A signed webhook, or an authenticated user allowed to change conversations."""

    message = _("You need the 'change conversation' permission or a signed webhook.")

    def has_permission(self, request, view) -> bool:
        if isinstance(request.user, WebhookClient):
            return True
        return _person_with(request.user, "falai_django.change_conversation")


class CanEraseConversations(permissions.BasePermission):
    """An authenticated user with the `falai_django.erase_conversation` permission (superusers
    have it). A signed webhook never erases: erasure is a person's decision, audited by name."""

    message = _("You need the 'erase conversation' permission.")

    def has_permission(self, request, view) -> bool:
        return _person_with(request.user, "falai_django.erase_conversation")


def _person_with(user, perm: str) -> bool:
    """An active, authenticated Django user (not a service) holding `perm`."""
    return bool(user and not isinstance(user, ServiceClient) and user.is_authenticated and user.is_active
                and user.has_perm(perm))
