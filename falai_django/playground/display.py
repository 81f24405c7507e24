"""How people see values: one time format everywhere (playground, admin, terminal), no `None`.

The API keeps ISO 8601 (machines read it); pages and the terminal show `when(...)`, the same
`Y-m-d H:i:s` the admin templates use, in the current time zone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

DATETIME_FORMAT = "Y-m-d H:i:s"  # the admin templates' `|date:"Y-m-d H:i:s"`
EMPTY = "—"


def when(value: Any) -> str:
    """A datetime (or an ISO string) as people read it; "—" for nothing."""
    from django.utils import timezone
    from django.utils.dateformat import format as date_format

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
