"""The one writer of a turn: everything a changed turn writes, in one transaction.

The compare-and-swap save of the session, the inbound item and the outbox rows, the wakes (the
one `replaces` names is dropped; the wake that fired is marked done), the run log, and the
send hand-off. A `SessionConflictError` or a unique-key violation (`IntegrityError`) leaves
nothing behind, and the loop replays the input.

On PostgreSQL all of it is ONE statement (data-modifying CTEs, each gated on the session's
compare-and-swap having matched, the rows passed as JSON), run on the store's database: one
round trip and one commit. When the sends are handed over by NOTIFY, `pg_notify` rides in the
same statement, so it is delivered exactly when the rows are committed. Elsewhere the same
writes run as ORM statements inside `transaction.atomic` on that database.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from falai_django import channels, conf
from falai_django.engine.jstime import try_parse_iso
from falai_django.host import jobs, outbox
from falai_django.host.inbox import finish, run_log
from falai_django.models import History, TurnRecord, Wake
from falai_django.models.sql import bound_cursor, conflict, save_sql, save_statement
from falai_django.stores.base import stamped
from falai_django.stores.django import DjangoStore


@dataclass
class TurnWrite:
    """What one changed turn writes (built by the loop, written by `write_turn`)."""

    record: TurnRecord  # the inbox row (saved), or an unsaved run-log row for a wake
    session_id: str
    expected: int  # the version loaded (0: no row yet)
    result: Any  # the engine's TurnResult
    replays: int
    now: datetime
    send_inline: bool = False  # a worker sends right after commit (no hand-off at all)
    recording: dict[str, Any] | None = None  # what a replay needs (`run_log`), or None


def _inbound_rows(write: TurnWrite, turn_id: int | None) -> list[dict[str, Any]]:
    record = write.record
    if record.kind != TurnRecord.Kind.MESSAGE:
        return []
    turn = record.input["turn"]
    return [{
        "conversation_id": write.session_id,
        "role": History.Role.USER.value,
        "content": turn["message"],
        "media": channels.line_media(record.input),  # a voice note's id and transcription, ...
        "message_key": turn.get("id"),
        "at": try_parse_iso(turn.get("at") or "") or write.now,
        "turn_id": turn_id,
        "after_ms": 0,
        "send_attempts": 0,
        "send_error": "",
    }]


def _outbound_rows(write: TurnWrite, turn_id: int | None) -> list[dict[str, Any]]:
    return outbox.turn_rows(write.session_id, write.result.messages, kind=write.record.kind,
                            input_key=write.record.input_key, now=write.now, turn_id=turn_id)


def _handoff(write: TurnWrite, vendor: str) -> str:
    """How this turn's sends reach the sender: "" (none), notify, inline or queue.

    A NOTIFY costs nothing extra (it rides in the write), so it wins even in a worker that could
    send in-line: the worker goes on to its next wake while the dispatcher's pool sends.
    """
    messages = write.result.messages
    if not messages:
        return ""
    if conf.send_by_notify(vendor):
        return "notify"
    if write.send_inline and not any(m.after_ms for m in messages):
        return "inline"
    return "queue"


def write_turn(write: TurnWrite, store: DjangoStore) -> tuple[int, str]:
    """Write the turn; returns (saved version, send hand-off). Raises on a conflict, writing nothing."""
    connection = store.connection()
    handoff = _handoff(write, connection.vendor)
    if connection.vendor == "postgresql":
        version = _write_postgres(write, store, connection, notify=handoff == "notify")
    else:
        version = _write_orm(write, store)
    return version, handoff


# -- PostgreSQL: one statement -------------------------------------------------------------------

_HISTORY_COLUMNS = (
    ("conversation_id", "text"), ("role", "text"), ("content", "text"), ("message_key", "text"),
    ("at", "timestamptz"), ("kind", "text"), ("media", "jsonb"), ("run_id", "text"), ("step_id", "text"),
    ("after_ms", "integer"), ("emission_key", "text"), ("idempotency_key", "text"), ("send_status", "text"),
    ("send_attempts", "integer"), ("queued_at", "timestamptz"), ("send_error", "text"),
)
_RUN_LOG_JSON = ("started", "ended", "outcomes", "skipped", "schedule", "usage", "recording")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _write_postgres(write: TurnWrite, store: DjangoStore, connection: Any, *, notify: bool) -> int:
    record = write.record
    result = write.result
    saved, text = stamped(result.session, write.expected)
    model = store.get_model_class()
    _, session_params = save_statement(connection, model, saved, text, write.expected)
    log = run_log(result, write.recording)
    params: list[Any] = list(session_params)
    log_params: list[Any] = [TurnRecord.Status.DONE.value, saved.version] + [
        (_json(value) if value is not None else None) if name in _RUN_LOG_JSON else value
        for name, value in log.items()]
    if record.pk is not None:
        params += [*log_params, write.replays, record.pk]
    else:
        params += [write.session_id, record.kind, record.input_key, _json(record.input), *log_params,
                   record.replays + write.replays, record.attempts + 1]
    rows = _inbound_rows(write, None) + _outbound_rows(write, None)
    if rows:
        if record.pk is not None:
            params.append(record.pk)
        params.append(_json([{c: row.get(c) for c, _ in _HISTORY_COLUMNS} for row in rows]))
    schedule = result.schedule
    new_keys = [entry.key for entry in schedule]
    if schedule:
        params += [write.session_id, _json([{"k": e.key, "a": e.at.isoformat()} for e in schedule])]
    replaced = [e.replaces for e in schedule if e.replaces and e.replaces not in new_keys]
    if replaced:
        params += [write.session_id, replaced]
    fired = record.kind == TurnRecord.Kind.WAKE and record.input_key not in new_keys
    if fired:
        params += [write.session_id, record.input_key]
    if notify:
        params.append(write.session_id)
    shape = _Shape(model._meta.db_table, write.expected == 0, record.pk is not None, tuple(log), bool(rows),
                   bool(schedule), bool(replaced), fired, notify)
    sql = _turn_sql(connection, shape)
    # Inside a caller's transaction (a wake chunk) the statement gets a savepoint, so a unique-key
    # violation undoes this turn alone and the loop can replay it; alone it is its own transaction.
    with _savepoint_if_nested(connection), bound_cursor(connection) as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        if row is None:
            raise conflict(cursor, connection, model, write.session_id, write.expected)
    if record.pk is None:
        record.pk = record.id = row[1]
        record.replays, record.attempts = record.replays + write.replays, record.attempts + 1
    record.status = TurnRecord.Status.DONE
    return saved.version


@dataclass(frozen=True)
class _Shape:
    """What decides the text of a turn's statement (the values all travel as parameters)."""

    sessions: str
    first_save: bool  # version 0: INSERT the session, else the compare-and-swap UPDATE
    inbox_saved: bool  # the run log UPDATEs the inbox row, else (a wake) INSERTs it
    log: tuple[str, ...]  # the run-log columns, in `run_log` order
    history: bool
    wakes: bool
    replaced: bool
    fired: bool
    notify: bool


