"""PrismaStore: one row per session through a generated Prisma client's model delegate.

    store = PrismaStore(prisma=Prisma(), tables={"sessions": "agentsession"},
                        field_mappings={"sessions": {"blob": "data"}})

The model needs five fields (names changeable through `field_mappings`), as upstream's:

    model AgentSession {
      id        String   @id
      version   Int
      blob      Json
      createdAt DateTime @default(now())
      updatedAt DateTime @updatedAt
    }

`tables.sessions` names the delegate on the client: prisma-client-py calls it by the model's
name in lower case (`prisma.agentsession`); upstream's default `"agentSession"` is found
there too. A first save is `create` (the unique violation, code `P2002`, is the conflict);
later saves are `update_many` filtered on `{id, version}`, and a count of 0 is the conflict.
The delegate's methods may have prisma-client-py's names (`find_unique`, `update_many`,
keyword arguments `where=`/`data=`, a count back) or the Node client's (`findUnique`,
`updateMany`, one argument, `{count}` back).

prisma-client-py's default client is async: use `aload`/`asave`/`adisconnect` with it. The
plain methods meeting its coroutines run them on a private event loop when no loop runs in
the thread (and refuse them, with a clear error, when one does); a client generated with
`interface = "sync"` is the one to call from plain code. The store imports `prisma` only to
wrap the blob in its `Json` type for a generated client, and only when one is passed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.session import Session

from .base import MISSING, read_blob, stamp, stored_version
from .steps import SteppedStore, Steps, method_of

__all__ = ["DEFAULT_MODEL", "FIELDS", "PrismaStore", "UNIQUE_VIOLATION"]

DEFAULT_MODEL = "agentSession"
FIELDS = ("id", "version", "blob", "createdAt", "updatedAt")
# Prisma's error code for a unique constraint hit (prisma-client-py's UniqueViolationError.code)
UNIQUE_VIOLATION = "P2002"


def _field(row: Any, name: str) -> Any:
    if isinstance(row, Mapping):
        return row.get(name, MISSING)
    return getattr(row, name, MISSING)  # prisma-client-py returns pydantic models


def _count(result: Any) -> int:
    if isinstance(result, int):
        return result
    if isinstance(result, Mapping):
        return int(result["count"])
    return int(result.count)


def _is_unique_violation(exc: BaseException) -> bool:
    return getattr(exc, "code", None) == UNIQUE_VIOLATION or type(exc).__name__ == "UniqueViolationError"


class PrismaStore(SteppedStore):
    """Sessions in the table behind a Prisma model (delegate `agentSession` unless `tables=`)."""

    label = "PrismaStore"
    client_kind = "Prisma"

    def __init__(self, prisma: Any, tables: dict[str, str] | None = None,
                 field_mappings: dict[str, dict[str, str]] | None = None) -> None:
        name = (tables or {}).get("sessions", DEFAULT_MODEL)
        delegate = self._delegate(prisma, name)
        create = method_of(delegate, "create")
        find_unique = method_of(delegate, "find_unique", "findUnique")
        update_many = method_of(delegate, "update_many", "updateMany")
        if create is None or find_unique is None or update_many is None:
            raise TypeError(
                f'[TypeError] PrismaStore cannot use model "{name}": the client has no such delegate with '
                "create, findUnique and updateMany. Add the model to schema.prisma and run prisma generate, "
                "or pass tables.sessions with its name."
            )
        custom = (field_mappings or {}).get("sessions") or {}
        unknown = sorted(set(custom) - set(FIELDS))
        if unknown:
            raise ValueError(f"[PrismaStore] field_mappings.sessions names unknown fields {unknown}: "
                             f"map any of {', '.join(FIELDS)}.")
        self.prisma = prisma
        self.model_name = name
        self.delegate = delegate
        self.fields: dict[str, str] = {f: custom.get(f, f) for f in FIELDS}
        self._create, self._find_unique, self._update_many = create, find_unique, update_many
        self._learn_calling((create, find_unique, update_many), ("where", "data"))
        self._json = self._json_wrapper(delegate)

    @staticmethod
    def _delegate(prisma: Any, name: Any) -> Any:
        if not isinstance(name, str) or not name:
            return None
        for candidate in dict.fromkeys((name, name.lower())):
            value = prisma.get(candidate) if isinstance(prisma, Mapping) else getattr(prisma, candidate, None)
            if value is not None:
                return value
        return None

    @staticmethod
    def _json_wrapper(delegate: Any) -> Callable[[Any], Any]:
        """A generated prisma-client-py client needs Json values wrapped in `prisma.fields.Json`
        (a plain dict reads as a nested write); any other client gets the object, as upstream."""
        if not type(delegate).__module__.startswith("prisma."):
            return lambda blob: blob
        from prisma.fields import Json

        return Json

    # -- the steps, written once for the plain and the async methods ----------------------------

    def _load_steps(self, session_id: str) -> Steps[Session | None]:
        row = yield self._find_unique, {"where": {self.fields["id"]: session_id}}
        if row is None:
            return None
        return read_blob(_field(row, self.fields["blob"]), session_id)

    def _save_steps(self, session: Session, expected_version: int) -> Steps[Session]:
        saved = stamp(session, expected_version)
        blob = self._json(saved.to_json())
        now = datetime.now(UTC)  # bookkeeping uses the wall clock, not the agent's
        f = self.fields
        if expected_version == 0:
            data = {f["id"]: saved.id, f["version"]: saved.version, f["blob"]: blob,
                    f["createdAt"]: now, f["updatedAt"]: now}
            try:
                yield self._create, {"data": data}
                return saved
            except Exception as exc:
                if not _is_unique_violation(exc):
                    raise
        else:
            result = yield self._update_many, {
                "where": {f["id"]: saved.id, f["version"]: expected_version},
                "data": {f["version"]: saved.version, f["blob"]: blob, f["updatedAt"]: now},  # createdAt stays
            }
            if _count(result) != 0:
                return saved
        row = yield self._find_unique, {"where": {f["id"]: saved.id}}
        actual = None if row is None else stored_version(_field(row, f["version"]))
        raise SessionConflictError(saved.id, expected_version, actual)

    # load/save, their async twins and disconnect are SteppedStore's, driving the steps above.
    # initialize() creates nothing: the table comes from the Prisma schema (`prisma db push` or a
    # migration).

    def _close_method(self) -> Callable[[], Any] | None:
        # prisma-client-py's `disconnect()`; a Node-shaped client's `$disconnect()`
        return method_of(self.prisma, "disconnect", "$disconnect")
