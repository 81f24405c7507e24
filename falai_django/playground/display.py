"""How people see values: one time format everywhere (playground, admin, terminal), no `None`.

The API keeps ISO 8601 (machines read it); pages and the terminal show `when(...)`: the project's
localized DATETIME_FORMAT, in the current time zone, as Django's admin writes its own date fields
and the app's templates write theirs (`|date:"DATETIME_FORMAT"`). A fresh project in en-us reads
"Dec. 7, 2026, 2:50 p.m."; the demo sets "Y-m-d H:i:s" (project/formats).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

DATETIME_FORMAT = "DATETIME_FORMAT"  # the format's name: the project's, localized, as the admin's
EMPTY = "—"


def when(value: Any) -> str:
    """A datetime (or an ISO string) as people read it; "—" for nothing."""
    from django.utils import timezone
    from django.utils.formats import date_format

    if value is None or value == "":
        return EMPTY
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if not isinstance(value, datetime):
        return str(value)
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return date_format(value, DATETIME_FORMAT)


def text(value: Any, empty: str = EMPTY) -> str:
    """A value as text for people: `None` and "" become `empty`, never the word None."""
    return empty if value is None or value == "" else str(value)
