"""One conversation's inputs are processed in the order they were received (issue 28).

An input is *open* while its `TurnRecord` is `received` or parked for retry (`retry`). Wakes are
left out: a wake is ordered by its `Wake` row and interleaves with the inputs as it always did.
A conversation's *head* is its first open input, by id (the order the rows were written).

- **A later input waits for the earlier one.** An input runs only once every open input before
  it is finished (done, unchanged or failed).
- **Workers drain.** The django-q2 task `process_turn(id)` takes the conversation's *turn lock*
  (a PostgreSQL advisory lock, no write, freed by the server if the worker dies; elsewhere, or
  with `SEND_LOCK = "lease"`, the `falai_turn_lock` lease row) and runs the conversation's open
  inputs in id order, whichever of them its task named. A worker that finds the lock taken
  leaves: the holder reads the head again after it releases the lock (a fresh snapshot) and goes
  on while there is one, so nothing queued meanwhile is stranded (the sender's loop, the same way).
  A drain that runs past half of django-q2's task timeout hands the rest to a new task.
- **In-line inputs are claimed.** An input whose caller runs it and waits for the answer (the
  API's `host.handle`, the desk) is written with `claimed_until` = now + TURN_LEASE_S. A drainer
  that reaches it releases the lock, waits for it outside the lock (its caller is running it),
  and carries on. With nothing open before it the in-line input runs at once: on PostgreSQL the
  check rides in the statement that writes the inbox row and loads the session, no extra round
  trip. Otherwise its caller takes the turn lock and runs the earlier inputs itself, in order,
  then its own, and afterwards hands any input queued behind it to a worker.
- **A parked input blocks until it is retried or given up.** An input parked for retry (a
  provider failure) holds back the conversation's later inputs until its `next_attempt_at` (the
  retry then drains the rest) or until it is given up (`failed`, after TURN_RETRY_MAX attempts):
  the customer's words are understood in order, and the wait is bounded. The inputs waiting
  behind it get the same `next_attempt_at` (the sweep leaves them alone until then); an in-line
  one is parked behind it (status `retry`, answered 202 with the blocker's `retry_at`, no attempt
  counted). An input parked that way holds nothing back itself: it runs right after its blocker,
  in the same drain.
- **Nothing waits silently.** Every wait longer than WAIT_LOG_S, a wait given up after
  TURN_WAIT_S, inputs held behind a parked one and a lock found taken are logged with the
  conversation id (logger `falai_django.host`). A waiting in-line input is parked after
  TURN_WAIT_S (answered 202) rather than hold its caller longer; a worker hands the rest back.

Inputs written at the same instant (one row's INSERT still running while the other's commits)
have no order between them; an input committed before another is written runs before it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from falai_django import conf
from falai_django.host.inbox import HostResult, claim_until, retry_delay_s
from falai_django.host.jobs import enqueue_turn
from falai_django.models import TurnLock, TurnRecord

logger = logging.getLogger("falai_django.host")

OPEN = (TurnRecord.Status.RECEIVED.value, TurnRecord.Status.RETRY.value)
BATCH = 20  # open inputs read with the lock (a drain reads again when it has run them)
WAIT_LOG_S = 5.0  # a wait longer than this is logged (and one past TURN_WAIT_S is given up)


def lock_key(session_id: str) -> str:
    return f"falai-turn:{session_id}"


def is_claimed(record: Any, now: datetime) -> bool:
    """Being run by its in-line caller: received, with a claim that has not lapsed."""
    return (record.status == TurnRecord.Status.RECEIVED and record.claimed_until is not None
            and record.claimed_until > now)


def claimed(now: datetime) -> Q:
    """`is_claimed` as a query: the inputs their in-line callers are running now."""
    return Q(status=TurnRecord.Status.RECEIVED, claimed_until__gt=now)


def is_parked(record: Any, now: datetime) -> bool:
    """Parked for a retry that is not due yet, after an attempt (a provider failure). An in-line
    input parked only because it waited for earlier ones (`park_behind`, never attempted) holds
    nothing back: it runs as soon as it is the head."""
    return (record.status == TurnRecord.Status.RETRY and record.attempts > 0 and record.next_attempt_at is not None
            and record.next_attempt_at > now)


def open_inputs(session_id: str, using: str | None = None) -> QuerySet[TurnRecord]:
    """The conversation's open inputs, in the order they were received (index `falai_turn_open`)."""
    return (TurnRecord.objects.using(using).filter(conversation_id=session_id, status__in=OPEN)
            .exclude(kind=TurnRecord.Kind.WAKE).order_by("id"))


