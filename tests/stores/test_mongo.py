"""MongoStore specifics: the document upstream writes, the driver calls, the conflict signals.

On `mongomock` (pymongo's API in memory) with a recorder around the collection; the contract
runs on a real server too when `FALAI_TEST_MONGO_URL` is set (tests/stores/test_contract.py).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

import mongomock
import pytest
from pymongo.errors import DuplicateKeyError, WriteError

from falai_django import MongoStore
from falai_django.engine.errors import InvalidSessionError, SessionConflictError
from falai_django.engine.session import Session

from .contract import bare, full_session


class Recorder:
    """Records each call on the wrapped collection (name, args) and forwards it."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.collection, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args))
            return method(*args, **kwargs)

        return call


@pytest.fixture
def client():
    return mongomock.MongoClient()


def recorded(client: Any, **options: Any) -> tuple[MongoStore, Recorder]:
    store = MongoStore(client=client, database_name="falai", **options)
    recorder = Recorder(store.collection)
    store.collection = recorder
    return store, recorder


def test_the_real_server_runs_the_contract_when_named():
    if not os.environ.get("FALAI_TEST_MONGO_URL"):
        pytest.skip("FALAI_TEST_MONGO_URL is not set: the store contract ran on mongomock only; "
                    "set it (e.g. mongodb://127.0.0.1:27017) to run it on a real MongoDB server too")
    import pymongo

    client = pymongo.MongoClient(os.environ["FALAI_TEST_MONGO_URL"], serverSelectionTimeoutMS=5000)
    assert client.admin.command("ping")["ok"] == 1.0
    client.close()


def test_the_document_is_upstreams_shape(client):
    store = MongoStore(client=client, database_name="falai")
    before = datetime.now(UTC).replace(microsecond=0)
    v1 = store.save(full_session("s1"), 0)
    doc = client["falai"]["agent_sessions"].find_one({"_id": "s1"})
    assert set(doc) == {"_id", "version", "blob", "createdAt", "updatedAt"}
    assert doc["version"] == 1
    assert isinstance(doc["blob"], str)  # text, not a sub-document (claim keys hold dots)
    assert doc["blob"] == v1.to_json_text()
    assert json.loads(doc["blob"]) == dict(full_session("s1").to_json(), version=1)
    assert isinstance(doc["createdAt"], datetime) and doc["createdAt"] == doc["updatedAt"]
    assert doc["createdAt"].replace(tzinfo=UTC) >= before
    store.save(v1, 1)
    doc2 = client["falai"]["agent_sessions"].find_one({"_id": "s1"})
    assert doc2["version"] == 2
    assert doc2["createdAt"] == doc["createdAt"]  # the update never touches createdAt
    assert json.loads(doc2["blob"])["version"] == 2


def test_insert_and_update_are_the_calls_upstream_makes(client):
    store, recorder = recorded(client)
    v1 = store.save(bare("s1", nome="Ana"), 0)
    name, (doc,) = recorder.calls[-1]
    assert name == "insert_one"
    assert set(doc) == {"_id", "version", "blob", "createdAt", "updatedAt"}
    assert (doc["_id"], doc["version"]) == ("s1", 1)
    store.save(v1, 1)
    name, (where, update) = recorder.calls[-1]
    assert name == "update_one"
    assert where == {"_id": "s1", "version": 1}
    assert set(update) == {"$set"}
    assert set(update["$set"]) == {"version", "blob", "updatedAt"}
    assert update["$set"]["version"] == 2
    # a save is one write: no read before it
    assert [c[0] for c in recorder.calls] == ["insert_one", "update_one"]


def test_a_duplicate_key_is_a_conflict_read_back_once(client):
    store, recorder = recorded(client)
    store.save(bare("s1"), 0)
    recorder.calls.clear()
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 0)
    assert (caught.value.expected_version, caught.value.actual_version) == (0, 1)
    assert [c[0] for c in recorder.calls] == ["insert_one", "find_one"]


def test_no_match_on_update_is_a_conflict(client):
    store, recorder = recorded(client)
    v1 = store.save(bare("s1"), 0)
    store.save(v1, 1)
    recorder.calls.clear()
    with pytest.raises(SessionConflictError) as caught:
        store.save(v1, 1)
    assert (caught.value.expected_version, caught.value.actual_version) == (1, 2)
    assert [c[0] for c in recorder.calls] == ["update_one", "find_one"]


class FailingCollection:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def insert_one(self, doc: dict[str, Any]) -> None:
        raise self.error

    def find_one(self, *args: Any) -> None:
        raise AssertionError("a driver error other than a duplicate key is not a conflict: no read back")


