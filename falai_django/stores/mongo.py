"""MongoStore: one document per session, saved by one conditional write.

    store = MongoStore(client=pymongo.MongoClient(url), database_name="falai",
                       collections={"sessions": "agent_sessions"})

Each session is the document `{_id: <session id>, version, blob, createdAt, updatedAt}`,
the shape upstream's MongoStore writes, so either library reads the other's documents. The
blob is JSON *text*, not a sub-document: claim keys carry channel message ids, which hold
dots, and older servers refuse dots in field names.

A first save is `insert_one` (the duplicate-key error, code 11000, is the conflict); later
saves are `update_one({_id, version: n}, {$set: ...})`, and no match is the conflict. Both
are single-document writes, atomic on the server. The store imports no driver: `client` is a
`pymongo.MongoClient` (or anything with its `get_database(...).get_collection(...)` or
`client[db][collection]`, such as `mongomock.MongoClient` in tests).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.session import Session

from .base import DEFAULT_TABLE, MISSING, Store, read_blob, stamped, stored_version

__all__ = ["DUPLICATE_KEY", "MongoStore"]

# the server's error code for a unique index hit (pymongo's DuplicateKeyError carries it)
DUPLICATE_KEY = 11000


def _child(parent: Any, name: str, *methods: str) -> Any:
    """pymongo's `get_database`/`get_collection` (the Node driver's `db`/`collection`), else
    `parent[name]`."""
    for method in methods:
        get = getattr(parent, method, None)
        if callable(get):
            return get(name)
    return parent[name]


class MongoStore(Store):
    """Sessions in a MongoDB collection (`agent_sessions` unless `collections={"sessions": ...}`)."""

    def __init__(self, client: Any, database_name: str, collections: dict[str, str] | None = None) -> None:
        if not isinstance(database_name, str) or not database_name:
            raise ValueError(
                f"[MongoStore] database_name must be the database's name, got {database_name!r}.")
        name = (collections or {}).get("sessions", DEFAULT_TABLE)
        if not isinstance(name, str) or not name or "$" in name or "\0" in name:
            raise ValueError(f"[MongoStore] collections.sessions {name!r} is not a collection name: "
                             'use text without "$", e.g. "ana_sessions".')
        self.client = client
        self.database_name = database_name
        self.collection_name = name
        # resolved once, as upstream does (client.db(name).collection(name) in the Node driver)
        database = _child(client, database_name, "get_database", "db")
        self.collection = _child(database, name, "get_collection", "collection")

    def load(self, session_id: str) -> Session | None:
        doc = self.collection.find_one({"_id": session_id})
        if doc is None:
            return None
        return read_blob(doc.get("blob", MISSING), session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        saved, text = stamped(session, expected_version)
        now = datetime.now(UTC)  # bookkeeping uses the wall clock, not the agent's
        if expected_version == 0:
            try:
                self.collection.insert_one({"_id": saved.id, "version": saved.version, "blob": text,
                                            "createdAt": now, "updatedAt": now})
            except Exception as exc:
                if getattr(exc, "code", None) != DUPLICATE_KEY:
                    raise
                raise SessionConflictError(saved.id, 0, self._stored_version(saved.id)) from None
            return saved
        result = self.collection.update_one(
            {"_id": saved.id, "version": expected_version},
            {"$set": {"version": saved.version, "blob": text, "updatedAt": now}},  # createdAt stays
        )
        if result.matched_count == 0:
            raise SessionConflictError(saved.id, expected_version, self._stored_version(saved.id))
        return saved

    def _stored_version(self, session_id: str) -> int | None:
        doc = self.collection.find_one({"_id": session_id}, {"version": 1})
        return None if doc is None else stored_version(doc.get("version"))

    def initialize(self) -> None:
        """Nothing to create: the collection appears on its first insert, and `_id` is unique."""

    def disconnect(self) -> None:
        """Close the client passed in (upstream's `disconnect()`)."""
        self.client.close()

    close = disconnect