def first_open_before(record: TurnRecord) -> int | None:
    """The id of the first open input written before this one (None: it may run now)."""
    return (open_inputs(record.conversation_id, record._state.db).filter(id__lt=record.pk)
            .values_list("id", flat=True).first())


def open_before_sql(connection: Any, conversation: str, before: str) -> str:
    """`first_open_before` as a PostgreSQL subquery (`conversation` and `before` are SQL): the
    statement that writes an in-line input's row and loads its session carries it."""
    q = connection.ops.quote_name
    return (f"(SELECT o.{q('id')} FROM {q(TurnRecord._meta.db_table)} o WHERE o.{q('conversation_id')} = "
            f"{conversation} AND o.{q('status')} IN ('received', 'retry') AND o.{q('kind')} <> 'wake' "
            f"AND o.{q('id')} < {before} ORDER BY o.{q('id')} LIMIT 1)")


def claim(record: TurnRecord) -> None:
    """Claim a saved input for its in-line caller (an input written without a claim)."""
    until = claim_until()
    TurnRecord.objects.using(record._state.db).filter(pk=record.pk, status__in=OPEN).filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=timezone.now())).update(claimed_until=until)
    record.claimed_until = until


def unclaim(record: TurnRecord) -> None:
    """Its caller will not finish it (a stream abandoned mid-turn): a drain runs it instead."""
    if record.pk is None or record.claimed_until is None:
        return
    try:
        TurnRecord.objects.filter(pk=record.pk, status=TurnRecord.Status.RECEIVED).update(claimed_until=None)
    except Exception:  # noqa: BLE001 - the claim lapses after TURN_LEASE_S all the same
        logger.exception("falai host: conversation %s: could not release the claim of input %s",
                         record.conversation_id, record.pk)


# An in-line input whose caller lost the database mid-turn keeps its claim: neither releasing it
# nor marking the input failed can reach the database. Left alone, every later input of the
# conversation (the channel delivering the same message again among them) would wait behind it
# until it lapses (TURN_LEASE_S). The process remembers it and releases it as soon as it runs
# an input again; the input then runs in order like any other (a second delivery of the same
# message is dropped by the engine).
_cut_off: set[tuple[str, str, str]] = set()
_cut_off_lock = threading.Lock()


def remember_cut_off(record: TurnRecord) -> None:
    """`record`'s in-line run ended with the database away: release its claim when it is back.
    Known by (conversation, kind, key): the row may have been written without its id reaching us."""
    with _cut_off_lock:
        _cut_off.add((record.conversation_id, record.kind, record.input_key))
    logger.warning("falai host: conversation %s: input %s (%s) was cut off by a lost database; its claim is "
                   "released when this process reaches the database again", record.conversation_id,
                   record.pk, record.input_key)


def release_cut_off_claims() -> int:
    """Release the claims `remember_cut_off` noted (a no-op when there are none, the usual case).
    The database still away: they stay noted for the next input. Returns how many were released."""
    if not _cut_off:
        return 0
    with _cut_off_lock:
        taken = list(_cut_off)
        _cut_off.clear()
    released = 0
    for index, (session_id, kind, key) in enumerate(taken):
        try:
            count = TurnRecord.objects.filter(conversation_id=session_id, kind=kind, input_key=key,
                                              status=TurnRecord.Status.RECEIVED,
                                              claimed_until__isnull=False).update(claimed_until=None)
        except Exception:  # noqa: BLE001 - still away: noted again, and the caller's own turn says so
            with _cut_off_lock:
                _cut_off.update(taken[index:])
            return released
        if count:
            logger.warning("falai host: conversation %s: released the claim of input %s, cut off by a lost "
                           "database; it runs in order with the next ones", session_id, key)
        released += count
    return released


# ---------------------------------------------------------------------------------------------
# The turn lock
# ---------------------------------------------------------------------------------------------


def _connection() -> Any:
    return conf.get_store().connection()


def _advisory(connection: Any) -> bool:
    return connection.vendor == "postgresql" and conf.get("SEND_LOCK") in ("auto", "advisory")


_FIELDS = TurnRecord._meta.concrete_fields
_JSON = frozenset(f.attname for f in _FIELDS if f.get_internal_type() == "JSONField")