def test_other_driver_errors_propagate(client):
    store = MongoStore(client=client, database_name="falai")
    store.collection = FailingCollection(WriteError("Document failed validation", code=121))
    with pytest.raises(WriteError, match="Document failed validation"):
        store.save(bare("s1"), 0)
    # the duplicate key is recognised by its code, whatever the exception class
    store.collection = FailingCollection(DuplicateKeyError("E11000 duplicate key", code=11000))
    store.collection.find_one = lambda *args: {"_id": "s1", "version": 7}
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 0)
    assert caught.value.actual_version == 7


def test_custom_collection_and_default_name(client):
    assert MongoStore(client=client, database_name="falai").collection_name == "agent_sessions"
    store = MongoStore(client=client, database_name="crm", collections={"sessions": "conversas"})
    store.save(bare("s1"), 0)
    assert client["crm"].list_collection_names() == ["conversas"]
    assert client["crm"]["conversas"].count_documents({"_id": "s1"}) == 1
    assert client["falai"].list_collection_names() == []


@pytest.mark.parametrize("options,match", [
    ({"database_name": ""}, "database_name"),
    ({"database_name": None}, "database_name"),
    ({"database_name": "falai", "collections": {"sessions": "$cmd"}}, "collections.sessions"),
])
def test_bad_names_are_refused(client, options, match):
    with pytest.raises(ValueError, match=match):
        MongoStore(client=client, **options)


def test_a_document_written_by_upstream_is_read_and_ours_reads_back_there(client, legacy_blobs_dir):
    blob = json.loads((legacy_blobs_dir / "v4.json").read_text())
    # what upstream's insertOne writes: JSON.stringify's compact text, JS Dates
    now = datetime(2026, 9, 20, 10, 0, tzinfo=UTC)
    client["falai"]["agent_sessions"].insert_one({
        "_id": blob["id"], "version": blob["version"], "blob": json.dumps(blob, separators=(",", ":"),
                                                                         ensure_ascii=False),
        "createdAt": now, "updatedAt": now})
    store = MongoStore(client=client, database_name="falai")
    loaded = store.load(blob["id"])
    assert loaded.to_json() == blob
    saved = store.save(loaded, blob["version"])
    doc = client["falai"]["agent_sessions"].find_one({"_id": blob["id"]})
    # upstream's load is JSON.parse(doc.blob) then its check: the same blob, one version on
    assert json.loads(doc["blob"]) == dict(blob, version=blob["version"] + 1) == saved.to_json()
    assert doc["version"] == blob["version"] + 1
    assert doc["createdAt"] == now.replace(tzinfo=None)  # upstream's createdAt kept


def test_a_3x_document_without_a_blob_is_invalid(client):
    client["falai"]["agent_sessions"].insert_one({"_id": "old", "currentFlow": "triagem", "data": {}})
    with pytest.raises(InvalidSessionError, match="expected an object, got missing"):
        MongoStore(client=client, database_name="falai").load("old")


def test_a_non_numeric_stored_version_reads_as_none(client):
    client["falai"]["agent_sessions"].insert_one({"_id": "s1", "version": "3", "blob": "{}"})
    with pytest.raises(SessionConflictError) as caught:
        MongoStore(client=client, database_name="falai").save(bare("s1"), 0)
    assert caught.value.actual_version is None


def test_a_client_with_only_item_access_works():
    """A client reached as client[db][collection] (no get_database), as some wrappers are."""
    backing = mongomock.MongoClient()

    class Client:
        def __getitem__(self, name: str) -> Any:
            return {"falai": {"agent_sessions": backing["falai"]["agent_sessions"]}}[name]

    store = MongoStore(client=Client(), database_name="falai")
    store.save(bare("s1"), 0)
    assert backing["falai"]["agent_sessions"].find_one({"_id": "s1"})["version"] == 1


def test_close_and_disconnect_close_the_client():
    closed = []

    class Client:
        def get_database(self, name: str) -> Any:
            return mongomock.MongoClient().get_database(name)

        def close(self) -> None:
            closed.append(True)

    store = MongoStore(client=Client(), database_name="falai")
    store.disconnect()
    store.close()
    assert closed == [True, True]


def test_loads_are_sessions(client):
    store = MongoStore(client=client, database_name="falai")
    store.save(bare("s1", nome="Zoë"), 0)
    loaded = store.load("s1")
    assert isinstance(loaded, Session)
    assert loaded.data == {"nome": "Zoë"}
    assert store.load("nobody") is None
