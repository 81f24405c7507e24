"""The session row in SQL: the statements the ORM store (`stores.django.DjangoStore`) and the
host's turn pipeline share.

- `session_columns`: the indexed columns kept in step with the blob on every save (asking flow
  and step, waiting until, silenced reason, human owner, last user / assistant times, run count);
- `read_blob` / `read_blob_text`: a session from the blob column, checked once (upstream's
  `assertSession`);
- `save_statement` / `save_sql`: compare-and-swap as one statement that returns a row only when it
  wrote (`INSERT … ON CONFLICT (id) DO NOTHING` for version 0, `UPDATE … WHERE id AND version`
  otherwise); `conflict` turns a write that touched nothing into `SessionConflictError`;
- `bound_cursor`: parameters bound server-side on PostgreSQL, so a large blob is never escaped
  into the statement's text.

Nothing here imports the app registry: callers pass the model and the connection.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.session import Session

HANDOFF_KEY = "handoff"  # session.metadata["handoff"] = {"reason", "owner", "mode", "at"}


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    from falai_django.engine.jstime import try_parse_iso

    return try_parse_iso(value)


def read_blob(value: Any, session_id: str) -> Session:
    """A session from the blob column *as the JSONField hands it over* (already decoded): the
    upstream `assertSession` check, nothing decoded twice (a double-encoded blob, a JSON string,
    is refused like every other store refuses it)."""
    return Session.from_json(value, session_id)


def read_blob_text(text: Any, session_id: str) -> Session:
    """A session from the blob column's raw text (raw SQL): parsed and checked in one pass by
    pydantic-core (`Session.from_json_text`), with upstream's reasons when the blob is bad."""
    if isinstance(text, str | bytes):
        return Session.from_json_text(text, session_id)
    return Session.from_json(text, session_id)


def session_columns(session: Session) -> dict[str, Any]:
    """The indexed columns kept in step with the blob on every save, read from the session."""
    asking = next((r for r in session.runs if r.status == "asking"), None)
    untils = [t for r in session.runs if r.status == "waiting" and r.waiting is not None
              for t in [_parse_time(r.waiting.until)] if t is not None]
    handoff = (session.metadata or {}).get(HANDOFF_KEY)
    handoff = handoff if isinstance(handoff, dict) else {}
    return {
        "asking_flow": asking.flow_id if asking else None,
        "asking_step": asking.step_id if asking else None,
        "waiting_until": min(untils) if untils else None,
        "silenced_reason": (str(handoff["reason"])[:255] if handoff.get("reason") else None),
        "human_owner": (str(handoff["owner"])[:255] if handoff.get("owner") else None),
        "last_user_at": _parse_time(session.last_user_at),
        "last_assistant_at": _parse_time(session.last_assistant_at),
        "run_count": len(session.runs),
    }


DERIVED = ("asking_flow", "asking_step", "waiting_until", "silenced_reason", "human_owner", "last_user_at",
           "last_assistant_at", "run_count")


def blob_placeholder(connection: Any) -> str:
    """The blob parameter as SQL: JSON text, cast to jsonb on PostgreSQL (parsed once, by the server)."""
    return "%s::jsonb" if connection.vendor == "postgresql" else "%s"


def blob_select(connection: Any) -> str:
    """The blob column as JSON text (PostgreSQL would otherwise hand a decoded dict to the JSONField)."""
    quoted = connection.ops.quote_name("blob")
    return f"{quoted}::text" if connection.vendor == "postgresql" else quoted


def conflict(cursor: Any, connection: Any, model: Any, session_id: str, expected_version: int,
             ) -> SessionConflictError:
    """The error for a compare-and-swap that wrote nothing, with the version stored now (None: no row)."""
    quote = connection.ops.quote_name
    cursor.execute(f"SELECT {quote('version')} FROM {quote(model._meta.db_table)} WHERE {quote('id')} = %s",
                   [session_id])
    row = cursor.fetchone()
    return SessionConflictError(session_id, expected_version, None if row is None else row[0])


