"""Durable wakes: their dispatcher, and rebuilding them from the sessions.

A turn's `schedule[]` lands in the `Wake` table inside the turn's transaction. The dispatcher
(`manage.py falai_dispatch_wakes`) polls every `DISPATCH_POLL_S` (0.1 s): it claims due wakes
(`pending` → `queued`; `SELECT … FOR UPDATE SKIP LOCKED` on PostgreSQL, so several dispatchers
can run, a plain claim-by-update elsewhere) and hands them to django-q2 in chunks
(`fire_wakes`), where the workers run `turn(wake=key)` through the host. django-q2's own
scheduler is not used: it scans every 30 s and its names hold 100 characters.

Idempotent if it dies mid-way: a wake claimed but never fired goes back to `pending` once its
claim is older than `DISPATCH_LEASE_S`, and a wake that fires twice is dropped by the engine as
stale. The same loop re-enqueues sends whose hand-off was lost and inputs parked for retry.

In "notify" mode (`FALAI["SEND_HANDOFF"]`, PostgreSQL) the dispatcher is also the sender: it
LISTENs on the channel each turn's statement NOTIFYs, and sends from a small thread pool; the
sweep hands it whatever a missed NOTIFY left behind, so no send depends on the NOTIFY arriving.

A lost database or broker does not end the process (`outages`): one log line when it goes, a
capped backoff (≤ 5 s), one line when it is back, then LISTEN again and a sweep with no grace
period for whatever was written or notified meanwhile.

`requeue_wakes` rebuilds the `Wake` table from the sessions (after a restore, a lost broker, a bug
fix): what `agent.pending_wakes` says each session waits on, upserted as `pending`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.db import close_old_connections, connections, router, transaction
from django.db.models import F, Q
from django.utils import timezone

from falai_django import conf
from falai_django.conf import agent_now
from falai_django.host import delivery, outages, statuses, turns
from falai_django.host.inbox import retry_parked
from falai_django.host.jobs import SEND_CHANNEL, enqueue_wakes
from falai_django.models import Session as SessionRow
from falai_django.models import Wake
from falai_django.models.sql import read_blob
from falai_django.observe import heartbeat, metrics

logger = logging.getLogger("falai_django.wakes")
requeue_logger = logging.getLogger("falai_django.host")


def _db_alias() -> str:
    return router.db_for_write(Wake)


def claim_due(now: datetime | None = None, limit: int | None = None) -> list[tuple[int, str, str, datetime]]:
    """Mark up to `limit` due pending wakes `queued`; return (id, session id, key, at) of each.

    Due is judged on the agent's clock (a fake clock in tests); the claim time is the wall clock.
    """
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
            .due(now)
            .values_list("id", "conversation_id", "key", "at")[:limit]
        )
        if rows:
            Wake.objects.using(alias).filter(id__in=[r[0] for r in rows], state=Wake.State.PENDING).update(
                state=Wake.State.QUEUED, claimed_at=timezone.now(), attempts=F("attempts") + 1
            )
    return rows


def release_stale_claims(now: datetime | None = None, lease_s: float | None = None) -> int:
    """Claims older than the lease whose task never fired them go back to `pending`."""
    now = now or timezone.now()
    lease_s = conf.get("DISPATCH_LEASE_S") if lease_s is None else lease_s
    return Wake.objects.filter(state=Wake.State.QUEUED, claimed_at__lt=now - timedelta(seconds=lease_s)).update(
        state=Wake.State.PENDING, claimed_at=None
    )


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def dispatch_once(now: datetime | None = None) -> int:
    """Claim what is due and hand it to django-q2. Returns how many wakes were handed over."""
    rows = claim_due(now)
    if not rows:
        return 0
    from django_q.conf import Conf

    # A small batch spread over every worker (their database waits overlap); a big one in chunks
    # of DISPATCH_CHUNK, whose turns run one after the other in one worker.
    size = max(1, min(conf.get("DISPATCH_CHUNK"), -(-len(rows) // max(1, int(Conf.WORKERS or 1)))))
    pieces = chunks([row[0] for row in rows], size)
    for n, chunk in enumerate(pieces):
        try:
            enqueue_wakes(chunk)
        except Exception:
            # The broker refused: what was not handed over goes back to `pending` now rather than
            # when its claim lapses (DISPATCH_LEASE_S), so it fires as soon as the broker is back.
            unhanded = [wake_id for piece in pieces[n:] for wake_id in piece]
            Wake.objects.using(_db_alias()).filter(id__in=unhanded, state=Wake.State.QUEUED).update(
                state=Wake.State.PENDING, claimed_at=None, attempts=F("attempts") - 1)
            raise
    return len(rows)


def chunk_budget_s() -> float:
    """How long one `fire_wakes` task may run before it commits and hands the rest back: half of
    django-q2's task timeout (30 s without one), so a chunk of slow model calls is never killed."""
    from django_q.conf import Conf

    timeout = Conf.TIMEOUT
    return float(timeout) / 2 if timeout else 30.0


