"""Keeping data only as long as it should be: `purge()`, run by `manage.py falai_purge` (and the
django-q2 task `falai_django.tasks.purge` a schedule runs).

`FALAI["RETENTION"]` gives each kind of row an age limit (`conf.retention()`); older rows go:

- `run_log`     finished inputs (`TurnRecord` done, unchanged or failed); an input still open
                (received, parked for retry) stays whatever its age. The flow funnel and replays
                read the run log, so they see only what is kept; the admin's finished replays
                (`ReplayRun`, with their reports) go by the same limit.
- `transcript`  transcript lines (`History`); a message still to send stays.
- `wakes`       fired wakes (`Wake` done); pending and queued ones stay.
- `desk`        the desk's notes and markers (`DeskEntry`).

A row is past the limit once any of its time columns is (`Kind.dated_by`: when it was
written, and for some when it finished or fired).

Safe while the host serves: it walks each table by primary key, `batch` rows at a time, and
each batch is one short transaction of its own (a DELETE of at most `batch` rows by primary key,
which never waits on a turn for long nor makes a turn wait long). Rows are written in time
order, so the walk stops at the first batch whose rows are all newer than the limit: a run
over a large table that has nothing to delete reads one batch. Running it again deletes
nothing more (idempotent); stopping it half-way loses nothing (each batch is committed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import router, transaction
from django.db.models import Model, Q
from django.utils import timezone

from falai_django import conf
from falai_django.host import ordering
from falai_django.models import DeskEntry, History, ReplayRun, TurnRecord, Wake
from falai_django.observe import metrics

logger = logging.getLogger("falai_django.host")

BATCH = 1000


@dataclass(frozen=True)
class Kind:
    """One kind of row `FALAI["RETENTION"]` names: its model, the time columns that date a row
    (it goes once any of them is past the limit: they are written in this order, the first
    one being when the row was written), and which rows stay whatever their age (`stays`)."""

    key: str
    model: type[Model]
    dated_by: tuple[str, ...]
    stays: Q | None = None

    def expired(self, cutoff: datetime) -> Q:
        old = Q()
        for column in self.dated_by:
            old |= Q(**{f"{column}__lt": cutoff})
        return old & ~self.stays if self.stays is not None else old


KINDS: tuple[Kind, ...] = (
    Kind("run_log", TurnRecord, ("received_at", "finished_at"), stays=Q(status__in=ordering.OPEN)),
    # The admin's replays are read from the run log and keep its texts in their reports.
    Kind("run_log", ReplayRun, ("requested_at", "finished_at"),
         stays=Q(state__in=[ReplayRun.State.QUEUED, ReplayRun.State.RUNNING])),
    Kind("transcript", History, ("at",),
         stays=Q(send_status__in=[History.SendStatus.PENDING, History.SendStatus.SENDING])),
    Kind("wakes", Wake, ("created_at", "at", "fired_at"), stays=~Q(state=Wake.State.DONE)),
    Kind("desk", DeskEntry, ("at",)),
)


def purge(*, now: datetime | None = None, batch: int = BATCH, only: list[str] | None = None,
          pause_s: float = 0.0, progress: Callable[[str, int], Any] | None = None) -> dict[str, int]:
    """Delete what `FALAI["RETENTION"]` no longer keeps; returns {key: rows deleted} for each
    kind with a limit (a kind kept forever is left out). `only`: these keys alone. `pause_s`:
    a rest between batches (a busy database gets room between them). `progress(key, deleted)`
    is called after each batch that deleted something."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    limits = conf.retention()
    if only is not None:
        unknown = sorted(set(only) - set(limits))
        if unknown:
            raise ValueError(f"unknown retention keys: {', '.join(unknown)} (known: {', '.join(limits)})")
    now = now or timezone.now()
    report: dict[str, int] = {}
    for kind in KINDS:
        limit = limits[kind.key]
        if limit is None or (only is not None and kind.key not in only):
            continue
        report[kind.key] = report.get(kind.key, 0) + _purge_kind(kind, now - limit, batch, pause_s, progress)
    logger.info("falai purge: deleted %s", ", ".join(f"{n} {key}" for key, n in report.items()) or "nothing (all kept)")
    return report


def _purge_kind(kind: Kind, cutoff: datetime, batch: int, pause_s: float,
                progress: Callable[[str, int], Any] | None) -> int:
    model = kind.model
    alias = router.db_for_write(model)
    rows = model._default_manager.using(alias)
    expired = kind.expired(cutoff)
    total, after = 0, None
    while True:
        page = rows.order_by("pk")
        if after is not None:
            page = page.filter(pk__gt=after)
        seen = list(page.values_list("pk", *kind.dated_by)[:batch])
        if not seen:
            break
        after = seen[-1][0]
        with transaction.atomic(using=alias):
            ids = list(rows.filter(expired, pk__in=[row[0] for row in seen]).values_list("pk", flat=True))
            deleted = _delete(model, rows, ids, alias) if ids else 0
        if deleted:
            total += deleted
            metrics.inc("falai_purged_rows_total", deleted, kind=kind.key)
            if progress is not None:
                progress(kind.key, deleted)
        if all(at is None or at >= cutoff for row in seen for at in row[1:]):
            break  # written in time order: everything after this batch is newer still
        if pause_s:
            time.sleep(pause_s)
    return total


def _delete(model: type[Model], rows: Any, ids: list[Any], alias: str) -> int:
    if model is ReplayRun:  # its results go with it (the collector cascades)
        return rows.filter(pk__in=ids).delete()[1].get(model._meta.label, 0)
    if model is TurnRecord:  # the transcript keeps its lines; they no longer name the turn
        History.objects.using(alias).filter(turn_id__in=ids).update(turn=None)
    # No signals and no collector: nothing else cascades from these rows (the run log's one
    # reference, the transcript's, was cleared just above).
    return rows.filter(pk__in=ids)._raw_delete(alias)
