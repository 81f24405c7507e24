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

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator, Mapping
from datetime import UTC, datetime
from typing import Any

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.session import Session

from .base import MISSING, Store, read_blob, stamp, stored_version

__all__ = ["DEFAULT_MODEL", "FIELDS", "PrismaStore", "UNIQUE_VIOLATION"]

DEFAULT_MODEL = "agentSession"
FIELDS = ("id", "version", "blob", "createdAt", "updatedAt")
# Prisma's error code for a unique constraint hit (prisma-client-py's UniqueViolationError.code)
UNIQUE_VIOLATION = "P2002"

# a call the store wants made: (the delegate's method, its where/data arguments)
_Call = tuple[Callable[..., Any], dict[str, Any]]
_Steps = Generator[_Call, Any, Any]


def _method(delegate: Any, *names: str) -> Callable[..., Any] | None:
    for name in names:
        value = getattr(delegate, name, None)
        if callable(value):
            return value
    return None


def _takes_keywords(method: Callable[..., Any]) -> bool:
    """prisma-client-py's methods take `where=`/`data=`; the Node client's take one object."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is p.VAR_KEYWORD or p.name in ("where", "data") for p in parameters)


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


def _refuse_inside_a_loop(result: Awaitable[Any], close: Callable[[], Any] | None, instead: str) -> None:
    """A plain method meeting a coroutine runs it on a private loop, unless a loop already runs
    in this thread: then nothing can wait for it here, so it is closed and refused, loudly."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    if inspect.iscoroutine(result):
        result.close()
    if close is not None:
        close()
    raise TypeError(f"[PrismaStore] this Prisma client is async and an event loop is running: await {instead}.")


async def _awaited(result: Awaitable[Any]) -> Any:
    return await result


def _is_unique_violation(exc: BaseException) -> bool:
    return getattr(exc, "code", None) == UNIQUE_VIOLATION or type(exc).__name__ == "UniqueViolationError"


class PrismaStore(Store):
    """Sessions in the table behind a Prisma model (delegate `agentSession` unless `tables=`)."""

    def __init__(self, prisma: Any, tables: dict[str, str] | None = None,
                 field_mappings: dict[str, dict[str, str]] | None = None) -> None:
        name = (tables or {}).get("sessions", DEFAULT_MODEL)
        delegate = self._delegate(prisma, name)
        create = _method(delegate, "create")
        find_unique = _method(delegate, "find_unique", "findUnique")
        update_many = _method(delegate, "update_many", "updateMany")
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
        self._keywords = {m: _takes_keywords(m) for m in (create, find_unique, update_many)}
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

    def _load_steps(self, session_id: str) -> _Steps:
        row = yield self._find_unique, {"where": {self.fields["id"]: session_id}}
        if row is None:
            return None
        return read_blob(_field(row, self.fields["blob"]), session_id)

    def _save_steps(self, session: Session, expected_version: int) -> _Steps:
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

    def _invoke(self, call: _Call) -> Any:
        method, arguments = call
        return method(**arguments) if self._keywords[method] else method(arguments)

    def _run(self, steps: _Steps) -> Any:
        try:
            call = next(steps)
            while True:
                try:
                    result = self._invoke(call)
                except Exception as exc:  # handed to the steps: a unique violation is a conflict there
                    call = steps.throw(exc)
                    continue
                if inspect.isawaitable(result):  # an async client called through a plain method
                    _refuse_inside_a_loop(result, steps.close, "store.aload(...) and store.asave(...)")
                    return asyncio.run(self._arun(steps, result))
                call = steps.send(result)
        except StopIteration as done:
            return done.value

    async def _arun(self, steps: _Steps, pending: Any = None) -> Any:
        """Drive the steps, awaiting each call; `pending` is a call already made (by `_run`)."""
        try:
            call = next(steps) if pending is None else None
            while True:
                try:
                    if pending is None:
                        pending = self._invoke(call)  # type: ignore[arg-type] - set whenever pending is None
                    result = await pending if inspect.isawaitable(pending) else pending
                except Exception as exc:
                    call = steps.throw(exc)
                    continue
                finally:
                    pending = None
                call = steps.send(result)
        except StopIteration as done:
            return done.value

    # -- the contract ------------------------------------------------------------------------------

    def load(self, session_id: str) -> Session | None:
        return self._run(self._load_steps(session_id))

    async def aload(self, session_id: str) -> Session | None:
        """See load(); awaits an async client's calls, runs a sync one's in place."""
        return await self._arun(self._load_steps(session_id))

    def save(self, session: Session, expected_version: int) -> Session:
        return self._run(self._save_steps(session, expected_version))

    async def asave(self, session: Session, expected_version: int) -> Session:
        """See save()."""
        return await self._arun(self._save_steps(session, expected_version))

    def initialize(self) -> None:
        """Nothing to create: the table comes from the Prisma schema (`prisma db push` or a migration)."""

    async def ainitialize(self) -> None:
        """See initialize()."""

    def _disconnect_method(self) -> Callable[[], Any] | None:
        # prisma-client-py's `disconnect()`; a Node-shaped client's `$disconnect()`
        return _method(self.prisma, "disconnect", "$disconnect")

    def disconnect(self) -> None:
        """Disconnect the client passed in, when it has a disconnect method."""
        method = self._disconnect_method()
        if method is None:
            return
        result = method()
        if inspect.isawaitable(result):
            _refuse_inside_a_loop(result, None, "store.adisconnect()")
            asyncio.run(_awaited(result))

    async def adisconnect(self) -> None:
        """See disconnect(); awaits an async client's."""
        method = self._disconnect_method()
        if method is not None:
            result = method()
            if inspect.isawaitable(result):
                await result

    close = disconnect
    aclose = adisconnect
