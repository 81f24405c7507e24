"""DjangoStore: the Store contract on the `Conversation` model (table `agent_sessions`).

The model is resolved inside methods (`get_model_class()`), as `django.contrib.sessions`'
db backend does, so importing this module needs no settings and no app registry.

Compare-and-swap is one statement either way: `INSERT … ON CONFLICT (id) DO NOTHING` for
version 0 and `UPDATE … WHERE id = %s AND version = %s` otherwise; a write that touched no row
is a conflict, and one more `SELECT version` learns the stored version for the error. Every
save also refreshes the columns the admin filters on (asking flow and step, waiting until,
silenced reason, human owner, last user / assistant times), derived from the blob.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..engine.errors import InvalidSessionError, SessionConflictError
from ..engine.session import Session
from .base import Store, stamped

HANDOFF_KEY = "handoff"  # session.metadata["handoff"] = {"reason", "owner", "mode", "at"}


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    from ..engine.jstime import try_parse_iso

    return try_parse_iso(value)


def derived_columns(blob: dict[str, Any]) -> dict[str, Any]:
    """The indexed columns kept in step with the blob on every save."""
    runs = blob.get("runs") or []
    asking = next((r for r in runs if isinstance(r, dict) and r.get("status") == "asking"), None)
    untils = [
        t
        for r in runs
        if isinstance(r, dict) and r.get("status") == "waiting" and isinstance(r.get("waiting"), dict)
        for t in [_parse_time(r["waiting"].get("until"))]
        if t is not None
    ]
    handoff = (blob.get("metadata") or {}).get(HANDOFF_KEY)
    handoff = handoff if isinstance(handoff, dict) else {}
    return {
        "asking_flow": asking.get("flowId") if asking else None,
        "asking_step": asking.get("stepId") if asking else None,
        "waiting_until": min(untils) if untils else None,
        "silenced_reason": (str(handoff["reason"])[:255] if handoff.get("reason") else None),
        "human_owner": (str(handoff["owner"])[:255] if handoff.get("owner") else None),
        "last_user_at": _parse_time(blob.get("lastUserAt")),
        "last_assistant_at": _parse_time(blob.get("lastAssistantAt")),
        "run_count": len(runs),
    }


def read_blob(value: Any, session_id: str) -> Session:
    """A session from the blob column *as the JSONField hands it over* (already decoded): the
    upstream `assertSession` check, nothing decoded twice (a double-encoded blob, a JSON string,
    is refused like every other store refuses it)."""
    return Session.from_json(value, session_id)


def read_blob_text(text: Any, session_id: str) -> Session:
    """A session from the blob column's raw text (raw SQL): JSON-parsed once, then checked."""
    if isinstance(text, str | bytes):
        try:
            text = json.loads(text)
        except ValueError:
            raise InvalidSessionError(session_id, "blob is not valid JSON") from None
    return Session.from_json(text, session_id)


class DjangoStore(Store):
    """Sessions in the `Conversation` model. `using` picks a database alias (default: the router's)."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    @classmethod
    def get_model_class(cls):
        from ..models import Conversation

        return Conversation

    def _db(self) -> str:
        from django.db import router

        return self.using or router.db_for_write(self.get_model_class())

    def initialize(self) -> None:
        """The table belongs to the app's migrations: run `manage.py migrate`. Nothing to create here."""

    def load(self, session_id: str) -> Session | None:
        model = self.get_model_class()
        # A tuple, not the bare blob: a row holding JSON null must fail loudly, not read as "no row".
        row = model.objects.using(self._db()).filter(pk=session_id).values_list("version", "blob").first()
        if row is None:
            return None
        return read_blob(row[1], session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        saved, text = stamped(session, expected_version)
        # The JSON every other store writes (a non-finite number becomes null, as JSON.stringify does).
        blob = json.loads(text)
        if expected_version == 0:
            written = self._insert(session.id, blob)
        else:
            written = self._update(session.id, blob, expected_version)
        if not written:
            model = self.get_model_class()
            actual = model.objects.using(self._db()).filter(pk=session.id).values_list("version", flat=True).first()
            raise SessionConflictError(session.id, expected_version, actual)
        return saved

    # -- the two CAS statements -------------------------------------------------------------

    def _insert(self, session_id: str, blob: dict[str, Any]) -> bool:
        from django.db import connections

        model = self.get_model_class()
        connection = connections[self._db()]
        now = datetime.now(tz=UTC)
        values: dict[str, Any] = {
            "id": session_id,
            "version": blob["version"],
            "blob": blob,
            "created_at": now,
            "updated_at": now,
            **derived_columns(blob),
        }
        columns, params = [], []
        for name, value in values.items():
            field = model._meta.get_field(name)
            columns.append(connection.ops.quote_name(field.column))
            params.append(field.get_db_prep_save(value, connection))
        table = connection.ops.quote_name(model._meta.db_table)
        sql = (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(params))}) "
            f"ON CONFLICT ({connection.ops.quote_name('id')}) DO NOTHING"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount == 1

    def _update(self, session_id: str, blob: dict[str, Any], expected_version: int) -> bool:
        from django.db.models.functions import Now

        model = self.get_model_class()
        updated = (
            model.objects.using(self._db())
            .filter(pk=session_id, version=expected_version)
            .update(version=blob["version"], blob=blob, updated_at=Now(), **derived_columns(blob))
        )
        return updated == 1
