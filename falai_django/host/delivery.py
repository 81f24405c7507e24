"""Delivering the outbox: the configured sender (`falai_django.sending`), called once per emitted
message, in order.

The sender is called after commit, from a django-q2 task or the dispatcher's sender pool, for the
conversation's pending outbound history rows in id order:

- `after_ms` is honoured: a message waits that long after the one before it was sent;
- a failure is recorded on the row (`send_attempts`, `send_error`) and retried with backoff
  (the dispatcher's sweep hands it back to django-q2); later messages of that conversation
  wait behind it, so the order holds;
- a row marked `sent` is never sent again. A worker that dies between the sender call and the
  `sent` update leaves the row pending; it is sent again with the same `idempotency_key`,
  which the channel can use to drop the duplicate (at-least-once with a stable key).

Only one worker sends a conversation's messages at a time: a PostgreSQL advisory lock (no write,
freed by the server when a worker dies), or a lease column on the conversation's row on other
databases and behind a transaction-pooling PgBouncer (`FALAI["SEND_LOCK"] = "lease"`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import Field, Q, TextField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from falai_django import conf
from falai_django.host import jobs, sandbox
from falai_django.models import History
from falai_django.models import Session as SessionRow
from falai_django.observe import context as observe
from falai_django.observe import metrics, tracing
from falai_django.sending import OutboundSend, PermanentSendError, SendError, channel_name

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

    from falai_django.models.host import HistoryQuerySet

logger = logging.getLogger("falai_django.sending")

# `FALAI["SENDER"]`: called with each message, it may return the channel's message id.
Sender = Callable[[OutboundSend], Any]
Sleep = Callable[[float], object]
# A 'sent' update left for the lock release: (row id, attempt, sent at, channel message id).
Mark = tuple[int, int, datetime, str | None]


def send_after_commit(session_id: str) -> None:
    """Send in this process (a worker already running a task); a failure is left to the sweep."""
    try:
        send_pending(session_id)
    except Exception:  # noqa: BLE001 - the rows stay pending; the dispatcher's sweep re-enqueues them
        logger.exception("falai send after commit failed for %s; the sweep retries it", session_id)


def _use_advisory_lock() -> bool:
    from django.db import connection

    mode = conf.get("SEND_LOCK")
    return connection.vendor == "postgresql" and mode in ("auto", "advisory")


def _acquire(session_id: str) -> bool:
    """Take the conversation's send lock: a PostgreSQL advisory lock (no write, released by the
    server if the worker dies), or a lease column on its row elsewhere (`SEND_LOCK = "lease"`)."""
    if _use_advisory_lock():
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [f"falai-send:{session_id}"])
            return bool(cursor.fetchone()[0])
    now = timezone.now()
    return bool(
        SessionRow.objects.filter(pk=session_id)
        .filter(Q(send_lease_until__isnull=True) | Q(send_lease_until__lt=now))
        .update(send_lease_until=now + timedelta(seconds=conf.get("SEND_LEASE_S")))
    )


def _renew(session_id: str) -> None:
    if _use_advisory_lock():
        return  # held until released or the session ends
    SessionRow.objects.filter(pk=session_id).update(
        send_lease_until=timezone.now() + timedelta(seconds=conf.get("SEND_LEASE_S"))
    )


def _release(session_id: str) -> None:
    if _use_advisory_lock():
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [f"falai-send:{session_id}"])
        return
    SessionRow.objects.filter(pk=session_id).update(send_lease_until=None)


def _pending(session_id: str) -> HistoryQuerySet:
    return History.objects.pending_sends(session_id)


def send_delay_s(attempt: int) -> float:
    base, cap = conf.get("SEND_RETRY_BASE_S"), conf.get("SEND_RETRY_CAP_S")
    return min(cap, base * (2 ** max(0, attempt - 1)))


def send_pending(session_id: str, *, sender: Sender | None = None, sleep: Sleep = time.sleep) -> int:
    """Send what is due for one conversation, in order. Returns how many were sent.

    A playground conversation goes to the sandbox sender, never to `FALAI["SENDER"]`."""
    if sender is None:
        sender = sandbox.sandbox_sender if sandbox.is_sandboxed(session_id) else conf.get_sender()
    if _use_advisory_lock():
        return _send_under_advisory_lock(session_id, sender, sleep)
    sent = 0
    while _acquire(session_id):
        try:
            sent += _drain(session_id, list(_pending(session_id)[:BATCH]), sender, sleep)
        finally:
            _release(session_id)
        # A send enqueued while we held the lease found it taken and left: look once more.
        if not _head_is_due(_pending(session_id).values_list("id", "next_attempt_at").first()):
            break
    return sent


BATCH = 100
# Marking a row sent clears its last send error, unless the channel already reported its delivery
# failed (a status that came before the send was recorded): that failure's text stays.
_KEEP_FAILURE = "CASE WHEN delivery_status = 'failed' THEN send_error ELSE '' END"
_COLUMNS = ("id", "content", "kind", "media", "message_key", "run_id", "step_id", "after_ms", "emission_key",
            "idempotency_key", "send_attempts", "next_attempt_at", "turn_id")


def _head_is_due(head: tuple[Any, datetime | None] | None) -> bool:
    return head is not None and (head[1] is None or head[1] <= timezone.now())


def _committed(connection: BaseDatabaseWrapper, statements: str) -> str:
    """`statements` in a transaction of their own, committed at once, when the connection is in
    autocommit (a worker's send). Inside a caller's transaction (`transaction.atomic`: a test's,
    or code that sends in one) they simply join it: a bare COMMIT there would commit the
    caller's work halfway, behind Django's back, and its rollback could no longer undo it."""
    return statements if connection.in_atomic_block else f"BEGIN; {statements}COMMIT; "


def _savepoint_if_in_transaction(connection: BaseDatabaseWrapper) -> contextlib.AbstractContextManager[None]:
    """A savepoint inside a caller's transaction, so a failed statement leaves that transaction
    usable (for the unlock, then the caller's own rollback); nothing in autocommit."""
    from django.db import transaction

    if connection.in_atomic_block:
        return transaction.atomic(using=connection.alias)
    return contextlib.nullcontext()


def _column(name: str) -> str:
    """The database column of one of History's concrete fields (`_COLUMNS`)."""
    field = History._meta.get_field(name)
    assert isinstance(field, Field) and field.column is not None  # _COLUMNS names concrete fields
    return field.column


def _send_under_advisory_lock(session_id: str, sender: Sender, sleep: Sleep) -> int:
    """PostgreSQL: the same loop in three round trips for a one-message turn.

    Django's psycopg cursor binds client-side, so one `execute` may carry several statements:
    "take the lock; read the pending rows" and "release the lock; read the head again". The
    re-read runs after the release with a fresh snapshot (READ COMMITTED), so a turn that
    committed while we held the lock, and whose own send found it taken, is seen here.
    """
    import json

    from django.db import connection

    quote = connection.ops.quote_name
    table = quote(History._meta.db_table)
    columns = ", ".join(quote(_column(c)) for c in _COLUMNS)
    where = f"WHERE {quote('conversation_id')} = %s AND {quote('send_status')} IN ('pending', 'sending') ORDER BY id"
    lock_key = f"falai-send:{session_id}"
    sent = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT pg_try_advisory_lock(hashtextextended(%s, 0)); SELECT {columns} FROM {table} {where} "
                f"LIMIT {BATCH}",
                [lock_key, session_id],
            )
            locked = cursor.fetchone()[0]
            cursor.nextset()
            rows = cursor.fetchall()
        if not locked:
            return sent  # another worker sends this conversation; it looks again when done
        items = []
        for row in rows:
            values = dict(zip(_COLUMNS, row, strict=True))
            if isinstance(values["media"], str):
                values["media"] = json.loads(values["media"])
            items.append(History(conversation_id=session_id, **values))
        deferred: list[Mark] = []
        try:
            sent += _drain(session_id, items, sender, sleep, deferred)
        finally:
            params: list[int | datetime | str | None]
            mark, params = "", []
            if deferred:  # the last 'sent' update rides with the release: one round trip
                pk, attempt, sent_at, channel = deferred[0]
                # Committed before the unlock (an advisory unlock is not transactional): the next
                # holder must never see this row still pending.
                mark = _committed(connection, (
                    f"UPDATE {table} SET {quote('send_status')} = 'sent', {quote('send_attempts')} = %s, "
                    f"{quote('sent_at')} = %s, {quote('next_attempt_at')} = NULL, {quote('send_error')} = {_KEEP_FAILURE}, "
                    f"{quote('channel_message_id')} = %s WHERE id = %s; "))
                params = [attempt, sent_at, channel, pk]
            with connection.cursor() as cursor:
                try:
                    with _savepoint_if_in_transaction(connection):
                        cursor.execute(
                            f"{mark}SELECT pg_advisory_unlock(hashtextextended(%s, 0)); SELECT id, "
                            f"{quote('next_attempt_at')} FROM {table} {where} LIMIT 1",
                            [*params, lock_key, session_id],
                        )
                except Exception:
                    # Leave the session clean: no open transaction, no lock held (the row stays
                    # pending and goes out again under its idempotency key). Inside a caller's
                    # transaction the savepoint was rolled back instead, and theirs goes on.
                    if not connection.in_atomic_block:
                        connection.connection.rollback()
                    cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [lock_key])
                    raise
                head_rows: list = []
                while cursor.nextset():  # the last result set with rows is the head
                    if cursor.description is not None:
                        head_rows = cursor.fetchall()
                head = head_rows[0] if head_rows else None
        if not _head_is_due(head):
            return sent


