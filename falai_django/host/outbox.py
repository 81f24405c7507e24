"""Outbox rows: the outbound `History` items a sender delivers.

`outbox_row` is the one definition of such a row, used by a turn's messages and by a human's
reply alike; `write_outbox` inserts rows through the ORM (the PostgreSQL turn writer inserts the
same dicts inside its one statement). Each row carries an emission key, unique per
conversation, and the idempotency key derived from it, which the channel can use to drop a
repeat.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any


def emission_key(message_key: str, occurrence: int, kind: str, input_key: str) -> str:
    """What identifies one emission: the message key, its occurrence in the turn, and the input.

    A step asking again in the same visit on a later turn reuses its message key, and one turn
    may emit two messages under one key (an answer, then the fixed question); a replay of the
    same input reproduces all three parts.
    """
    return f"{message_key}#{occurrence}@{kind}:{input_key}"


def idempotency_key(session_id: str, emission: str) -> str:
    return hashlib.sha256(f"{session_id}\x00{emission}".encode()).hexdigest()


def outbox_row(
    session_id: str,
    *,
    text: str,
    emission: str,
    now: datetime,
    kind: str | None,
    message_key: str | None,
    media: Any = None,
    run_id: str | None = None,
    step_id: str | None = None,
    after_ms: int = 0,
    turn_id: int | None = None,
) -> dict[str, Any]:
    """The column values of one outbound item, pending delivery."""
    return {
        "conversation_id": session_id,
        "role": "assistant",
        "content": text,
        "message_key": message_key,
        "at": now,
        "turn_id": turn_id,
        "kind": kind,
        "media": media,
        "run_id": run_id,
        "step_id": step_id,
        "after_ms": after_ms or 0,
        "emission_key": emission,
        "idempotency_key": idempotency_key(session_id, emission),
        "send_status": "pending",
        "send_attempts": 0,
        "queued_at": now,
        "send_error": "",
    }


def turn_rows(session_id: str, messages: list[Any], *, kind: str, input_key: str, now: datetime,
              turn_id: int | None = None) -> list[dict[str, Any]]:
    """The outbox rows of one turn's messages, in order (occurrences counted per message key)."""
    seen: dict[str, int] = {}
    rows = []
    for message in messages:
        occurrence = seen.get(message.key, 0)
        seen[message.key] = occurrence + 1
        rows.append(outbox_row(
            session_id,
            text=message.text,
            emission=emission_key(message.key, occurrence, kind, input_key),
            now=now,
            kind=message.kind,
            message_key=message.key,
            media=message.media,
            run_id=message.run_id,
            step_id=message.step_id,
            after_ms=message.after_ms or 0,
            turn_id=turn_id,
        ))
    return rows


def write_outbox(rows: list[dict[str, Any]], *, using: str | None = None) -> list[Any]:
    """Insert outbox rows (and any inbound items given as column dicts) through the ORM."""
    from falai_django.models import History

    items = [History(**row) for row in rows]
    return History.objects.using(using).bulk_create(items) if items else []