def _records(connection: Any, rows: list[tuple]) -> list[TurnRecord]:
    names = [f.attname for f in _FIELDS]
    out = []
    for row in rows:
        values = [json.loads(v) if n in _JSON and isinstance(v, str) else v for n, v in zip(names, row, strict=True)]
        out.append(TurnRecord.from_db(connection.alias, names, values))
    return out


def _open_sql(connection: Any, conversation: str, columns: tuple[str, ...] | None = None, limit: int = BATCH) -> str:
    """The open inputs of a conversation (`conversation` is SQL), first `limit` by id: the
    partial index `falai_turn_open` answers it (its predicate is this WHERE)."""
    q = connection.ops.quote_name
    names = ", ".join(q(c) for c in columns) if columns else ", ".join(q(f.column) for f in _FIELDS)
    return (f"SELECT {names} FROM {q(TurnRecord._meta.db_table)} WHERE {q('conversation_id')} = {conversation} "
            f"AND {q('status')} IN ('received', 'retry') AND {q('kind')} <> 'wake' ORDER BY {q('id')} LIMIT {limit}")


def _lease(session_id: str, using: str) -> bool:
    now = timezone.now()
    until = now + timedelta(seconds=float(conf.get("TURN_LEASE_S")))
    held = TurnLock.objects.using(using).filter(pk=session_id)
    if held.filter(Q(until__isnull=True) | Q(until__lt=now)).update(until=until):
        return True
    if held.exists():
        return False
    try:
        with transaction.atomic(using=using):
            TurnLock(conversation_id=session_id, until=until).save(force_insert=True, using=using)
    except IntegrityError:
        return False  # another worker wrote it first
    return True


def lock_for_record(record_id: int) -> tuple[str | None, str | None, bool, list[TurnRecord]]:
    """Take the turn lock of the conversation `record_id` belongs to and read its open inputs:
    (conversation id and kind, both None when there is no such record; locked; the open inputs
    if locked). A wake's record takes no lock (wakes are not ordered with the inputs).

    PostgreSQL: one round trip ("take the lock; read the open inputs"), in place of reading the
    record."""
    connection = _connection()
    if not _advisory(connection):
        found = TurnRecord.objects.using(connection.alias).filter(pk=record_id).values_list(
            "conversation_id", "kind").first()
        if found is None:
            return None, None, False, []
        if found[1] == TurnRecord.Kind.WAKE:
            return *found, False, []
        return (*found, *lock(found[0]))
    q = connection.ops.quote_name
    turns = q(TurnRecord._meta.db_table)
    of_record = f"(SELECT {q('conversation_id')} FROM {turns} WHERE {q('id')} = %s AND {q('kind')} <> 'wake')"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q('conversation_id')}, {q('kind')}, CASE WHEN {q('kind')} <> 'wake' THEN pg_try_advisory_lock("
            f"hashtextextended('falai-turn:' || {q('conversation_id')}, 0)) ELSE false END "
            f"FROM {turns} WHERE {q('id')} = %s; "
            f"{_open_sql(connection, of_record)}",
            [record_id, record_id])
        found = cursor.fetchone()
        cursor.nextset()
        rows = cursor.fetchall()
    if found is None:
        return None, None, False, []
    sid, kind, locked = found
    return sid, kind, bool(locked), _records(connection, rows) if locked else []


def lock(session_id: str) -> tuple[bool, list[TurnRecord]]:
    """Try the conversation's turn lock; with it, its open inputs (PostgreSQL: one round trip)."""
    connection = _connection()
    if not _advisory(connection):
        if not _lease(session_id, connection.alias):
            return False, []
        return True, list(open_inputs(session_id, connection.alias)[:BATCH])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory_lock(hashtextextended(%s, 0)); {_open_sql(connection, '%s')}",
                       [lock_key(session_id), session_id])
        locked = cursor.fetchone()[0]
        cursor.nextset()
        rows = cursor.fetchall()
    return bool(locked), _records(connection, rows) if locked else []


def lock_for_transaction(session_id: str, using: str) -> bool:
    """Try the conversation's turn lock for the rest of the caller's transaction (erasure): on
    PostgreSQL a transaction-level advisory lock on the same key (released at commit or
    rollback), elsewhere the lease row (the caller deletes it, or it lapses after TURN_LEASE_S).
    False: a drain holds it now."""
    from django.db import connections

    connection = connections[using]
    if not _advisory(connection):
        return _lease(session_id, using)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", [lock_key(session_id)])
        return bool(cursor.fetchone()[0])


