"""MemoryStore: rows in a dict, as JSON text, with the real version and shape checks."""

from __future__ import annotations

import threading

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.session import Session

from .base import Store, stamped

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """Sessions in process memory; forgotten when the process stops.

    Rows are kept as JSON text, so a load goes through the same check a database row does
    and hands back an independent session.
    """

    def __init__(self) -> None:
        self._rows: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()

    def load(self, session_id: str) -> Session | None:
        row = self._rows.get(session_id)
        if row is None:
            return None
        return Session.from_json_text(row[1], session_id)

    async def aload(self, session_id: str) -> Session | None:
        """See load()."""
        return self.load(session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        saved, text = stamped(session, expected_version)
        with self._lock:  # check and write as one step
            row = self._rows.get(saved.id)
            if expected_version == 0:
                if row is not None:
                    raise SessionConflictError(saved.id, expected_version, row[0])
            elif row is None or row[0] != expected_version:
                raise SessionConflictError(saved.id, expected_version, None if row is None else row[0])
            self._rows[saved.id] = (saved.version, text)
        return saved

    async def asave(self, session: Session, expected_version: int) -> Session:
        """See save()."""
        return self.save(session, expected_version)

    def initialize(self) -> None:
        """Nothing to create."""

    async def ainitialize(self) -> None:
        """See initialize()."""

    def clear(self) -> None:
        """Drop every row."""
        with self._lock:
            self._rows.clear()

    def delete(self, session_id: str) -> None:
        """Drop one row (tests use it to make a row vanish)."""
        with self._lock:
            self._rows.pop(session_id, None)

    def raw(self, session_id: str) -> str | None:
        """The stored JSON text of a row, or None."""
        row = self._rows.get(session_id)
        return None if row is None else row[1]

    def put_raw(self, session_id: str, text: str, version: int = 1) -> None:
        """Store arbitrary text under an id (tests use it for corrupt or 3.x rows)."""
        with self._lock:
            self._rows[session_id] = (version, text)

    def __len__(self) -> int:
        return len(self._rows)
