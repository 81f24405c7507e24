"""SQLiteStore: one row per session as JSON text, saved by one compare-and-swap statement.

    store = SQLiteStore(client="sessions.db")           # the store opens one connection per thread
    store = SQLiteStore(client=sqlite3.connect(path))   # or uses yours (behind a lock)
    store.initialize()

With a path, each thread gets its own autocommit connection (WAL journal, 30 s busy
timeout). With a connection, every call holds a lock; on a connection that is not inside a
transaction the store commits its own statement, inside one it leaves the commit to you.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike
from typing import Any

from falai_django.engine.jstime import to_iso, utc_now
from falai_django.engine.session import Session

from .base import DEFAULT_TABLE, SQLStore, check_table_name

__all__ = ["SQLiteStore"]


class SQLiteStore(SQLStore):
    """Sessions in SQLite (table `agent_sessions` unless `tables={"sessions": ...}`)."""

    def __init__(self, client: sqlite3.Connection | str | PathLike[str],
                 tables: dict[str, str] | None = None, *, timeout: float = 30.0) -> None:
        self.table = check_table_name((tables or {}).get("sessions", DEFAULT_TABLE))
        self.timeout = timeout
        self._lock = threading.RLock()
        self._local = threading.local()
        if isinstance(client, sqlite3.Connection):
            self.client: sqlite3.Connection | None = client
            self.path: str | None = None
        else:
            self.client = None
            self.path = str(client)
            if self.path == ":memory:" or self.path.startswith("file::memory:"):
                # one in-memory database only exists inside one connection: share it
                self.client = self._open()
        t = self.table
        self._sql_create = (
            f"CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "blob TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)"
        )
        self._sql_load = f"SELECT blob FROM {t} WHERE id = ?"
        self._sql_insert = (
            f"INSERT OR IGNORE INTO {t} (id, version, blob, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
        )
        self._sql_update = f"UPDATE {t} SET version = ?, blob = ?, updated_at = ? WHERE id = ? AND version = ?"
        self._sql_version = f"SELECT version FROM {t} WHERE id = ?"

    def _open(self) -> sqlite3.Connection:
        assert self.path is not None
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        if not self.path.startswith((":memory:", "file::memory:")):
            conn.execute("PRAGMA journal_mode=WAL")
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self.client is None:  # a path: this thread's own autocommit connection
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self._open()
            yield conn
            return
        with self._lock:
            conn = self.client
            owns_transaction = not conn.in_transaction
            try:
                yield conn
            except BaseException:
                if owns_transaction and conn.in_transaction:
                    conn.rollback()
                raise
            if owns_transaction and conn.in_transaction:
                conn.commit()

    def _insert(self, conn: sqlite3.Connection, saved: Session, text: str) -> bool:
        now = to_iso(utc_now())  # bookkeeping columns use the wall clock, not the agent's
        return conn.execute(self._sql_insert, (saved.id, saved.version, text, now, now)).rowcount != 0

    def _update(self, conn: sqlite3.Connection, saved: Session, text: str, expected_version: int) -> bool:
        now = to_iso(utc_now())
        params = (saved.version, text, now, saved.id, expected_version)
        return conn.execute(self._sql_update, params).rowcount != 0

    def disconnect(self) -> None:
        """Close the connection passed in (or this thread's own one)."""
        if self.client is not None:
            self.client.close()
        conn: Any = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
