"""The conversation list's filters and change list. Status is derived from the session row's
indexed columns by the rules in `host.conversations` (the API's `GET sessions` filters the same
way), and the list never loads the blob."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from falai_django import conf
from falai_django.host.conversations import STATUS_FILTERS, STATUS_LABELS, owners
from falai_django.models import Conversation


class StatusFilter(admin.SimpleListFilter):
    title = _("status")
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return list(STATUS_LABELS.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        condition = STATUS_FILTERS.get(self.value() or "")
        return queryset.filter(condition) if condition is not None else queryset


class FlowFilter(admin.SimpleListFilter):
    """The asking run's flow. The choices are the agent's flows (no scan of the table)."""

    title = _("flow")
    parameter_name = "flow"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        try:
            flows = conf.get_agent().flows
            return [(flow.id, f"{flow.name} ({flow.id})" if flow.name and flow.name != flow.id else flow.id)
                    for flow in flows]
        except Exception:  # noqa: BLE001 - no agent configured: fall back to the values in use
            values = (
                Conversation.objects.filter(asking_flow__isnull=False)
                .order_by("asking_flow")
                .values_list("asking_flow", flat=True)
                .distinct()
            )
            return [(value, value) for value in values if value is not None]  # none is: filtered above

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(asking_flow=self.value()) if self.value() else queryset


class OwnerFilter(admin.SimpleListFilter):
    """Who a conversation is handed to. The choices are the owners in use, read by a loose index
    scan (`host.conversations.owners`), never a DISTINCT over the whole table."""

    title = _("human owner")
    parameter_name = "human_owner"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in owners()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(human_owner=self.value()) if self.value() else queryset


class SilencedFilter(admin.SimpleListFilter):
    title = _("silenced")
    parameter_name = "silenced"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("yes", _("Yes")), ("no", _("No"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(silenced_reason__isnull=False)
        if self.value() == "no":
            return queryset.filter(silenced_reason__isnull=True)
        return queryset


class ConversationChangeList(ChangeList):
    """The list never loads the blob: every column it shows is a derived, indexed column."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet:
        return super().get_queryset(request, exclude_parameters).defer("blob")
