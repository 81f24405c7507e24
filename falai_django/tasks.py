"""The django-q2 tasks: entry points on top of the app. Each calls one service function;
nothing imports this module back (producers queue tasks by name through `enqueue`)."""

from __future__ import annotations

from falai_django.host import delivery, retention, turns, wakes


def send_pending(session_id: str) -> int:
    return delivery.send_pending(session_id)


def fire_wakes(wake_ids: list[int]) -> int:
    return wakes.fire_wakes(wake_ids)


def process_turn(record_id: int) -> str | None:
    result = turns.process_record(record_id)
    return result.status if result is not None else None


def process_turns(record_ids: list[int]) -> int:
    """Several inputs of one conversation, one after the other (a webhook's batch, in order). One
    that raises (it is marked failed) does not hold the others back; the first error is raised last."""
    error: Exception | None = None
    for record_id in record_ids:
        try:
            turns.process_record(record_id)
        except Exception as exc:  # noqa: BLE001 - re-raised once the rest have run
            error = error or exc
    if error is not None:
        raise error
    return len(record_ids)


def replay_run(run_id: int) -> str:
    """The admin's "Replay recent conversations against this version" (`replay.runs`)."""
    from falai_django.replay import runs

    return runs.execute(run_id)


def purge() -> dict[str, int]:
    """Delete what `FALAI["RETENTION"]` no longer keeps (`manage.py falai_purge --schedule`
    schedules it daily)."""
    return retention.purge()