def fire_wakes(wake_ids: list[int], *, agent: Any = None, budget_s: float | None = None) -> int:
    """Run `turn(wake=key)` through the host for each wake still queued. Returns how many ran.

    A chunk that runs past `budget_s` (default `chunk_budget_s()`) commits what it fired and puts
    the rest back to `pending`, for the dispatcher's next poll.
    """
    fired = 0
    alias = _db_alias()
    budget_s = chunk_budget_s() if budget_s is None else budget_s
    started = time.monotonic()
    left: list[tuple[str, str]] = []
    # One commit for the chunk (each wake's write has its own savepoint): the workers wait on one
    # WAL flush per chunk instead of one per wake. A worker that dies mid-chunk commits none of
    # it; the claims lapse and the wakes fire again (a wake fired twice is dropped as stale).
    with transaction.atomic(using=alias):
        due = turns.load_wakes(wake_ids)
        clock, read_at = agent_now(agent), time.monotonic()  # the clock they were due by, read once
        for n, (session_id, key, loaded, at) in enumerate(due):
            if n and time.monotonic() - started > budget_s:
                left = [(sid, k) for sid, k, _loaded, _at in due[n:]]
                break
            metrics.wake_fired((clock - at).total_seconds() + time.monotonic() - read_at)
            try:
                turns.handle(session_id, {"wake": key}, agent=agent, send_inline=True, loaded=loaded)
            except Exception:  # noqa: BLE001 - one bad wake must not stop the chunk; its claim lapses
                logger.exception("falai wake %s on %s failed", key, session_id)
                if connections[alias].needs_rollback:
                    break  # the database refused something: this chunk is lost; its claims lapse
                continue
            fired += 1
        if left:  # not tried: back to the dispatcher at once (a wake that failed waits out its lease)
            untried = Q()
            for sid, k in left:
                untried |= Q(conversation_id=sid, key=k)
            Wake.objects.using(alias).filter(untried, id__in=wake_ids, state=Wake.State.QUEUED).update(
                state=Wake.State.PENDING, claimed_at=None)
    return fired


retry_parked_turns = retry_parked  # the name before the inbox had its own module