_TURN_SQL: dict[tuple[str, _Shape], str] = {}


def _turn_sql(connection: Any, shape: _Shape) -> str:
    """The turn's one statement for this shape, built once per database alias and shape: building
    it quotes some hundred names, which cost more than the engine's own work on a short turn."""
    key = (connection.alias, shape)
    sql = _TURN_SQL.get(key)
    if sql is None:
        sql = _TURN_SQL[key] = _build_turn_sql(connection, shape)
    return sql


def _build_turn_sql(connection: Any, shape: _Shape) -> str:
    """The data-modifying CTEs of a turn, each gated on the session's compare-and-swap (`s`).
    Placeholders come in the order `_write_postgres` lists the parameters."""
    q = connection.ops.quote_name
    turns, history, wakes = (q(m._meta.db_table) for m in (TurnRecord, History, Wake))
    insert_session, update_session = save_sql(connection, shape.sessions)
    ctes = [f"s AS ({insert_session if shape.first_save else update_session})"]

    # The run log: an UPDATE of the inbox row, or (a wake's first write) an INSERT of it.
    log_columns = ["status", "finished_at", "next_attempt_at", "error", "version", *shape.log]
    log_values = ["%s", "CURRENT_TIMESTAMP", "NULL", "''", "%s"] + [
        "%s::jsonb" if name in _RUN_LOG_JSON else "%s" for name in shape.log]
    if shape.inbox_saved:
        sets = ", ".join(f"{q(c)} = {v}" for c, v in zip(log_columns, log_values, strict=True))
        ctes.append(
            f"t AS (UPDATE {turns} SET {sets}, {q('replays')} = {q('replays')} + %s, "
            f"{q('attempts')} = {q('attempts')} + 1 WHERE {q('id')} = %s AND {q('status')} <> 'done' "
            f"AND EXISTS (SELECT 1 FROM s) RETURNING {q('id')})")
        turn_id_sql = "%s"
    else:
        columns = ["conversation_id", "kind", "input_key", "input", *log_columns, "replays", "attempts"]
        values = ["%s", "%s", "%s", "%s::jsonb", *log_values, "%s", "%s"]
        ctes.append(
            f"t AS (INSERT INTO {turns} ({', '.join(q(c) for c in columns)}) SELECT {', '.join(values)} "
            f"FROM s RETURNING {q('id')})")
        turn_id_sql = f"(SELECT {q('id')} FROM t)"
    if shape.history:
        names = ", ".join(q(c) for c, _ in _HISTORY_COLUMNS)
        typed = ", ".join(f"{q(c)} {t}" for c, t in _HISTORY_COLUMNS)
        picked = ", ".join(f"x.{q(c)}" for c, _ in _HISTORY_COLUMNS)
        ctes.append(
            f"h AS (INSERT INTO {history} ({names}, {q('turn_id')}) SELECT {picked}, {turn_id_sql} "
            f"FROM s, jsonb_to_recordset(%s::jsonb) AS x({typed}) RETURNING 1)")
    if shape.wakes:
        ctes.append(
            f"w AS (INSERT INTO {wakes} ({q('conversation_id')}, {q('key')}, {q('at')}, {q('state')}, "
            f"{q('attempts')}) SELECT %s, x.k, x.a, 'pending', 0 FROM s, "
            f"jsonb_to_recordset(%s::jsonb) AS x(k text, a timestamptz) "
            f"ON CONFLICT ({q('conversation_id')}, {q('key')}) DO UPDATE SET {q('at')} = EXCLUDED.{q('at')}, "
            f"{q('state')} = 'pending', {q('claimed_at')} = NULL RETURNING 1)")
    if shape.replaced:
        ctes.append(
            f"wd AS (DELETE FROM {wakes} WHERE {q('conversation_id')} = %s AND {q('key')} = ANY(%s) "
            f"AND EXISTS (SELECT 1 FROM s) RETURNING 1)")
    if shape.fired:
        ctes.append(
            f"wf AS (UPDATE {wakes} SET {q('state')} = 'done', {q('fired_at')} = CURRENT_TIMESTAMP "
            f"WHERE {q('conversation_id')} = %s AND {q('key')} = %s AND EXISTS (SELECT 1 FROM s) RETURNING 1)")
    tail = f", pg_notify('{jobs.SEND_CHANNEL}', %s)" if shape.notify else ""
    return f"WITH {', '.join(ctes)} SELECT s.{q('version')}, (SELECT {q('id')} FROM t){tail} FROM s"


