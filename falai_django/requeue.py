"""Rebuilding the `Wake` table from the sessions (after a restore, a lost broker, a bug fix)."""

from __future__ import annotations

import logging
from typing import Any

from . import conf
from .loop import context_for
from .models import Session as SessionRow
from .models import Wake
from .stores.django import read_blob

logger = logging.getLogger("falai_django.host")


def requeue_wakes(*, session_ids: list[str] | None = None, agent: Any = None, progress=None) -> dict[str, int]:
    """Rebuild every pending wake from `agent.pending_wakes` (safe to run twice).

    Each returned wake is upserted as `pending` (a wake that fires twice is dropped as stale),
    so the dispatcher fires it at its time, or at once when that time has passed.
    """
    agent = agent or conf.get_agent()
    rows = SessionRow.objects.all()
    if session_ids:
        rows = rows.filter(pk__in=session_ids)
    total = rows.count()
    report = {"sessions": total, "wakes": 0, "failed": 0}
    for index, (session_id, blob) in enumerate(rows.values_list("id", "blob").iterator(chunk_size=500), 1):
        try:
            session = read_blob(blob, session_id)
            wakes = agent.pending_wakes(session=session, context=context_for(session_id, session, {}))
        except Exception:  # noqa: BLE001 - one broken row must not stop the rebuild
            logger.exception("falai requeue: cannot compute the wakes of %s", session_id)
            report["failed"] += 1
            wakes = []
        if wakes:
            Wake.objects.upsert(session_id, wakes)
            report["wakes"] += len(wakes)
        if progress:
            progress(index, total)
    return report
