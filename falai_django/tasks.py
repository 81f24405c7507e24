"""The django-q2 tasks: entry points on top of the app. Each calls one service function;
nothing imports this module back (producers queue tasks by name through `enqueue`)."""

from __future__ import annotations

from . import loop, sending, wakes


def send_pending(session_id: str) -> int:
    return sending.send_pending(session_id)


def fire_wakes(wake_ids: list[int]) -> int:
    return wakes.fire_wakes(wake_ids)


def process_turn(record_id: int) -> str | None:
    result = loop.process_record(record_id)
    return result.status if result is not None else None