def bound_cursor(connection: Any, *, binary_results: bool = False) -> Any:
    """A cursor whose parameters travel apart from the statement on PostgreSQL (server-side
    binding), so a large blob is not escaped into the SQL text; Django's own cursor elsewhere.

    `binary_results` (PostgreSQL): results come in the server's binary format, where text arrays
    travel as lengths and bytes with nothing to escape or unescape (text columns read the same).

    psycopg prepares a statement on the server once it has run `prepare_threshold` times on a
    connection (5 unless the database's OPTIONS say otherwise): the host's few hot statements are
    then neither parsed nor planned again. Behind a transaction-pooling PgBouncer older than 1.21
    set `OPTIONS = {"prepare_threshold": None}`; nothing is prepared then. The cursor is wrapped
    like Django's, so query logging and `execute_wrapper` still see it."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    if connection.settings_dict.get("OPTIONS", {}).get("server_side_binding"):
        cursor = connection.cursor()  # Django's cursors bind server-side already
    else:
        from django.db.backends.utils import CursorWrapper

        connection.close_if_health_check_failed()
        connection.ensure_connection()
        wrapper = _debug_wrapper() if connection.queries_logged else CursorWrapper
        cursor = wrapper(_cursor_class()(connection.connection), connection)
    if binary_results:
        cursor.cursor.format = _binary_format()
    return cursor


@functools.cache
def _cursor_class() -> Any:  # looked up on first use: importing this module needs no psycopg
    import psycopg

    return psycopg.Cursor


@functools.cache
def _binary_format() -> Any:
    from psycopg.pq import Format

    return Format.BINARY


@functools.cache
def _debug_wrapper() -> Any:
    import contextlib

    from django.db.backends.utils import CursorDebugWrapper

    class BoundDebugWrapper(CursorDebugWrapper):
        """Logs the statement as written (`%s` placeholders): psycopg keeps no text of a prepared
        execution, where Django's own wrapper would log None."""

        @contextlib.contextmanager
        def debug_sql(self, sql: Any = None, params: Any = None, use_last_executed_query: bool = False,
                      many: bool = False) -> Any:
            with super().debug_sql(sql, params, use_last_executed_query=False, many=many):
                yield

    return BoundDebugWrapper


def save_statement(connection: Any, model: Any, saved: Session, text: str, expected_version: int,
                   ) -> tuple[str, list[Any]]:
    """The compare-and-swap as one statement that returns a row only when it wrote.

    Version 0 inserts unless the row exists (`ON CONFLICT DO NOTHING`); any other version updates
    the row only while it is at `expected_version`. The admin's columns ride along.
    """
    derived = session_columns(saved)
    if connection.vendor == "postgresql":  # psycopg adapts str / int / aware datetimes as they are
        values = [derived[name] for name in DERIVED]
    else:
        values = [model._meta.get_field(name).get_db_prep_save(derived[name], connection) for name in DERIVED]
    insert, update = save_sql(connection, model._meta.db_table)
    if expected_version == 0:
        return insert, [saved.id, saved.version, text, *values]
    return update, [saved.version, text, *values, saved.id, expected_version]


_SAVE_SQL: dict[tuple[str, str], tuple[str, str]] = {}


def save_sql(connection: Any, db_table: str) -> tuple[str, str]:
    """The INSERT and UPDATE of `save_statement`, built once per database vendor and table."""
    cached = _SAVE_SQL.get((connection.vendor, db_table))
    if cached is None:
        cached = _SAVE_SQL[(connection.vendor, db_table)] = _build_save_sql(connection, db_table)
    return cached


def _build_save_sql(connection: Any, db_table: str) -> tuple[str, str]:
    quote = connection.ops.quote_name
    table = quote(db_table)
    blob = blob_placeholder(connection)
    columns = ", ".join(quote(c) for c in ("id", "version", "blob", "created_at", "updated_at", *DERIVED))
    values = ", ".join(["%s", "%s", blob, "CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP"] + ["%s"] * len(DERIVED))
    insert = (f"INSERT INTO {table} ({columns}) VALUES ({values}) ON CONFLICT ({quote('id')}) DO NOTHING "
              f"RETURNING {quote('version')}")
    sets = ", ".join([f"{quote('version')} = %s", f"{quote('blob')} = {blob}",
                      f"{quote('updated_at')} = CURRENT_TIMESTAMP"] + [f"{quote(c)} = %s" for c in DERIVED])
    update = (f"UPDATE {table} SET {sets} WHERE {quote('id')} = %s AND {quote('version')} = %s "
              f"RETURNING {quote('version')}")
    return insert, update
