"""DjangoStore: the Store contract on the app's `Session` model (table `agent_sessions`).

The model and its statements (`falai_django.models.sql`) are imported inside methods, as
`django.contrib.sessions`' db backend resolves its model with `get_model_class()`, so importing
this module needs no settings and no app registry.

Compare-and-swap is one statement either way (`INSERT … ON CONFLICT (id) DO NOTHING` for version
0, `UPDATE … WHERE id = %s AND version = %s` otherwise); a write that touched no row is a
conflict, and one more `SELECT version` learns the stored version for the error. Every save also
refreshes the columns the admin filters on, derived from the blob.
"""

from __future__ import annotations

from typing import Any

from falai_django.engine.session import Session
from falai_django.stores.base import Store, stamped


class DjangoStore(Store):
    """Sessions in the `Session` model. `using` picks a database alias (default: the router's).

    Both statements are written out (not ORM queries): the blob travels as JSON text both ways,
    checked and parsed once by pydantic-core on load, and cast by the server on save.
    """

    _routed: str | None = None  # the router's answer, asked once per store

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    @classmethod
    def get_model_class(cls) -> Any:
        from falai_django.models import Session as SessionRow

        return SessionRow

    def db_alias(self) -> str:
        """The database this store writes to (open the turn's transaction on it)."""
        if self.using:
            return self.using
        if self._routed is None:
            from django.db import router

            self._routed = router.db_for_write(self.get_model_class())
        return self._routed

    def connection(self) -> Any:
        from django.db import connections

        return connections[self.db_alias()]

    def initialize(self) -> None:
        """The table belongs to the app's migrations: run `manage.py migrate`. Nothing to create here."""

    def load(self, session_id: str) -> Session | None:
        from falai_django.models.sql import blob_select, read_blob_text

        connection = self.connection()
        quote = connection.ops.quote_name
        table = quote(self.get_model_class()._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {blob_select(connection)} FROM {table} WHERE {quote('id')} = %s", [session_id])
            row = cursor.fetchone()
        if row is None:
            return None
        return read_blob_text(row[0], session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        from falai_django.models.sql import bound_cursor, conflict, save_statement

        saved, text = stamped(session, expected_version)
        connection = self.connection()
        sql, params = save_statement(connection, self.get_model_class(), saved, text, expected_version)
        with bound_cursor(connection) as cursor:
            cursor.execute(sql, params)
            if cursor.fetchone() is None:
                raise conflict(cursor, connection, self.get_model_class(), saved.id, expected_version)
        return saved
