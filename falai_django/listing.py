"""Listing conversations: the status rules and filters the admin's list and `GET sessions` share.

The status is derived from the indexed columns of the session row (never from the blob), so a
filter is one indexed condition.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils.translation import gettext_lazy as _

SILENCED, ASKING, WAITING, IDLE = "silenced", "asking", "waiting", "idle"
STATUS_LABELS = {
    ASKING: _("asking"),
    WAITING: _("waiting"),
    IDLE: _("idle"),
    SILENCED: _("silenced"),
}
STATUS_FILTERS = {
    SILENCED: Q(silenced_reason__isnull=False),
    ASKING: Q(silenced_reason__isnull=True, asking_flow__isnull=False),
    WAITING: Q(silenced_reason__isnull=True, asking_flow__isnull=True, run_count__gt=0),
    IDLE: Q(silenced_reason__isnull=True, asking_flow__isnull=True) & (Q(run_count__isnull=True) | Q(run_count=0)),
}


def conversation_status(row: Any) -> str:
    if row.silenced_reason:
        return SILENCED
    if row.asking_flow:
        return ASKING
    if row.run_count:
        return WAITING
    return IDLE


def search(queryset: QuerySet, text: str) -> QuerySet:
    """What the admin's search box finds: the conversation id, a collected value, transcript words."""
    from .models import History

    words = History.objects.filter(conversation_id=OuterRef("pk"), content__icontains=text)
    return queryset.filter(Q(id__icontains=text) | Q(blob__data__icontains=text) | Exists(words))