@dataclass
class Head:
    id: int
    status: str
    next_attempt_at: datetime | None
    claimed_until: datetime | None


def release(session_id: str) -> Head | None:
    """Release the turn lock and read the conversation's head again, after the release (a fresh
    snapshot: an input committed while the lock was held, whose worker left, is seen here).
    PostgreSQL: one round trip."""
    connection = _connection()
    columns = ("id", "status", "next_attempt_at", "claimed_until")
    if not _advisory(connection):
        TurnLock.objects.using(connection.alias).filter(pk=session_id).update(until=None)
        row = open_inputs(session_id, connection.alias).values_list(*columns).first()
        return Head(*row) if row else None
    unlock = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
    with connection.cursor() as cursor:
        try:
            with _savepoint_if_in_transaction(connection):
                cursor.execute(f"{unlock}; {_open_sql(connection, '%s', columns, limit=1)}",
                               [lock_key(session_id), session_id])
        except Exception:
            # No open transaction, no lock left held (inside a caller's transaction only the
            # savepoint is undone, and theirs goes on).
            if not connection.in_atomic_block:
                connection.connection.rollback()
            cursor.execute(unlock, [lock_key(session_id)])
            raise
        cursor.nextset()
        row = cursor.fetchone()
    return Head(*row) if row else None


def _renew(session_id: str) -> None:
    connection = _connection()
    if not _advisory(connection):  # an advisory lock holds until released
        TurnLock.objects.using(connection.alias).filter(pk=session_id).update(
            until=timezone.now() + timedelta(seconds=float(conf.get("TURN_LEASE_S"))))


def _savepoint_if_in_transaction(connection: Any) -> Any:
    import contextlib

    if connection.in_atomic_block:
        return transaction.atomic(using=connection.alias)
    return contextlib.nullcontext()


def task_budget_s() -> float:
    """How long one task drains before it hands the rest to a new task: half of django-q2's task
    timeout (30 s without one), as a wake chunk does."""
    from django_q.conf import Conf

    timeout = Conf.TIMEOUT
    return float(timeout) / 2 if timeout else 30.0


# ---------------------------------------------------------------------------------------------
# Draining
# ---------------------------------------------------------------------------------------------

Run = Callable[[TurnRecord], HostResult]


@dataclass
class Stop:
    """Why a pass over the open inputs stopped: `until` (the in-line caller's own input is the
    head), `claimed` (an input its in-line caller runs), `parked` (a retry not due), `budget`
    (time to hand over), `more` (the batch ran out: read the head again)."""

    reason: str
    record: Any = None


def _run_batch(session_id: str, rows: list[TurnRecord], run: Run, *, until: int | None, deadline: float | None,
               results: dict[int, HostResult], errors: dict[int, Exception], named: int | None = None) -> Stop:
    """Run `rows` (open inputs, in order) until one may not run yet. `named`: the input the task was
    queued for, due whatever its `next_attempt_at` says (the sweep pushes it out as it hands it over)."""
    renewed = time.monotonic()
    for record in rows:
        if until is not None and record.pk >= until:
            return Stop("until", record)
        now = timezone.now()
        if is_claimed(record, now):
            return Stop("claimed", record)
        if is_parked(record, now) and record.pk != named:
            return Stop("parked", record)
        if deadline is not None and time.monotonic() > deadline:
            return Stop("budget", record)
        if record.status == TurnRecord.Status.RECEIVED and record.claimed_until is not None:
            logger.warning("falai host: conversation %s: input %s was claimed in-line until %s and is not "
                           "finished; running it here", session_id, record.pk, record.claimed_until)
        if time.monotonic() - renewed > float(conf.get("TURN_LEASE_S")) / 2:
            _renew(session_id)
            renewed = time.monotonic()
        try:
            result = run(record)
        except Exception as exc:
            if record.status != TurnRecord.Status.FAILED:  # maybe still open: nothing after it may run
                logger.exception("falai host: conversation %s: input %s raised and is not marked failed; its "
                                 "later inputs wait for the sweep", session_id, record.pk)
                raise
            logger.exception("falai host: conversation %s: input %s failed; the next inputs go on", session_id,
                             record.pk)
            errors[record.pk] = exc
            continue
        results[record.pk] = result
        if result.status == TurnRecord.Status.RETRY:  # parked just now: the later inputs wait behind it
            record.status, record.next_attempt_at = TurnRecord.Status.RETRY, result.retry_at
            return Stop("parked", record)
    return Stop("more")


