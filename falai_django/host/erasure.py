"""Erasing a conversation everywhere (LGPD / GDPR), with proof: `erase(session_id, user=...)`.

One transaction deletes every row the app keeps about the conversation — the session, its
transcript and outbox, the run log and inbox (and so the flow funnel's entries, which are read
from the run log), wakes, the desk's assignment, notes and read markers, the admin replays'
reports of it, delivery statuses still waiting for one of its messages, the Django admin's log
lines about it and django-q2's stored failures of its tasks — and writes one `Erasure` row: the
wall-clock time, the user, the rows deleted by table, and the id only as `audit_hash(id)`.

It refuses while a turn of the conversation is running (`ConversationBusyError`, the API's 409):
it takes the conversation's turn lock for its transaction (no drain runs it meanwhile, none
starts), and an input its caller runs in-line or a wake being fired makes it refuse. A customer's
message that arrives after the erasure starts a new conversation, as it would for anyone new.

Nothing is left half-erased: any error rolls the whole transaction back, and the caller is told.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, connections, router, transaction
from django.db.models import Model, QuerySet
from django.utils import timezone

from falai_django import conf
from falai_django.host import ordering
from falai_django.host.inputs import UnknownConversationError
from falai_django.models import (
    Assignment,
    DeskEntry,
    EarlyStatus,
    Erasure,
    History,
    ReadMarker,
    ReplayResult,
    Session,
    TurnLock,
    TurnRecord,
    Wake,
)
from falai_django.observe import metrics

logger = logging.getLogger("falai_django.host")

# How long the erasure waits for a row another transaction holds (a send being recorded) before
# it answers "busy, retry later" (PostgreSQL; SQLite writers queue on the database's own lock).
LOCK_TIMEOUT_MS = 3000
RETRY_AFTER_S = 5  # what a refusal suggests (the API's Retry-After)
_BUSY_SQLSTATES = frozenset({"55P03", "40P01"})  # lock_not_available, deadlock_detected


class ConversationBusyError(Exception):
    """A turn of the conversation is running: nothing was erased; try again in a few seconds."""

    def __init__(self, session_id: str, why: str) -> None:
        super().__init__(f"conversation {session_id!r} is busy ({why}); nothing was erased, retry in a few seconds")
        self.session_id = session_id
        self.why = why
        self.retry_after_s = RETRY_AFTER_S


def audit_hash(session_id: str) -> str:
    """The conversation id as the audit row keeps it: HMAC-SHA256 keyed with the project's SECRET_KEY."""
    return hmac.new(settings.SECRET_KEY.encode(), session_id.encode(), hashlib.sha256).hexdigest()


def erase(session_id: str, *, user: Any = None, username: str | None = None,
          via: str = Erasure.Via.CODE) -> Erasure:
    """Delete everything of `session_id` in one transaction and return the audit row written
    with it. `user`: the Django user who asked (None for a command run outside any account; then
    `username` says who). Raises `ConversationBusyError` while a turn of it runs, and
    `UnknownConversationError` when nothing at all is stored under this id (nothing is written)."""
    alias = router.db_for_write(Session)
    connection = connections[alias]
    if username is None:
        username = user.get_username() if user is not None and hasattr(user, "get_username") else ""
    try:
        with transaction.atomic(using=alias):
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT_MS)}ms'")
            _refuse_while_running(session_id, alias)
            deleted = _delete_everything(session_id, alias)
            if _running_in_line(session_id, alias).exists():  # one that came in after the first look
                raise ConversationBusyError(session_id, "a turn started")
            if not any(deleted.values()):
                raise UnknownConversationError(session_id)
            erasure = Erasure.objects.using(alias).create(
                user=user if getattr(user, "pk", None) is not None else None, username=username[:255],
                session_hash=audit_hash(session_id), via=via, deleted={k: v for k, v in deleted.items() if v})
    except OperationalError as exc:
        if _sqlstate(exc) in _BUSY_SQLSTATES:
            logger.warning("falai erase: conversation %s: a row stayed locked past %d ms; nothing was erased",
                           session_id, LOCK_TIMEOUT_MS)
            metrics.inc("falai_erasures_total", result="busy")
            raise ConversationBusyError(session_id, "its rows are being written") from exc
        raise
    except ConversationBusyError as exc:
        logger.warning("falai erase: conversation %s refused: %s", session_id, exc.why)
        metrics.inc("falai_erasures_total", result="busy")
        raise
    metrics.inc("falai_erasures_total", result="erased")
    _hand_over_inputs_that_waited(session_id)
    logger.info("falai erase: conversation %s erased via %s by %s (audit row %s): %s", session_id, via,
                username or "-", erasure.pk, erasure.deleted)
    return erasure


def _sqlstate(exc: BaseException) -> str | None:
    cause = exc.__cause__
    return getattr(cause, "sqlstate", None) or getattr(getattr(cause, "diag", None), "sqlstate", None)


