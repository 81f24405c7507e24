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

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from falai_django.engine.session import Session

from .base import DEFAULT_TABLE, SQLStore, check_table_name

__all__ = ["PostgresStore", "check_table_name"]


class PostgresStore(SQLStore):
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

    # both statements end in RETURNING: a row comes back only when one was written

    def _insert(self, conn: Any, saved: Session, text: str) -> bool:
        return conn.execute(self._sql_insert, (saved.id, saved.version, text)).fetchone() is not None

    def _update(self, conn: Any, saved: Session, text: str, expected_version: int) -> bool:
        params = (saved.version, text, saved.id, expected_version)
        return conn.execute(self._sql_update, params).fetchone() is not None

    def disconnect(self) -> None:
        """Close the client (the connection or pool passed in)."""
        self.client.close()
