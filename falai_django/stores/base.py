"""The store contract. Every backend (memory, postgres, sqlite, redis, mongo, prisma, opensearch, django)
fills in `Store`.

A store keeps one row per session: the session's v4 JSON blob and an integer version.

- `load(session_id)` returns the stored `Session`, or None when there is no row. A row that
  is not a v4 blob (a 3.x row, a corrupt one, one whose blob id differs from the row id)
  raises `InvalidSessionError`: never None, never a fresh session. Stores never migrate.
- `save(session, expected_version)` is one atomic compare-and-swap:
  `expected_version == 0` inserts and fails when a row exists; any other number updates only
  the row still at that version. Success stores `expected_version + 1` and returns the saved
  session stamped with it (a new object; the argument is not touched). A failed check raises
  `SessionConflictError(session_id, expected_version, actual_version)`, where
  `actual_version` is the stored version, or None when the row is gone.
- `initialize()` creates what is missing (table, index); it never alters what exists.

`SQLStore` writes that compare-and-swap once for the SQL backends (postgres, sqlite): each
gives its connection, its statements and the two conditional writes.

The framework never calls a store: the host loop does (load, turn, save, then send).
Each method has an async twin (`aload`, `asave`, `ainitialize`) right under it.
"""

from __future__ import annotations

import asyncio
import re
from contextlib import AbstractContextManager
from typing import Any

from falai_django.engine.errors import InvalidSessionError, SessionConflictError
from falai_django.engine.session import Session

__all__ = [
    "DEFAULT_TABLE", "MISSING", "SQLStore", "Store", "check_expected_version", "check_table_name", "read_blob",
    "stamp", "stamped", "stored_version",
]

DEFAULT_TABLE = "agent_sessions"

# a stored record without its blob field (upstream reads `undefined` there)
MISSING: Any = object()

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")


class Store:
    """Base class stating the contract above; backends override `load`, `save`, `initialize`."""

    def load(self, session_id: str) -> Session | None:
        """The stored session, or None when no row exists; a bad row raises InvalidSessionError."""
        raise NotImplementedError

    async def aload(self, session_id: str) -> Session | None:
        """See load()."""
        return await asyncio.to_thread(self.load, session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        """Compare-and-swap write; returns the saved session with version `expected_version + 1`."""
        raise NotImplementedError

    async def asave(self, session: Session, expected_version: int) -> Session:
        """See save()."""
        return await asyncio.to_thread(self.save, session, expected_version)

    def initialize(self) -> None:
        """Create what is missing (nothing, for stores that need nothing)."""

    async def ainitialize(self) -> None:
        """See initialize()."""
        await asyncio.to_thread(self.initialize)


class SQLStore(Store):
    """A store over one SQL table (Postgres, SQLite): the compare-and-swap lives here once.

    A backend gives `_connection()` (a DB-API connection that commits or rolls back what it
    owns), the statements `_sql_create`, `_sql_load` (the blob text by id) and `_sql_version`
    (the version by id), and the two conditional writes `_insert` and `_update`.
    """

    _sql_create: str
    _sql_load: str
    _sql_version: str

    def _connection(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _insert(self, conn: Any, saved: Session, text: str) -> bool:
        """Insert the row unless one exists; True when it was written."""
        raise NotImplementedError

    def _update(self, conn: Any, saved: Session, text: str, expected_version: int) -> bool:
        """Update the row only while it is at `expected_version`; True when it was written."""
        raise NotImplementedError

    def load(self, session_id: str) -> Session | None:
        with self._connection() as conn:
            row = conn.execute(self._sql_load, (session_id,)).fetchone()
        if row is None:
            return None
        return Session.from_json_text(row[0], session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        saved, text = stamped(session, expected_version)
        with self._connection() as conn:
            if expected_version == 0:
                written = self._insert(conn, saved, text)
            else:
                written = self._update(conn, saved, text, expected_version)
            if not written:
                current = conn.execute(self._sql_version, (saved.id,)).fetchone()
                raise SessionConflictError(saved.id, expected_version, None if current is None else current[0])
        return saved

    def initialize(self) -> None:
        """Create the sessions table when it is missing (never alters an existing one)."""
        with self._connection() as conn:
            conn.execute(self._sql_create)


def check_table_name(name: Any) -> str:
    """Table names are interpolated into SQL, so only plain identifiers are accepted."""
    if not isinstance(name, str) or not _TABLE_NAME.match(name):
        raise ValueError(
            f"[Store] tables.sessions {name!r} is not a plain table name: use letters, digits and "
            'underscores (optionally "schema.table"), e.g. "ana_sessions".'
        )
    return name


def check_expected_version(expected_version: Any) -> int:
    """A whole number ≥ 0 (booleans refused), or TypeError/ValueError naming the fix."""
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise TypeError(
            f"[Store] save: expected_version must be a whole number, got {expected_version!r}. "
            "Pass the version you loaded, or 0 for a session that has never been saved."
        )
    if expected_version < 0:
        raise ValueError(
            f"[Store] save: expected_version must be 0 or more, got {expected_version}. "
            "Pass the version you loaded, or 0 for a session that has never been saved."
        )
    return expected_version


def stamped(session: Session | dict[str, Any], expected_version: int) -> tuple[Session, str]:
    """The session as it will be saved (version `expected_version + 1`) and its blob text."""
    saved = stamp(session, expected_version)
    return saved, saved.to_json_text()


def stamp(session: Session | dict[str, Any], expected_version: int) -> Session:
    """The session as it will be saved, for stores that hand the driver the blob object.

    Like upstream `toBlob`, the returned session is a new object that shares nested values
    with the argument; only the session keys are written.
    """
    if isinstance(session, dict):
        session = Session.from_json(session)
    elif not isinstance(session, Session):
        raise TypeError(f"[Store] save: expected a Session, got {type(session).__name__}. "
                        "Pass the session a turn returned (r.session).")
    if session.v != 4 or not isinstance(session.id, str):
        raise InvalidSessionError(session.id if isinstance(session.id, str) else None,
                                  f"v is {session.v!r}, expected 4")
    return session.model_copy(update={"version": check_expected_version(expected_version) + 1})


def stored_version(value: Any) -> int | None:
    """A version read back after a failed write: a whole number, else None (as upstream's
    `typeof version === "number"`; bool is an int in Python and is refused)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_blob(raw: Any, session_id: str) -> Session:
    """Upstream `readBlob`: text (Memory, SQLite, Redis, Mongo) is parsed, an object (a Prisma
    `Json`, OpenSearch's `_source.blob`) is taken as it is; both go through the same check,
    so a bad record raises `InvalidSessionError` naming `session_id`."""
    if raw is MISSING:
        raise InvalidSessionError(session_id, "expected an object, got missing")
    if isinstance(raw, str | bytes | bytearray):
        return Session.from_json_text(raw, session_id)
    return Session.from_json(raw, session_id)