def send_many(
    session_ids: list[str], *, sender: Sender | None = None, sleep: Sleep = time.sleep
) -> tuple[int, list[str]]:
    """Send what is due for several conversations; returns (how many sent, the conversations to
    look at again: new rows arrived while they were held, or they wait on an `after_ms` delay).

    PostgreSQL with advisory locks: two round trips for the whole batch, not two per
    conversation: "take each conversation's lock; read the locked ones' pending rows", then
    "mark the last sends sent; release the locks; read the heads again". A conversation whose
    lock another worker holds is skipped (that worker looks again when it is done). A
    conversation with an `after_ms` delay is released unsent and returned, to go out through
    `send_pending`, which waits. Elsewhere it is `send_pending` for each.
    """
    if not _use_advisory_lock():
        return sum(send_pending(sid, sender=sender, sleep=sleep) for sid in session_ids), []
    import json

    from django.db import connection

    quote = connection.ops.quote_name
    table = quote(History._meta.db_table)
    columns = ", ".join(f"h.{quote(_column(c))}" for c in _COLUMNS)
    unsent = f"{quote('send_status')} IN ('pending', 'sending')"
    ids = list(dict.fromkeys(session_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH l AS MATERIALIZED (SELECT u.sid FROM unnest(%s::text[]) AS u(sid) "
            f"WHERE pg_try_advisory_lock(hashtextextended('falai-send:' || u.sid, 0))) "
            f"SELECT l.sid, {columns} FROM l LEFT JOIN LATERAL (SELECT * FROM {table} h "
            f"WHERE h.{quote('conversation_id')} = l.sid AND h.{unsent} ORDER BY h.id LIMIT {BATCH}) h ON true "
            f"ORDER BY l.sid, h.id",
            [ids],
        )
        found = cursor.fetchall()
    held: dict[str, list[History]] = {}
    for sid, *row in found:
        items = held.setdefault(sid, [])
        if row[0] is not None:
            values = dict(zip(_COLUMNS, row, strict=True))
            if isinstance(values["media"], str):
                values["media"] = json.loads(values["media"])
            items.append(History(conversation_id=sid, **values))
    sent, again, marks = 0, [], []
    try:
        for sid in ids:
            queued = held.get(sid)
            if not queued:
                continue
            if any(item.after_ms for item in queued):
                again.append(sid)  # sent by send_pending, which waits; after the release below
                continue
            chosen = sender or (sandbox.sandbox_sender if sandbox.is_sandboxed(sid) else conf.get_sender())
            deferred: list[Mark] = []
            sent += _drain(sid, queued, chosen, sleep, deferred)
            marks += deferred
    finally:
        if held:
            heads = _release_many(connection, list(held), marks)
            again += [sid for sid in held if sid not in again and _head_is_due(heads.get(sid))]
    return sent, again


def _release_many(
    connection: BaseDatabaseWrapper, session_ids: list[str], marks: list[Mark]
) -> dict[str, tuple[int, datetime | None]]:
    """Mark the deferred sends sent (committed before the unlocks), release the conversations'
    locks, and read each one's first pending row again. Returns {session id: (id, next_attempt_at)}."""
    import json

    quote = connection.ops.quote_name
    table = quote(History._meta.db_table)
    mark, params = "", []
    if marks:
        mark = _committed(connection, (
            f"UPDATE {table} AS h SET {quote('send_status')} = 'sent', "
            f"{quote('send_attempts')} = x.a, {quote('sent_at')} = x.t, {quote('next_attempt_at')} = NULL, "
            f"{quote('send_error')} = {_KEEP_FAILURE}, {quote('channel_message_id')} = x.c "
            f"FROM jsonb_to_recordset(%s::jsonb) AS x(id bigint, a integer, t timestamptz, c text) "
            f"WHERE h.id = x.id; "))
        params = [json.dumps([{"id": pk, "a": attempt, "t": at.isoformat(), "c": channel}
                              for pk, attempt, at, channel in marks])]
    unlock = ("SELECT pg_advisory_unlock(hashtextextended('falai-send:' || u.sid, 0)) "
              "FROM unnest(%s::text[]) AS u(sid); ")
    head = (f"SELECT DISTINCT ON ({quote('conversation_id')}) {quote('conversation_id')}, id, "
            f"{quote('next_attempt_at')} FROM {table} WHERE {quote('conversation_id')} = ANY(%s) AND "
            f"{quote('send_status')} IN ('pending', 'sending') ORDER BY {quote('conversation_id')}, id")
    with connection.cursor() as cursor:
        try:
            with _savepoint_if_in_transaction(connection):
                cursor.execute(f"{mark}{unlock}{head}", [*params, session_ids, session_ids])
        except Exception:
            # No open transaction, no lock held: the rows stay pending and go out again under
            # their idempotency keys (inside a caller's transaction only the savepoint is undone).
            if not connection.in_atomic_block:
                connection.connection.rollback()
            cursor.execute(unlock, [session_ids])
            raise
        rows: list = []
        while True:  # the last result set is the heads
            if cursor.description is not None:
                rows = cursor.fetchall()
            if not cursor.nextset():
                break
    return {sid: (pk, next_at) for sid, pk, next_at in rows}


def _drain(
    session_id: str, items: list[History], sender: Sender, sleep: Sleep, deferred: list[Mark] | None = None
) -> int:
    with observe.scope_for(session_id):
        return _drain_items(session_id, items, sender, sleep, deferred)


def _drain_items(
    session_id: str, items: list[History], sender: Sender, sleep: Sleep, deferred: list[Mark] | None = None
) -> int:
    """Send `items` (the conversation's pending rows, in order) until one fails or is not due.

    With `deferred`, the last item's 'sent' update is appended there instead of run, for the
    caller to send in the same round trip as the lock release.

    No 'sending' mark is written before the sender call: a worker that dies after the call and
    before the 'sent' update leaves the row pending, and it goes out again under the same
    idempotency key (what a 'sending' mark would lead to as well), for one statement less.
    """
    sent = 0
    previous_sent_at = None
    leased_at = time.monotonic()
    channel_label = channel_name(sender)
    for item in items:
        now = timezone.now()
        if item.next_attempt_at and item.next_attempt_at > now:
            return sent  # a retry not due yet blocks the rest: the sweep comes back for it
        if item.after_ms:
            if previous_sent_at is None:
                previous_sent_at = (
                    History.objects.filter(conversation_id=session_id, turn_id=item.turn_id, id__lt=item.id)
                    .exclude(sent_at__isnull=True)
                    .order_by("-id")
                    .values_list("sent_at", flat=True)
                    .first()
                ) or now
            wait = (previous_sent_at + timedelta(milliseconds=item.after_ms) - now).total_seconds()
            if wait > 0:
                sleep(wait)
        if time.monotonic() - leased_at > conf.get("SEND_LEASE_S") / 2:
            _renew(session_id)
            leased_at = time.monotonic()
        outbound = OutboundSend(
            session_id=session_id,
            text=item.content,
            kind=item.kind,
            media=item.media,
            key=item.message_key,
            run_id=item.run_id,
            step_id=item.step_id,
            after_ms=item.after_ms,
            emission_key=item.emission_key or "",
            idempotency_key=item.idempotency_key or "",
            item_id=item.pk,
        )
        attempt = item.send_attempts + 1
        failure: Exception | None = None
        with tracing.send_span(session_id, channel_label, attempt, item.kind) as span:
            try:
                channel_id = sender(outbound)
            except Exception as exc:  # noqa: BLE001 - any sender failure is recorded and retried
                failure = exc
            give_up = failure is not None and (isinstance(failure, PermanentSendError)
                                               or attempt >= conf.get("SEND_RETRY_MAX"))
            span.result("sent" if failure is None else "failed" if give_up else "retry", failure)
        if failure is not None:
            delay = max(send_delay_s(attempt), getattr(failure, "retry_after_s", None) or 0)
            History.objects.filter(pk=item.pk).update(
                send_status=History.SendStatus.FAILED if give_up else History.SendStatus.PENDING,
                send_attempts=attempt,
                # a channel's own refusal reads as it said it; anything else names the exception
                send_error=(str(failure) if isinstance(failure, SendError) else f"{type(failure).__name__}: {failure}")[:2000],
                next_attempt_at=None if give_up else timezone.now() + timedelta(seconds=delay),
            )
            logger.warning("falai send failed for %s (attempt %d): %s", session_id, attempt, failure)
            metrics.message_sent(channel_label, "failed" if give_up else "retry")
            if give_up:
                continue
            return sent
        previous_sent_at = timezone.now()
        metrics.message_sent(channel_label, "sent")
        channel = str(channel_id)[:255] if channel_id else None
        if deferred is not None and item is items[-1]:
            deferred.append((item.pk, attempt, previous_sent_at, channel))  # merged into the release
        else:
            History.objects.filter(pk=item.pk).update(
                send_status=History.SendStatus.SENT,
                send_attempts=attempt,
                sent_at=previous_sent_at,
                next_attempt_at=None,
                send_error=RawSQL(_KEEP_FAILURE, [], output_field=TextField()),
                channel_message_id=channel,
            )
        sent += 1
    return sent


def sweep_unsent(
    *, older_than_s: float | None = None, hand_over: Callable[[str], object] | None = None
) -> int:
    """Hand back conversations whose due sends were never handed over (a crash between commit
    and enqueue, a NOTIFY nobody heard) or whose retry is due. Returns how many conversations.

    `hand_over(session_id)` does the hand-off (default: a django-q2 task each; the dispatcher
    passes its own sender pool in "notify" mode).
    """
    hand_over = hand_over or jobs.enqueue_send
    older_than_s = conf.get("SEND_SWEEP_AFTER_S") if older_than_s is None else older_than_s
    now = timezone.now()
    stale = now - timedelta(seconds=older_than_s)
    due = History.objects.pending_sends().filter(
        (Q(next_attempt_at__isnull=True) & (Q(queued_at__isnull=True) | Q(queued_at__lte=stale)))
        | Q(next_attempt_at__lte=now)
    )
    session_ids = list(due.order_by().values_list("conversation_id", flat=True).distinct()[:1000])
    if not session_ids:
        return 0
    due.filter(conversation_id__in=session_ids).update(queued_at=now, next_attempt_at=None)
    for session_id in session_ids:
        hand_over(session_id)
    return len(session_ids)