def _refuse_while_running(session_id: str, alias: str) -> None:
    """Hold the turn lock for the transaction, then make sure no turn runs outside it."""
    if not ordering.lock_for_transaction(session_id, alias):
        raise ConversationBusyError(session_id, "a worker is running its inputs")
    now = timezone.now()
    if _running_in_line(session_id, alias).exists():
        raise ConversationBusyError(session_id, "a turn is running")
    lease = timedelta(seconds=float(conf.get("DISPATCH_LEASE_S")))
    if Wake.objects.using(alias).filter(conversation_id=session_id, state=Wake.State.QUEUED,
                                        claimed_at__gt=now - lease).exists():
        raise ConversationBusyError(session_id, "a wake is being fired")


def _running_in_line(session_id: str, alias: str) -> QuerySet:
    """Inputs whose caller is running them now (claimed, not lapsed): the API's, the desk's."""
    return TurnRecord.objects.using(alias).filter(ordering.claimed(timezone.now()), conversation_id=session_id)


def _hand_over_inputs_that_waited(session_id: str) -> None:
    """An input that arrived while the erasure held the turn lock found it taken, and its worker
    left it for the holder (host/ordering.py); the erasure does not run inputs, so it queues
    one drain for them. They start a new conversation."""
    from falai_django.host.jobs import enqueue_turn

    try:
        waiting = ordering.open_inputs(session_id).values_list("id", flat=True).first()
        if waiting is not None:
            enqueue_turn(waiting)
    except Exception:  # noqa: BLE001 - the erasure stands; the inbox sweep picks the input up
        logger.exception("falai erase: conversation %s: could not queue the inputs that came in during the "
                         "erasure; the inbox sweep runs them", session_id)


def _delete_everything(session_id: str, alias: str) -> dict[str, int]:
    """Every row of the conversation, children before parents; {table: rows deleted}."""
    deleted: dict[str, int] = {}

    def gone(queryset: QuerySet) -> None:
        _total, by_model = queryset.using(alias).delete()
        for label, count in by_model.items():
            table = _table(label)
            deleted[table] = deleted.get(table, 0) + count

    for model in (History, DeskEntry, ReadMarker, Assignment, Wake):
        gone(model.objects.filter(conversation_id=session_id))
    # An input whose caller started it after the first look is kept, and refuses the erasure
    # just after (the deletes are rolled back): its turn would otherwise write into rows gone.
    gone(TurnRecord.objects.filter(conversation_id=session_id).exclude(ordering.claimed(timezone.now())))
    gone(ReplayResult.objects.filter(conversation_id=session_id))
    gone(EarlyStatus.objects.filter(pk__in=_early_statuses_of(session_id, alias)))
    gone(Session.objects.filter(pk=session_id))
    # Bookkeeping, not the conversation's: counted apart so "nothing stored" stays true for it.
    TurnLock.objects.using(alias).filter(pk=session_id).delete()
    deleted.update(_admin_log_lines(session_id, alias))
    deleted.update(_task_failures(session_id, alias))
    return deleted


def _table(label: str) -> str:
    from django.apps import apps

    model: type[Model] = apps.get_model(label)
    return model._meta.db_table


def _early_statuses_of(session_id: str, alias: str) -> list[int]:
    """Delivery statuses still waiting for a message to this conversation (`recipients` names it)."""
    rows = EarlyStatus.objects.using(alias)
    if connections[alias].vendor == "postgresql":
        return list(rows.filter(recipients__contains=[session_id]).values_list("pk", flat=True))
    return [pk for pk, recipients in rows.values_list("pk", "recipients")  # a small table: kept for minutes
            if isinstance(recipients, list) and session_id in recipients]


def _admin_log_lines(session_id: str, alias: str) -> dict[str, int]:
    """The Django admin's log lines about the conversation (their `object_id` is its id)."""
    from django.apps import apps

    if not apps.is_installed("django.contrib.admin"):
        return {}
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    from falai_django.models import Conversation

    types = [ContentType.objects.db_manager(alias).get_for_model(model, for_concrete_model=False)
             for model in (Session, Conversation)]
    count, _by_model = LogEntry.objects.using(alias).filter(content_type__in=types, object_id=session_id).delete()
    return {LogEntry._meta.db_table: count} if count else {}


def _task_failures(session_id: str, alias: str) -> dict[str, int]:
    """django-q2's stored failures of this app's tasks that name the conversation in their
    arguments (successes are not stored: `host.jobs` queues with `save=False`)."""
    from django.apps import apps

    if not apps.is_installed("django_q"):
        return {}
    from django_q.models import Task

    failures = Task.objects.using(alias).filter(success=False, func__startswith="falai_django.")
    ids = [task.pk for task in failures.only("id", "args", "kwargs").iterator()
           if _names(task.args, session_id) or _names(task.kwargs, session_id)]
    if not ids:
        return {}
    count, _by_model = Task.objects.using(alias).filter(pk__in=ids).delete()
    return {Task._meta.db_table: count}


def _names(value: Any, session_id: str) -> bool:
    if isinstance(value, str):
        return value == session_id
    if isinstance(value, dict):
        return any(_names(v, session_id) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_names(v, session_id) for v in value)
    return False
