"""A recording in-memory Prisma client, with prisma-client-py's method and error names.

`FakePrisma().agentsession` is a model delegate like the generated one: `create(data=...)`,
`find_unique(where=...)`, `update_many(where=..., data=...)` (the count back), and a unique
hit raises prisma-client-py's own `prisma.errors.UniqueViolationError` (code `P2002`). Each
call holds one lock, as each is one statement on the database, and is recorded for
assertions. `FakeAsyncPrisma` is the same with coroutines (prisma-client-py's default
interface); `NodeShapedPrisma` has the Node client's names (`findUnique`, `updateMany`, one
argument, `{"count": n}` back, `$disconnect`) as upstream's own fake does.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
from typing import Any

from prisma.errors import UniqueViolationError


def unique_violation(target: str) -> UniqueViolationError:
    """What prisma-client-py raises for P2002 (built from the query engine's error payload)."""
    return UniqueViolationError({"user_facing_error": {
        "error_code": "P2002", "message": f"Unique constraint failed on the fields: (`{target}`)",
        "meta": {"target": [target]}}})


class FakeTable:
    """The rows behind one model, keyed by the id field; versions compared as the database would."""

    def __init__(self, id_field: str = "id", version_field: str = "version") -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.id_field = id_field
        self.version_field = version_field
        self.fail_next: BaseException | None = None

    def _matches(self, row: dict[str, Any], where: dict[str, Any]) -> bool:
        return all(row.get(k) == v for k, v in where.items())

    def create(self, data: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.calls.append(("create", {"data": data}))
            if self.fail_next is not None:
                error, self.fail_next = self.fail_next, None
                raise error
            key = data[self.id_field]
            if key in self.rows:
                raise unique_violation(self.id_field)
            # the driver serialises the Json value: the row keeps a copy, not the caller's object
            self.rows[key] = copy.deepcopy(data)
            return copy.deepcopy(self.rows[key])

    def find_unique(self, where: dict[str, Any]) -> dict[str, Any] | None:
        with self.lock:
            self.calls.append(("find_unique", {"where": where}))
            row = self.rows.get(where[self.id_field])
            return None if row is None else copy.deepcopy(row)

    def update_many(self, where: dict[str, Any], data: dict[str, Any]) -> int:
        with self.lock:
            self.calls.append(("update_many", {"where": where, "data": data}))
            hits = [row for row in self.rows.values() if self._matches(row, where)]
            for row in hits:
                row.update(copy.deepcopy(data))
            return len(hits)


class SQLiteTable(FakeTable):
    """The same table kept in an SQLite file, as Prisma's SQLite provider keeps it: the Json
    column as text, the primary key raising P2002, `update_many` one conditional UPDATE. Being a
    file, it is shared by processes, so the contract's four-process race runs on Prisma too."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self.conn.execute('CREATE TABLE IF NOT EXISTS "AgentSession" (id TEXT PRIMARY KEY, version INTEGER NOT NULL, '
                          'blob TEXT NOT NULL, "createdAt" TEXT NOT NULL, "updatedAt" TEXT NOT NULL)')

    def create(self, data: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.calls.append(("create", {"data": data}))
            try:
                self.conn.execute('INSERT INTO "AgentSession" VALUES (?, ?, ?, ?, ?)',
                                  (data["id"], data["version"], json.dumps(data["blob"]),
                                   data["createdAt"].isoformat(), data["updatedAt"].isoformat()))
            except sqlite3.IntegrityError:
                raise unique_violation("id") from None
            return dict(data)

    def find_unique(self, where: dict[str, Any]) -> dict[str, Any] | None:
        with self.lock:
            self.calls.append(("find_unique", {"where": where}))
            row = self.conn.execute('SELECT id, version, blob, "createdAt", "updatedAt" FROM "AgentSession" '
                                    "WHERE id = ?", (where["id"],)).fetchone()
        if row is None:
            return None
        try:
            blob = json.loads(row[2])
        except ValueError:
            blob = row[2]  # what a String column would hand back
        return {"id": row[0], "version": row[1], "blob": blob, "createdAt": row[3], "updatedAt": row[4]}

    def update_many(self, where: dict[str, Any], data: dict[str, Any]) -> int:
        with self.lock:
            self.calls.append(("update_many", {"where": where, "data": data}))
            return self.conn.execute('UPDATE "AgentSession" SET version = ?, blob = ?, "updatedAt" = ? '
                                     "WHERE id = ? AND version = ?",
                                     (data["version"], json.dumps(data["blob"]), data["updatedAt"].isoformat(),
                                      where["id"], where["version"])).rowcount

    def put(self, session_id: str, stored: Any) -> None:
        """A raw row (the contract's seam); `stored` goes in as the column's text."""
        with self.lock:
            text = stored if isinstance(stored, str) else json.dumps(stored)
            self.conn.execute('INSERT OR REPLACE INTO "AgentSession" VALUES (?, 1, ?, \'x\', \'x\')',
                              (session_id, text))

    def remove(self, session_id: str) -> None:
        with self.lock:
            self.conn.execute('DELETE FROM "AgentSession" WHERE id = ?', (session_id,))


class FakeDelegate:
    """prisma-client-py's sync delegate."""

    def __init__(self, table: FakeTable) -> None:
        self.table = table

    def create(self, data: dict[str, Any], include: Any = None) -> dict[str, Any]:
        return self.table.create(data)

    def find_unique(self, where: dict[str, Any], include: Any = None) -> dict[str, Any] | None:
        return self.table.find_unique(where)

    def update_many(self, data: dict[str, Any], where: dict[str, Any]) -> int:
        return self.table.update_many(where, data)


class FakeAsyncDelegate:
    """prisma-client-py's default (async) delegate."""

    def __init__(self, table: FakeTable) -> None:
        self.table = table

    async def create(self, data: dict[str, Any], include: Any = None) -> dict[str, Any]:
        return self.table.create(data)

    async def find_unique(self, where: dict[str, Any], include: Any = None) -> dict[str, Any] | None:
        return self.table.find_unique(where)

    async def update_many(self, data: dict[str, Any], where: dict[str, Any]) -> int:
        return self.table.update_many(where, data)


class FakePrisma:
    """A sync client whose model is `model` (prisma-client-py: the model name in lower case)."""

    delegate_class: type = FakeDelegate

    def __init__(self, table: FakeTable | None = None, model: str = "agentsession") -> None:
        self.table = table or FakeTable()
        setattr(self, model, self.delegate_class(self.table))
        self.disconnected = 0

    def disconnect(self) -> None:
        self.disconnected += 1


class FakeAsyncPrisma(FakePrisma):
    delegate_class = FakeAsyncDelegate

    async def disconnect(self) -> None:  # type: ignore[override] - the async client's is a coroutine
        self.disconnected += 1


class NodeShapedDelegate:
    """The Node client's delegate: one argument object, `{count}` back."""

    def __init__(self, table: FakeTable) -> None:
        self.table = table

    def create(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.table.create(args["data"])

    def findUnique(self, args: dict[str, Any]) -> dict[str, Any] | None:  # noqa: N802 - the Node name
        return self.table.find_unique(args["where"])

    def updateMany(self, args: dict[str, Any]) -> dict[str, int]:  # noqa: N802
        return {"count": self.table.update_many(args["where"], args["data"])}


class NodeShapedPrisma:
    def __init__(self, table: FakeTable | None = None, model: str = "agentSession") -> None:
        self.table = table or FakeTable()
        setattr(self, model, NodeShapedDelegate(self.table))
        self.disconnected = 0
        setattr(self, "$disconnect", self._disconnect)

    def _disconnect(self) -> None:
        self.disconnected += 1
