"""Long-running processes say they are alive: one row per process kind (`models.Heartbeat`).

The dispatcher beats with each sweep (every 2 s, well inside the 10 s a live one must keep);
`GET <app>/metrics` shows the age as `falai_dispatcher_heartbeat_age_seconds`, so a dispatcher
that died, hangs or cannot reach the database is seen within seconds.
"""

from __future__ import annotations

import os
import socket

from django.utils import timezone

DISPATCHER = "dispatcher"  # the dispatcher's row


def beat(process: str, *, using: str | None = None) -> None:
    """Record that `process` is alive now (one upsert)."""
    from falai_django.models import Heartbeat
    from falai_django.observe.metrics import db_alias

    Heartbeat.objects.using(using or db_alias()).bulk_create(
        [Heartbeat(process=process, at=timezone.now(), host=socket.gethostname()[:255], pid=os.getpid())],
        update_conflicts=True, unique_fields=["process"], update_fields=["at", "host", "pid"])
