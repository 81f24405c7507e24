"""`GET <app>/metrics`: the Prometheus text exposition (`observe.exposition`).

Authenticated as the API is (a user with the API permission, a signed webhook) or by
`Authorization: Bearer <FALAI["METRICS_TOKEN"]>`, what a Prometheus scrape config can carry.
A refusal is a 401 (no or a wrong credential) or a 403 (a user without the permission), never
a redirect to a login page; while the database is away it is a 503, so the scrape says `up 0`.
"""

from __future__ import annotations

import hmac
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from rest_framework import authentication, renderers
from rest_framework.views import APIView

from falai_django import conf
from falai_django.api.auth import CanDriveConversations, ServiceClient
from falai_django.host import outages
from falai_django.observe import exposition


class MetricsScraper(ServiceClient):
    """The identity of a request carrying the metrics token."""

    username = "metrics"


class MetricsTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <METRICS_TOKEN>`. Any other credential is left to the API's classes
    (a project whose API tokens are Bearer tokens too keeps them)."""

    def authenticate(self, request: Any) -> tuple[MetricsScraper, str] | None:
        token = conf.get("METRICS_TOKEN")
        scheme, _sep, given = request.headers.get("Authorization", "").partition(" ")
        if not token or scheme.lower() != "bearer":
            return None
        if hmac.compare_digest(given.strip().encode(), str(token).encode()):
            return MetricsScraper(), "metrics"
        return None

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="falai metrics"'


class CanReadMetrics(CanDriveConversations):
    message = _("You need the metrics token or the 'change conversation' permission.")

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, MetricsScraper) or super().has_permission(request, view)


class PlainTextRenderer(renderers.BaseRenderer):
    """A refusal's reason as text, for a client that accepts only text (a scraper, curl)."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        detail = data.get("detail", data) if isinstance(data, dict) else data
        return f"{detail}\n".encode()


@method_decorator(never_cache, name="dispatch")
class MetricsView(APIView):
    permission_classes = [CanReadMetrics]
    renderer_classes = [renderers.JSONRenderer, PlainTextRenderer]
    schema = None  # text for Prometheus, not a JSON API: left out of the OpenAPI schema

    def get_authenticators(self) -> list[Any]:
        from falai_django.api.views import _authentication_classes

        return [MetricsTokenAuthentication(), *(auth() for auth in _authentication_classes())]

    def get(self, request: Any) -> HttpResponse:
        body, content_type = exposition.render(accept=request.headers.get("Accept"))
        return HttpResponse(body, content_type=content_type)

    def handle_exception(self, exc: Exception) -> Any:
        refused = outages.refusal(self.request, exc)
        return refused if refused is not None else super().handle_exception(exc)


# LoginRequiredMiddleware would redirect a scrape to the login page: the view answers for itself.
metrics_view = login_not_required(MetricsView.as_view())
