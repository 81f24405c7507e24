"""The one place that hands work to django-q2 (a leaf: of the app it imports only `conf`, and
`outages` to tell a broker that is away from a bug).

Tasks are named by dotted path (`falai_django.tasks.…`), so producers never import `tasks.py`;
they are queued with `save=False` (successes are not stored; failures are), on the cluster
`FALAI["Q_CLUSTER"]` names (the default cluster when None).
"""

from __future__ import annotations

import logging
from typing import Any

from falai_django import conf

logger = logging.getLogger("falai_django.host")

SEND_CHANNEL = "falai_send"  # PostgreSQL NOTIFY channel: "this conversation has sends to make"


def enqueue(func: str, *args: Any) -> Any:
    """Queue `func(*args)` on django-q2."""
    from django_q.tasks import async_task

    options: dict[str, Any] = {"save": False}
    cluster = conf.get("Q_CLUSTER")
    if cluster:
        options["cluster"] = cluster
    return async_task(func, *args, q_options=options)


def enqueue_send(session_id: str) -> Any:
    """Queue the sending of a conversation's pending messages."""
    return enqueue("falai_django.tasks.send_pending", session_id)


def queue_sends_after_commit(session_id: str) -> None:
    """`enqueue_send`, run once the turn is committed. The turn is recorded by then, so a broker
    that is away must not fail the request (its caller would be told nothing was recorded and
    deliver again): the rows stay pending, visible in the outbox, and the dispatcher's sweep
    queues them after `SEND_SWEEP_AFTER_S`. A log line names the conversation."""
    try:
        enqueue_send(session_id)
    except Exception as exc:  # noqa: BLE001 - logged; the sweep hands the rows over
        logger.warning("falai: could not queue the sends of conversation %s (%s); they stay pending and the "
                       "dispatcher's sweep hands them over", session_id, type(exc).__name__,
                       exc_info=not _dependency_down(exc))


def _dependency_down(exc: BaseException) -> bool:
    from falai_django.host.outages import dependency_down

    return dependency_down(exc) is not None


def enqueue_wakes(wake_ids: list[int]) -> Any:
    return enqueue("falai_django.tasks.fire_wakes", wake_ids)


def enqueue_turn(record_id: int) -> Any:
    return enqueue("falai_django.tasks.process_turn", record_id)


def hand_over_sends(session_id: str, using: str | None = None) -> None:
    """Tell the sender a conversation has new outbox rows (after they are committed).

    PostgreSQL in "notify" mode: a NOTIFY, delivered when the caller's transaction commits (call
    it inside the transaction that wrote the rows). Otherwise a django-q2 task, queued on commit.
    """
    from django.db import connections, router, transaction

    alias = using or router.db_for_write(_history_model())
    connection = connections[alias]
    if conf.send_by_notify(connection.vendor):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [SEND_CHANNEL, session_id])
        return
    transaction.on_commit(lambda: queue_sends_after_commit(session_id), using=alias)


def _history_model() -> Any:
    from django.apps import apps

    return apps.get_model("falai_django", "History")
