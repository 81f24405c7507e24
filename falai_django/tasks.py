"""The django-q2 tasks. Thin: each calls the host, the sender or the wake module.

Tasks are queued with `save=False` (successes are not stored; failures are), on the cluster
`FALAI["Q_CLUSTER"]` names (the default cluster when None).
"""

from __future__ import annotations

from typing import Any

from . import conf


def enqueue(func: str, *args: Any) -> Any:
    from django_q.tasks import async_task

    options: dict[str, Any] = {"save": False}
    cluster = conf.get("Q_CLUSTER")
    if cluster:
        options["cluster"] = cluster
    return async_task(func, *args, q_options=options)


def send_pending(session_id: str) -> int:
    from .sending import send_pending as send

    return send(session_id)


def fire_wakes(wake_ids: list[int]) -> int:
    from .wakes import fire_wakes as fire

    return fire(wake_ids)


def process_turn(record_id: int) -> str | None:
    from .host import process_record

    result = process_record(record_id)
    return result.status if result is not None else None