def hold_behind(session_id: str, blocker: Any) -> int:
    """The open inputs after a parked one wait until its retry: the sweep leaves them alone until
    then (their `next_attempt_at`). Logged with the conversation id. Returns how many wait."""
    due = blocker.next_attempt_at
    later = open_inputs(session_id).filter(id__gt=blocker.id, status=TurnRecord.Status.RECEIVED)
    waiting = later.count()
    if waiting:
        later.filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lt=due)).update(next_attempt_at=due)
        logger.warning("falai host: conversation %s: %d later input(s) wait behind input %s, parked for retry "
                       "until %s", session_id, waiting, blocker.id, due)
    return waiting


def wait_finished(session_id: str, record: Any, limit_s: float, waiter: str) -> bool:
    """Wait, outside the turn lock, for an input its in-line caller runs: True once it is finished
    (or its claim lapsed), False after `limit_s` (logged)."""
    started = time.monotonic()
    delay, logged = 0.005, False
    while True:
        row = TurnRecord.objects.filter(pk=record.id).values_list("status", "claimed_until").first()
        if row is None or row[0] != TurnRecord.Status.RECEIVED or row[1] is None or row[1] <= timezone.now():
            if logged:
                logger.warning("falai host: conversation %s: %s waited %.1f s behind input %s", session_id, waiter,
                               time.monotonic() - started, record.id)
            return True
        waited = time.monotonic() - started
        if waited >= limit_s:
            logger.warning("falai host: conversation %s: %s gives up waiting behind input %s (run in-line, "
                           "claimed until %s) after %.1f s", session_id, waiter, record.id, row[1], waited)
            return False
        if not logged and waited >= WAIT_LOG_S:
            logger.warning("falai host: conversation %s: %s has waited %.1f s behind input %s (run in-line)",
                           session_id, waiter, waited, record.id)
            logged = True
        time.sleep(min(delay, limit_s - waited))
        delay = min(delay * 2, 0.1)


def drain(record_id: int, run: Run) -> HostResult | None:
    """The worker's side (the django-q2 task): run the open inputs of `record_id`'s conversation
    in order under its turn lock. Returns `record_id`'s result if this call ran it, else None
    (it was finished already, or the worker holding the lock runs it). An input that raised and
    was marked failed does not hold back the next ones; if it is `record_id` it is raised last.
    A wake's record (parked; its `Wake` row retries it) is run by itself, unordered, as before."""
    sid, kind, locked, rows = lock_for_record(record_id)
    if sid is None:
        return None
    if kind == TurnRecord.Kind.WAKE:
        record = TurnRecord.objects.filter(pk=record_id).first()
        finished = (TurnRecord.Status.DONE, TurnRecord.Status.UNCHANGED)
        return run(record) if record is not None and record.status not in finished else None
    if not locked:
        logger.info("falai host: conversation %s: turn lock held by another worker, which runs input %s in order",
                    sid, record_id)
        return None
    deadline = time.monotonic() + task_budget_s()
    results: dict[int, HostResult] = {}
    errors: dict[int, Exception] = {}
    while True:
        try:
            stop = _run_batch(sid, rows, run, until=None, deadline=deadline, results=results, errors=errors,
                              named=None if record_id in results or record_id in errors else record_id)
        finally:
            head = release(sid)
        if stop.reason == "parked":
            hold_behind(sid, stop.record)
            break
        if stop.reason == "budget":
            logger.info("falai host: conversation %s: drained for %.0f s; input %s and the rest go to a new task",
                        sid, task_budget_s(), stop.record.pk)
            enqueue_turn(stop.record.pk)
            break
        if stop.reason == "claimed":
            limit = min(float(conf.get("TURN_WAIT_S")), max(0.0, deadline - time.monotonic()))
            if not wait_finished(sid, stop.record, limit, f"the worker of input {record_id}"):
                after = open_inputs(sid).filter(id__gt=stop.record.pk).values_list("id", flat=True).first()
                if after is not None:
                    logger.warning("falai host: conversation %s: input %s and the rest handed to a new task",
                                   sid, after)
                    enqueue_turn(after)
                break
        elif head is None:
            break
        locked, rows = lock(sid)
        if not locked:
            logger.info("falai host: conversation %s: turn lock taken by another worker; it drains the rest", sid)
            break
    if record_id in errors:
        raise errors[record_id]
    return results.get(record_id)