def _savepoint_if_nested(connection: Any) -> Any:
    if connection.in_atomic_block:
        return transaction.atomic(using=connection.alias)
    return contextlib.nullcontext()


# -- Other databases: the same writes through the ORM, in one transaction --------------------------


def _write_orm(write: TurnWrite, store: DjangoStore) -> int:
    record = write.record
    result = write.result
    alias = store.db_alias()
    with transaction.atomic(using=alias):
        saved = store.save(result.session, write.expected)
        finish(record, TurnRecord.Status.DONE, result, write.replays, version=saved.version, using=alias,
               recording=write.recording)
        outbox.write_outbox(_inbound_rows(write, record.pk) + _outbound_rows(write, record.pk), using=alias)
        schedule = result.schedule
        new_keys = [entry.key for entry in schedule]
        if schedule:
            Wake.objects.using(alias).upsert(write.session_id, schedule)
        replaced = [e.replaces for e in schedule if e.replaces and e.replaces not in new_keys]
        if replaced:
            Wake.objects.using(alias).filter(conversation_id=write.session_id, key__in=replaced).delete()
        if record.kind == TurnRecord.Kind.WAKE and record.input_key not in new_keys:
            Wake.objects.using(alias).mark_fired(write.session_id, record.input_key, write.now)
    return saved.version

