"""The admin's "Operations" page: is the assistant keeping up, is the model slow or failing, what
does it cost. One page for staff, linked from the admin index (the `Operations` entry), drawn on
the server from `observe.operations.report` — no JavaScript, no external service.

It shows the outbox backlog and the oldest unsent reply, overdue wakes, the dispatcher's last
heartbeat, turns and failures in the last hour and day, model calls, latency p50/p95 and tokens
by model per day (two SVG charts and a table), money per day and per conversation when
`FALAI["MODEL_PRICES"]` prices the models, and the sends that failed, by channel and code.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils.safestring import mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from falai_django.models import Operations
from falai_django.observe import operations

logger = logging.getLogger("falai_django.admin")

REFRESH_S = 30  # the page reloads itself this often (a wall screen stays current)


def age_text(seconds: float | None) -> str:
    """40 s, 3 min, 2 h 5 min, 3 d 4 h."""
    if seconds is None:
        return "—"
    seconds = max(0, int(seconds))
    if seconds < 120:
        return gettext("%(n)d s") % {"n": seconds}
    minutes = seconds // 60
    if minutes < 120:
        return gettext("%(n)d min") % {"n": minutes}
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return gettext("%(h)d h %(m)d min") % {"h": hours, "m": minutes}
    days, hours = divmod(hours, 24)
    return gettext("%(d)d d %(h)d h") % {"d": days, "h": hours}


def money_text(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.2f}" if abs(value) >= 1 else f"{value:.4f}"


def seconds_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def conversation_url(conversation_id: str) -> str:
    try:
        return reverse("admin:falai_django_conversation_change", args=[quote(conversation_id)])
    except NoReverseMatch:
        return ""


@admin.register(Operations)
class OperationsAdmin(admin.ModelAdmin):
    """Only the page: no list, no add, change or delete of rows (the proxy has none of its own)."""

    def _staff(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._staff(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return [path("", self.admin_site.admin_view(self.operations_view), name=name)]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return self.operations_view(request)

    def operations_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context: dict[str, Any] = {
            **self.admin_site.each_context(request), "opts": self.opts, "title": _("Operations"),
            "refresh_s": REFRESH_S,
        }
        try:
            rep = operations.report()
        except DatabaseError as exc:  # said on the page and in the log, never a bare 500
            logger.warning("falai operations page: the database did not answer (%s: %s)", type(exc).__name__, exc)
            context["unavailable"] = type(exc).__name__
            response = TemplateResponse(request, "admin/falai_django/operations.html", context, status=503)
            response["Retry-After"] = str(REFRESH_S)
            return response
        context.update(page_context(rep))
        return TemplateResponse(request, "admin/falai_django/operations.html", context)


def page_context(rep: operations.Report) -> dict[str, Any]:
    """The report as the template shows it (texts formatted here, not in the template)."""
    unsent = rep.oldest_unsent
    overdue = rep.oldest_overdue
    beat = rep.heartbeat
    turns = [{"window": window, "label": label, **rep.turns[window]}
             for window, label in (("hour", _("last hour")), ("day", _("last 24 hours")))]
    model_rows = [{
        "day": m.day, "provider": m.provider, "model": m.model or "—", "calls": m.calls, "errors": m.errors,
        "error_share": f"{100 * m.errors / m.calls:.0f} %" if m.calls else "—",
        "p50": seconds_text(m.p50), "p95": seconds_text(m.p95),
        "prompt": m.prompt, "cached": m.cached, "completion": m.completion, "cost": money_text(m.cost),
    } for m in sorted(rep.model_days, key=lambda m: (m.day, m.model), reverse=True)]
    day_rows = [{
        "day": d.day, "calls": d.calls, "tokens": d.tokens, "conversations": d.conversations,
        "cost": money_text(d.cost), "per_conversation": money_text(d.cost_per_conversation),
    } for d in reversed(rep.days)]
    return {
        "report": rep,
        "outbox": {"pending": rep.outbox_pending, "age": age_text(unsent["age_s"]) if unsent else "",
                   "conversation": unsent["conversation"] if unsent else "",
                   "url": conversation_url(unsent["conversation"]) if unsent else "",
                   "late": bool(unsent and unsent["age_s"] > 60)},
        "wakes": {"overdue": rep.wakes_overdue, "age": age_text(overdue["age_s"]) if overdue else "",
                  "conversation": overdue["conversation"] if overdue else "",
                  "url": conversation_url(overdue["conversation"]) if overdue else "",
                  "late": bool(overdue and overdue["age_s"] > 60)},
        "statuses": {"waiting": rep.statuses_waiting,
                     "age": age_text(rep.oldest_status_s) if rep.oldest_status_s is not None else ""},
        "heartbeat": ({"at": beat["at"], "age": age_text(beat["age_s"]), "host": beat["host"], "pid": beat["pid"],
                       "late": beat["late"]} if beat else None),
        "turns": turns,
        "model_rows": model_rows,
        "day_rows": day_rows,
        "failed_sends": rep.failed_sends,
        "tokens_chart": mark_safe(operations.tokens_svg(rep)),  # noqa: S308 - every text in it is escaped
        "latency_chart": mark_safe(operations.latency_svg(rep)),  # noqa: S308 - likewise
        "priced": rep.priced,
        "unpriced_models": rep.unpriced_models,
    }