class SendListener:
    """The dispatcher's sender in "notify" mode: LISTEN, then send each notified conversation.

    It holds one extra connection of its own (psycopg, autocommit) for LISTEN. Notified
    conversations wait in a queue; up to `threads` drains take them `SEND_BATCH` at a time
    (`delivery.send_many`: two round trips a batch), each thread with its own Django connection.
    A conversation already queued or being sent is not queued twice: the drain that holds it
    reads its pending rows again before letting go.
    """

    def __init__(self, threads: int | None = None, batch: int | None = None) -> None:
        self.threads = threads or int(conf.get("SEND_THREADS"))
        self.batch = batch or int(conf.get("SEND_BATCH"))
        self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="falai-send")
        self.busy: set[str] = set()  # queued or being sent
        self.queue: deque[str] = deque()
        self.drains = 0
        self.lock = threading.Lock()
        self.listen_conn: Any = None
        self.sent = 0

    def start(self) -> None:
        """Open the LISTEN connection (again, after a lost one: notifications sent meanwhile are
        gone, so the caller sweeps for what they carried)."""
        self.disconnect()
        connection = connections[_db_alias()]
        connection.ensure_connection()
        self.listen_conn = connection.get_new_connection(connection.get_connection_params())
        self.listen_conn.autocommit = True
        self.listen_conn.execute(f"LISTEN {SEND_CHANNEL}")

    @property
    def connected(self) -> bool:
        return self.listen_conn is not None and not self.listen_conn.closed

    def disconnect(self) -> None:
        """Drop the LISTEN connection quietly (it may be dead already)."""
        conn, self.listen_conn = self.listen_conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail; it is gone either way
                pass

    def wait(self, timeout: float) -> int:
        """Wait up to `timeout` for notifications; queue each conversation. Returns how many.

        A lost connection raises (the dispatcher's loop reconnects, LISTENs again and sweeps)."""
        if not self.connected:
            self.start()
        submitted = 0
        try:
            for notify in self.listen_conn.notifies(timeout=max(timeout, 0.001)):
                submitted += self.submit(notify.payload)
        except Exception:
            self.disconnect()
            raise
        return submitted

    def submit(self, session_id: str) -> int:
        with self.lock:
            if session_id in self.busy:
                return 0
            self.busy.add(session_id)
            self.queue.append(session_id)
            start = self.drains < self.threads
            if start:
                self.drains += 1
        if start:
            self.pool.submit(self._drain)
        return 1

    def _take(self) -> list[str]:
        with self.lock:
            taken = [self.queue.popleft() for _ in range(min(self.batch, len(self.queue)))]
            if not taken:
                self.drains -= 1
            return taken

    def _drain(self) -> None:
        try:
            while taken := self._take():
                try:
                    self._send(taken)
                finally:
                    with self.lock:
                        self.busy.difference_update(taken)
        finally:
            close_old_connections()  # a thread keeps its connection (CONN_MAX_AGE) between sends

    def _send(self, taken: list[str]) -> None:
        """Send one batch. A connection the database dropped (a restart since this thread last
        sent) is closed and the batch tried once more on a fresh one; anything else, or a
        database still away, leaves the rows pending for the sweep, with a log line."""
        for attempt in (1, 2):
            try:
                sent, again = delivery.send_many(taken)
                self.sent += sent
                for session_id in again:  # a delayed message, or rows that came in meanwhile
                    self.sent += delivery.send_pending(session_id)
                return
            except Exception as exc:  # noqa: BLE001 - the rows stay pending; the sweep comes back for them
                down = outages.dependency_down(exc)
                connections.close_all()  # this thread's: the next use connects afresh
                if down and attempt == 1:
                    continue
                if down:
                    logger.warning("falai sender: the %s is away; %s stay pending for the sweep", down, taken)
                else:
                    logger.exception("falai sender: sending %s failed; the sweep retries it", taken)
                return

    def stop(self) -> None:
        # One closing task per thread (the barrier keeps each on its own thread), then shut down.
        threads = self.pool._max_workers
        barrier = threading.Barrier(threads)

        def close_this_threads_connections() -> None:
            try:
                barrier.wait(timeout=5)
            except threading.BrokenBarrierError:
                pass
            connections.close_all()

        for _ in range(threads):
            self.pool.submit(close_this_threads_connections)
        self.pool.shutdown(wait=True)
        self.disconnect()


