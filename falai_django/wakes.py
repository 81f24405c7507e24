"""Durable wakes and their dispatcher.

A turn's `schedule[]` lands in the `Wake` table inside the turn's transaction. The dispatcher
(`manage.py falai_dispatch_wakes`) polls every `DISPATCH_POLL_S` (0.1 s): it claims due wakes
(`pending` → `queued`; `SELECT … FOR UPDATE SKIP LOCKED` on PostgreSQL, so several dispatchers
can run, a plain claim-by-update elsewhere) and hands them to django-q2 in chunks
(`fire_wakes`), where the workers run `turn(wake=key)` through the host. django-q2's own
scheduler is not used: it scans every 30 s and its names hold 100 characters.

Idempotent if it dies mid-way: a wake claimed but never fired goes back to `pending` once its
claim is older than `DISPATCH_LEASE_S`, and a wake that fires twice is dropped by the engine as
stale. The same loop re-enqueues sends whose hand-off was lost and inputs parked for retry.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, router, transaction
from django.db.models import F
from django.utils import timezone

from . import conf

logger = logging.getLogger("falai_django.wakes")


def _db_alias() -> str:
    from .models import Wake

    return router.db_for_write(Wake)


def claim_due(now: datetime | None = None, limit: int | None = None) -> list[tuple[int, str, str, datetime]]:
    """Mark up to `limit` due pending wakes `queued`; return (id, session id, key, at) of each.

    Due is judged on the agent's clock (a fake clock in tests); the claim time is the wall clock.
    """
    from .host import agent_now
    from .models import Wake

    now = now or agent_now()
    limit = limit or conf.get("DISPATCH_BATCH")
    alias = _db_alias()
    connection = connections[alias]
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(Wake._meta.db_table)
        sql = (
            f"UPDATE {table} SET state = %s, claimed_at = %s, attempts = attempts + 1 "
            f"WHERE id IN (SELECT id FROM {table} WHERE state = %s AND at <= %s "
            f"ORDER BY at LIMIT %s FOR UPDATE SKIP LOCKED) "
            f"RETURNING id, conversation_id, key, at"
        )
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute(sql, [Wake.State.QUEUED, timezone.now(), Wake.State.PENDING, now, limit])
            rows = cursor.fetchall()
        return sorted(rows, key=lambda row: row[3])
    with transaction.atomic(using=alias):
        rows = list(
            Wake.objects.using(alias)
            .filter(state=Wake.State.PENDING, at__lte=now)
            .order_by("at")
            .values_list("id", "conversation_id", "key", "at")[:limit]
        )
        if rows:
            Wake.objects.using(alias).filter(id__in=[r[0] for r in rows], state=Wake.State.PENDING).update(
                state=Wake.State.QUEUED, claimed_at=timezone.now(), attempts=F("attempts") + 1
            )
    return rows


def release_stale_claims(now: datetime | None = None, lease_s: float | None = None) -> int:
    """Claims older than the lease whose task never fired them go back to `pending`."""
    from .models import Wake

    now = now or timezone.now()
    lease_s = conf.get("DISPATCH_LEASE_S") if lease_s is None else lease_s
    return Wake.objects.filter(state=Wake.State.QUEUED, claimed_at__lt=now - timedelta(seconds=lease_s)).update(
        state=Wake.State.PENDING, claimed_at=None
    )


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def dispatch_once(now: datetime | None = None) -> int:
    """Claim what is due and hand it to django-q2. Returns how many wakes were handed over."""
    from .tasks import enqueue

    rows = claim_due(now)
    if not rows:
        return 0
    from django_q.conf import Conf

    # A small batch spread over every worker (their database waits overlap); a big one in chunks
    # of DISPATCH_CHUNK, whose turns run one after the other in one worker.
    size = max(1, min(conf.get("DISPATCH_CHUNK"), -(-len(rows) // max(1, int(Conf.WORKERS or 1)))))
    for chunk in chunks([row[0] for row in rows], size):
        enqueue("falai_django.tasks.fire_wakes", chunk)
    return len(rows)


def fire_wakes(wake_ids: list[int], *, agent: Any = None) -> int:
    """Run `turn(wake=key)` through the host for each wake still queued. Returns how many ran."""
    from . import host
    from .models import Wake

    fired = 0
    rows = Wake.objects.filter(id__in=wake_ids).exclude(state=Wake.State.DONE).values_list(
        "conversation_id", "key", "at"
    )
    for session_id, key, _at in sorted(rows, key=lambda row: row[2]):
        try:
            host.handle(session_id, {"wake": key}, agent=agent, send_inline=True)
        except Exception:  # noqa: BLE001 - one bad wake must not stop the chunk; its claim lapses
            logger.exception("falai wake %s on %s failed", key, session_id)
            continue
        fired += 1
    return fired


def retry_parked_turns(now: datetime | None = None, *, stale_after_s: float = 600.0) -> int:
    """Hand inputs parked for retry (and ones stuck mid-turn by a crash) back to django-q2."""
    from django.db.models import Q

    from .models import TurnRecord
    from .tasks import enqueue

    now = now or timezone.now()
    due = TurnRecord.objects.filter(
        Q(status=TurnRecord.Status.RETRY, next_attempt_at__lte=now)
        | (
            Q(status=TurnRecord.Status.RECEIVED, received_at__lt=now - timedelta(seconds=stale_after_s))
            & (Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        )
    )
    ids = list(due.values_list("id", flat=True)[:500])
    if not ids:
        return 0
    # Push the next look far enough out that the task runs before the sweep sees it again.
    TurnRecord.objects.filter(id__in=ids).update(next_attempt_at=now + timedelta(seconds=60))
    for record_id in ids:
        enqueue("falai_django.tasks.process_turn", record_id)
    return len(ids)


class Dispatcher:
    """The polling loop behind `manage.py falai_dispatch_wakes` (also usable in a thread)."""

    def __init__(self, poll_s: float | None = None, sweep_every_s: float = 2.0) -> None:
        self.poll_s = conf.get("DISPATCH_POLL_S") if poll_s is None else poll_s
        self.sweep_every_s = sweep_every_s
        self.stop_event = threading.Event()
        self.dispatched = 0

    def stop(self) -> None:
        self.stop_event.set()

    def sweep(self) -> None:
        from .sending import sweep_unsent

        release_stale_claims()
        sweep_unsent()
        retry_parked_turns()

    def run(self, *, max_seconds: float | None = None) -> int:
        started = time.monotonic()
        next_sweep = 0.0
        while not self.stop_event.is_set():
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                break
            try:
                if time.monotonic() >= next_sweep:
                    self.sweep()
                    next_sweep = time.monotonic() + self.sweep_every_s
                handed = dispatch_once()
                self.dispatched += handed
            except Exception:  # noqa: BLE001 - a database hiccup must not kill the loop
                logger.exception("falai dispatcher: loop failed; retrying")
                connections.close_all()
                handed = 0
            if handed < conf.get("DISPATCH_BATCH"):
                self.stop_event.wait(self.poll_s)
        return self.dispatched
