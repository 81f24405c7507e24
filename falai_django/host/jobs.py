"""The one place that hands work to django-q2 (a leaf: it imports no other module of the app).

Tasks are named by dotted path (`falai_django.tasks.…`), so producers never import `tasks.py`;
they are queued with `save=False` (successes are not stored; failures are), on the cluster
`FALAI["Q_CLUSTER"]` names (the default cluster when None).
"""

from __future__ import annotations

from typing import Any

from falai_django import conf

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
    transaction.on_commit(lambda: enqueue_send(session_id), using=alias)


def _history_model() -> Any:
    from django.apps import apps

    return apps.get_model("falai_django", "History")
