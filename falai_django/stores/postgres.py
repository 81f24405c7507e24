"""PostgresStore: one row per session in a JSONB column, saved by one compare-and-swap statement.

    store = PostgresStore(client=psycopg_pool.ConnectionPool(dsn), tables={"sessions": "ana_sessions"})
    store.initialize()

`client` is a psycopg 3 connection or a `psycopg_pool.ConnectionPool`; the store never opens
connections of its own. On a plain connection that is idle the store commits its own
statement; inside a transaction the caller opened, it leaves the commit to the caller (so
the save can share a transaction with an outbox insert). Share a pool, or an autocommit
connection, between threads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.session import Session

from .base import DEFAULT_TABLE, Store, stamped

__all__ = ["PostgresStore", "check_table_name"]

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")


def check_table_name(name: Any) -> str:
    """Table names are interpolated into SQL, so only plain identifiers are accepted."""
    if not isinstance(name, str) or not _TABLE_NAME.match(name):
        raise ValueError(
            f"[Store] tables.sessions {name!r} is not a plain table name: use letters, digits and "
            'underscores (optionally "schema.table"), e.g. "ana_sessions".'
        )
    return name


class PostgresStore(Store):
    """Sessions in PostgreSQL (table `agent_sessions` unless `tables={"sessions": ...}`)."""

    def __init__(self, client: Any, tables: dict[str, str] | None = None) -> None:
        self.client = client
        self.table = check_table_name((tables or {}).get("sessions", DEFAULT_TABLE))
        t = self.table
        self._sql_create = (
            f"CREATE TABLE IF NOT EXISTS {t} (id VARCHAR(255) PRIMARY KEY, version INTEGER NOT NULL, "
            "blob JSONB NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(), "
            "updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW())"
        )
        # blob::text lets pydantic-core parse and check the JSON in one pass
        self._sql_load = f"SELECT blob::text FROM {t} WHERE id = %s"
        self._sql_insert = (
            f"INSERT INTO {t} (id, version, blob) VALUES (%s, %s, %s::jsonb) "
            "ON CONFLICT (id) DO NOTHING RETURNING version"
        )
        self._sql_update = (
            f"UPDATE {t} SET version = %s, blob = %s::jsonb, updated_at = NOW() "
            "WHERE id = %s AND version = %s RETURNING version"
        )
        self._sql_version = f"SELECT version FROM {t} WHERE id = %s"

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        client = self.client
        if hasattr(client, "getconn"):  # a psycopg_pool pool: its context commits or rolls back
            with client.connection() as conn:
                yield conn
            return
        from psycopg.pq import TransactionStatus

        owns_transaction = not client.autocommit and client.info.transaction_status == TransactionStatus.IDLE
        try:
            yield client
        except BaseException:
            if owns_transaction:
                client.rollback()
            raise
        if owns_transaction:
            client.commit()

    def load(self, session_id: str) -> Session | None:
        with self._connection() as conn:
            row = conn.execute(self._sql_load, (session_id,)).fetchone()
        if row is None:
            return None
        return Session.from_json_text(row[0], session_id)

    async def aload(self, session_id: str) -> Session | None:
        """See load()."""
        return await super().aload(session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        saved, text = stamped(session, expected_version)
        with self._connection() as conn:
            if expected_version == 0:
                row = conn.execute(self._sql_insert, (saved.id, saved.version, text)).fetchone()
            else:
                row = conn.execute(self._sql_update, (saved.version, text, saved.id, expected_version)).fetchone()
            if row is None:
                current = conn.execute(self._sql_version, (saved.id,)).fetchone()
                raise SessionConflictError(saved.id, expected_version, None if current is None else current[0])
        return saved

    async def asave(self, session: Session, expected_version: int) -> Session:
        """See save()."""
        return await super().asave(session, expected_version)

    def initialize(self) -> None:
        """Create the sessions table when it is missing (never alters an existing one)."""
        with self._connection() as conn:
            conn.execute(self._sql_create)

    async def ainitialize(self) -> None:
        """See initialize()."""
        await super().ainitialize()

    def disconnect(self) -> None:
        """Close the client (the connection or pool passed in)."""
        self.client.close()