class Dispatcher:
    """The polling loop behind `manage.py falai_dispatch_wakes` (also usable in a thread).

    It outlives its dependencies: a lost database (or broker) is logged once, retried with a
    capped backoff (`outages.Backoff`, ≤ 5 s), and once it answers again the listener LISTENs
    again and a sweep with no grace period hands over whatever was written or missed meanwhile.
    `outage.down` names what is away now.
    """

    def __init__(self, poll_s: float | None = None, sweep_every_s: float = 2.0) -> None:
        self.poll_s = conf.get("DISPATCH_POLL_S") if poll_s is None else poll_s
        self.sweep_every_s = sweep_every_s
        self.stop_event = threading.Event()
        self.dispatched = 0
        self.sender: SendListener | None = None
        self.outage = outages.Outage("falai dispatcher", logger)
        self.backoff = outages.Backoff()

    def stop(self) -> None:
        self.stop_event.set()

    def sweep(self, *, everything: bool = False) -> None:
        """Release lapsed claims, hand back unsent rows and parked inputs, apply the delivery statuses
        that came before their rows (`statuses.apply_early`). `everything` (after an
        outage): with no grace period, unsent rows (the NOTIFYs sent meanwhile are lost) and stored
        inputs no caller runs (a worker's turn cut off by the outage failed its task)."""
        heartbeat.beat(heartbeat.DISPATCHER)
        release_stale_claims()
        delivery.sweep_unsent(hand_over=self.sender.submit if self.sender is not None else None,
                              older_than_s=0 if everything else None)
        if everything:
            retry_parked(stale_after_s=0)
        else:
            retry_parked()
        statuses.apply_early()

    def _idle(self) -> None:
        """Wait for the next poll; in notify mode, send what is notified meanwhile."""
        if self.sender is None:
            self.stop_event.wait(self.poll_s)
            return
        self.sender.wait(self.poll_s)

    def run(self, *, max_seconds: float | None = None) -> int:
        started = time.monotonic()
        if conf.send_by_notify(connections[_db_alias()].vendor):
            self.sender = SendListener()  # it LISTENs on its first wait (a database away then is retried)
        try:
            return self._loop(started, max_seconds)
        finally:
            if self.sender is not None:
                self.sender.stop()
                self.sender = None
            connections.close_all()

    def _loop(self, started: float, max_seconds: float | None) -> int:
        next_sweep = 0.0
        recovering = False
        while not self.stop_event.is_set():
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                break
            try:
                if self.sender is not None and not self.sender.connected:
                    self.sender.start()
                if recovering or time.monotonic() >= next_sweep:
                    self.sweep(everything=recovering)
                    next_sweep = time.monotonic() + self.sweep_every_s
                handed = dispatch_once()
                self.dispatched += handed
                if self.outage.back():
                    recovering = False
                self.backoff.reset()
                if handed < conf.get("DISPATCH_BATCH"):
                    self._idle()
                elif self.sender is not None:
                    self.sender.wait(0)
            except Exception as exc:  # noqa: BLE001 - nothing ends the loop but stop()
                self._failed(exc)
                recovering = recovering or bool(self.outage.down)
        return self.dispatched

    def _failed(self, exc: Exception) -> None:
        """Log (once per outage when a dependency is away), drop the connections, back off."""
        down = outages.dependency_down(exc)
        if down is None:
            logger.exception("falai dispatcher: loop failed; retrying")
        else:
            self.outage.lost(down, exc)
        if self.sender is not None and down == "database":
            self.sender.disconnect()
        try:
            connections.close_all()
        except Exception:  # noqa: BLE001 - closing a dead connection can fail; it is gone either way
            pass
        self.stop_event.wait(self.backoff.next())


def requeue_wakes(
    *,
    session_ids: list[str] | None = None,
    agent: Any = None,
    progress: Callable[[int, int], object] | None = None,
) -> dict[str, int]:
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
            wakes = agent.pending_wakes(session=session, context=turns.context_for(session_id, session, {}))
        except Exception:  # noqa: BLE001 - one broken row must not stop the rebuild
            requeue_logger.exception("falai requeue: cannot compute the wakes of %s", session_id)
            report["failed"] += 1
            wakes = []
        if wakes:
            Wake.objects.upsert(session_id, wakes)
            report["wakes"] += len(wakes)
        if progress:
            progress(index, total)
    return report