def wait_turn(record: TurnRecord, run: Run) -> Stop:
    """The in-line caller's side, when inputs before its own are open: take the turn lock
    (waiting for it) and run them in order. Returns `until` when its input is the head (run it
    now), `parked` (a parked input blocks it: `record` is the blocker) or `timeout` (waited
    TURN_WAIT_S; `record` is the input to hand over, if any). Never returns holding the lock."""
    sid = record.conversation_id
    limit = float(conf.get("TURN_WAIT_S"))
    started = time.monotonic()
    deadline = started + limit
    delay, logged = 0.005, False
    waiter = f"input {record.pk} (in-line)"
    while True:
        locked, rows = lock(sid)
        if not locked:
            waited = time.monotonic() - started
            if waited >= limit:
                logger.warning("falai host: conversation %s: %s could not take the turn lock in %.1f s", sid, waiter,
                               waited)
                return Stop("timeout")
            if not logged and waited >= WAIT_LOG_S:
                logger.warning("falai host: conversation %s: %s has waited %.1f s for the turn lock", sid, waiter,
                               waited)
                logged = True
            time.sleep(min(delay, limit - waited))
            delay = min(delay * 2, 0.1)
            continue
        results: dict[int, HostResult] = {}
        try:
            stop = _run_batch(sid, rows, run, until=record.pk, deadline=deadline, results=results, errors={})
        finally:
            release(sid)
        if stop.reason == "until":
            return stop
        if stop.reason == "parked":
            hold_behind(sid, stop.record)
            return stop
        if stop.reason == "budget":
            logger.warning("falai host: conversation %s: %s ran earlier inputs for %.1f s; parked, the rest go to "
                           "a worker", sid, waiter, time.monotonic() - started)
            return Stop("timeout", stop.record)
        if stop.reason == "claimed":
            if not wait_finished(sid, stop.record, max(0.0, deadline - time.monotonic()), waiter):
                return Stop("timeout")
        elif len(rows) < BATCH:  # all read and run, and its own input was not among them: not open
            return Stop("until")


def hand_on(record: TurnRecord) -> None:
    """After an in-line input that waited has finished: hand the first unclaimed open input
    after it to a worker (one whose task found the lock taken while this caller held it)."""
    try:
        after = (open_inputs(record.conversation_id).filter(id__gt=record.pk)
                 .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lte=timezone.now()))
                 .values_list("id", flat=True).first())
        if after is not None:
            enqueue_turn(after)
    except Exception:  # noqa: BLE001 - the answer is not held back; the sweep picks the input up
        logger.exception("falai host: conversation %s: could not hand on the inputs after %s; the sweep will",
                         record.conversation_id, record.pk)


def park_behind(record: TurnRecord, stop: Stop) -> HostResult:
    """An in-line input that cannot run now: parked (`retry`, not counted as an attempt) behind
    the parked input that blocks it (`retry_at` = that one's), or after waiting TURN_WAIT_S for
    the earlier ones (retried shortly, by the sweep). Its caller is answered "retry" (202)."""
    sid = record.conversation_id
    if stop.reason == "parked":
        retry_at = stop.record.next_attempt_at
        error = f"waiting behind input {stop.record.id} of this conversation, parked for retry"
    else:
        retry_at = timezone.now() + timedelta(seconds=retry_delay_s(1))
        error = "waited too long for the earlier inputs of this conversation"
    TurnRecord.objects.filter(pk=record.pk, status__in=OPEN).update(
        status=TurnRecord.Status.RETRY, next_attempt_at=retry_at, error=error)
    record.status, record.next_attempt_at = TurnRecord.Status.RETRY, retry_at
    logger.warning("falai host: conversation %s: input %s parked until %s: %s", sid, record.pk, retry_at, error)
    if stop.reason == "timeout" and stop.record is not None:
        enqueue_turn(stop.record.pk)  # after this input is parked: the drain must not wait for it
    return HostResult(turn_id=record.pk, session_id=sid, status=TurnRecord.Status.RETRY, error=error,
                      retry_at=retry_at)
