"""PrismaStore specifics on the recording fake (tests/stores/prisma_fake.py): the delegate's
calls and their parameters, P2002 and a count of 0 as conflicts, other errors propagating,
custom model and field names, the construction TypeError, disconnecting, the async client."""

from __future__ import annotations

import asyncio
import json
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest
from prisma.errors import ForeignKeyViolationError
from prisma.fields import Json

from falai_django import PrismaStore
from falai_django.engine.errors import InvalidSessionError, SessionConflictError

from .contract import bare, full_session
from .prisma_fake import FakeAsyncPrisma, FakeDelegate, FakePrisma, FakeTable, NodeShapedPrisma

CONSTRUCTION_ERROR = (
    '[TypeError] PrismaStore cannot use model "{name}": the client has no such delegate with create, '
    "findUnique and updateMany. Add the model to schema.prisma and run prisma generate, or pass "
    "tables.sessions with its name."
)


def test_create_then_update_many_with_upstreams_parameters():
    prisma = FakePrisma()
    store = PrismaStore(prisma=prisma)  # upstream's default "agentSession" finds prisma-client-py's agentsession
    before = datetime.now(UTC)
    v1 = store.save(full_session("s1"), 0)
    name, params = prisma.table.calls[-1]
    assert name == "create"
    data = params["data"]
    assert set(data) == {"id", "version", "blob", "createdAt", "updatedAt"}
    assert (data["id"], data["version"]) == ("s1", 1)
    assert data["blob"] == v1.to_json()  # the object, not text: a Json column
    assert isinstance(data["blob"], dict)
    assert data["createdAt"] == data["updatedAt"] and data["createdAt"] >= before
    assert data["createdAt"].tzinfo is not None
    store.save(v1, 1)
    name, params = prisma.table.calls[-1]
    assert name == "update_many"
    assert params["where"] == {"id": "s1", "version": 1}
    assert set(params["data"]) == {"version", "blob", "updatedAt"}  # createdAt only on create
    assert params["data"]["version"] == 2
    assert params["data"]["blob"]["version"] == 2
    assert [c[0] for c in prisma.table.calls] == ["create", "update_many"]  # no read before a write


def test_p2002_is_a_conflict_read_back_with_find_unique():
    prisma = FakePrisma()
    store = PrismaStore(prisma=prisma, tables={"sessions": "agentsession"})
    store.save(bare("s1"), 0)
    prisma.table.calls.clear()
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 0)
    assert (caught.value.session_id, caught.value.expected_version, caught.value.actual_version) == ("s1", 0, 1)
    assert [c[0] for c in prisma.table.calls] == ["create", "find_unique"]


@pytest.mark.parametrize("client", [FakePrisma, NodeShapedPrisma])  # prisma-client-py's names, the Node client's
def test_a_count_of_zero_is_a_conflict(client):
    prisma = client()
    store = PrismaStore(prisma=prisma)  # "agentSession": as given on the Node client, lower-cased on the Python one
    v1 = store.save(bare("s1"), 0)
    store.save(v1, 1)
    with pytest.raises(SessionConflictError) as caught:
        store.save(v1, 1)
    assert caught.value.actual_version == 2
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("ghost"), 4)
    assert caught.value.actual_version is None
    assert "is gone from the store" in str(caught.value)
    assert [c[0] for c in prisma.table.calls] == ["create", "update_many", "update_many", "find_unique",
                                                  "update_many", "find_unique"]
    store.disconnect()
    assert prisma.disconnected == 1  # disconnect(), or the Node client's $disconnect()


def test_other_errors_propagate_and_write_nothing():
    prisma = FakePrisma()
    store = PrismaStore(prisma=prisma)
    prisma.table.fail_next = ForeignKeyViolationError({"user_facing_error": {"error_code": "P2003"}})
    with pytest.raises(ForeignKeyViolationError):
        store.save(bare("s1"), 0)
    assert [c[0] for c in prisma.table.calls] == ["create"]  # no conflict read for it
    prisma.table.fail_next = ConnectionError("engine down")
    with pytest.raises(ConnectionError):
        store.save(bare("s1"), 0)
    assert store.load("s1") is None


def test_a_code_p2002_on_any_error_class_is_the_conflict():
    # the Node client's PrismaClientKnownRequestError shape: only `code`
    class KnownRequestError(Exception):
        code = "P2002"

    prisma = FakePrisma()
    store = PrismaStore(prisma=prisma)
    store.save(bare("s1"), 0)
    prisma.table.fail_next = KnownRequestError()
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 0)
    assert caught.value.actual_version == 1


def test_custom_model_and_field_names():
    table = FakeTable(id_field="sessionId", version_field="rev")
    prisma = FakePrisma(table, model="conversa")
    mapping = {"id": "sessionId", "version": "rev", "blob": "data", "createdAt": "criadoEm", "updatedAt": "atualizadoEm"}
    store = PrismaStore(prisma=prisma, tables={"sessions": "conversa"}, field_mappings={"sessions": mapping})
    v1 = store.save(bare("s1", nome="Ana"), 0)
    assert set(table.rows["s1"]) == set(mapping.values())
    assert table.rows["s1"]["data"] == v1.to_json()
    store.save(v1, 1)
    assert table.calls[-1] == ("update_many", {
        "where": {"sessionId": "s1", "rev": 1},
        "data": {"rev": 2, "data": table.rows["s1"]["data"], "atualizadoEm": table.rows["s1"]["atualizadoEm"]}})
    assert store.load("s1").data == {"nome": "Ana"}
    with pytest.raises(SessionConflictError) as caught:
        store.save(v1, 1)
    assert caught.value.actual_version == 2  # read from the mapped version field


def test_a_mapping_of_only_the_blob():
    table = FakeTable()
    prisma = FakePrisma(table)
    store = PrismaStore(prisma=prisma, tables={"sessions": "agentsession"}, field_mappings={"sessions": {"blob": "data"}})
    store.save(bare("s1"), 0)
    assert set(table.rows["s1"]) == {"id", "version", "data", "createdAt", "updatedAt"}


def test_unknown_mapped_fields_are_refused():
    with pytest.raises(ValueError, match=r"unknown fields \['payload'\]"):
        PrismaStore(prisma=FakePrisma(), field_mappings={"sessions": {"payload": "blob"}})


class Incomplete:
    def create(self, data: Any) -> None: ...

    def find_unique(self, where: Any) -> None: ...


class NoDelegate:
    agentsession = Incomplete()


@pytest.mark.parametrize("client,name", [(FakePrisma(), "conversas"), (NoDelegate(), "agentsession"),
                                         (object(), "agentSession")])
def test_the_construction_type_error(client, name):
    with pytest.raises(TypeError) as caught:
        PrismaStore(prisma=client, tables={"sessions": name})
    assert str(caught.value) == CONSTRUCTION_ERROR.format(name=name)


def test_rows_may_be_models_with_attributes():
    """prisma-client-py hands back pydantic models, not dicts."""

    class Row:
        def __init__(self, values: dict[str, Any]) -> None:
            self.__dict__.update(values)

    class ModelDelegate(FakeDelegate):
        def find_unique(self, where: dict[str, Any], include: Any = None) -> Any:
            row = self.table.find_unique(where)
            return None if row is None else Row(row)

    table = FakeTable()
    prisma = FakePrisma(table)
    prisma.agentsession = ModelDelegate(table)
    store = PrismaStore(prisma=prisma)
    store.save(bare("s1", nome="Ana"), 0)
    assert store.load("s1").data == {"nome": "Ana"}
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 0)
    assert caught.value.actual_version == 1


def test_a_generated_client_gets_the_blob_wrapped_in_prismas_json():
    class GeneratedDelegate(FakeDelegate):  # what `prisma generate` writes lives in prisma.actions
        __module__ = "prisma.actions"

    table = FakeTable()
    prisma = FakePrisma(table)
    prisma.agentsession = GeneratedDelegate(table)
    store = PrismaStore(prisma=prisma)
    v1 = store.save(bare("s1"), 0)
    sent = table.calls[-1][1]["data"]["blob"]
    assert isinstance(sent, Json)
    assert sent.data == v1.to_json()


def test_a_row_written_by_upstream_is_read_and_ours_is_what_upstream_reads(legacy_blobs_dir):
    blob = json.loads((legacy_blobs_dir / "v4.json").read_text())
    table = FakeTable()
    # upstream's create: the blob object in a Json column, JS Dates
    table.rows[blob["id"]] = {"id": blob["id"], "version": blob["version"], "blob": blob,
                              "createdAt": datetime(2026, 9, 20, tzinfo=UTC), "updatedAt": datetime(2026, 9, 20, tzinfo=UTC)}
    store = PrismaStore(prisma=FakePrisma(table))
    loaded = store.load(blob["id"])
    assert loaded.to_json() == blob
    store.save(loaded, blob["version"])
    row = table.rows[blob["id"]]
    # upstream's load is readBlob(row.blob): the object, checked
    assert row["blob"] == dict(blob, version=blob["version"] + 1)
    assert row["version"] == blob["version"] + 1
    assert row["createdAt"] == datetime(2026, 9, 20, tzinfo=UTC)


@pytest.mark.parametrize("value,reason", [(None, "expected an object, got null"),
                                          ({"currentFlow": "triagem"}, "v is missing, expected 4"),
                                          ("{oops", "blob is not valid JSON")])
def test_a_bad_row_is_invalid(value, reason):
    table = FakeTable()
    table.rows["s1"] = {"id": "s1", "version": 1, "blob": value}
    with pytest.raises(InvalidSessionError, match=reason):
        PrismaStore(prisma=FakePrisma(table)).load("s1")


def test_a_model_without_the_blob_field_is_invalid():
    table = FakeTable()
    table.rows["s1"] = {"id": "s1", "version": 1}
    with pytest.raises(InvalidSessionError, match="expected an object, got missing"):
        PrismaStore(prisma=FakePrisma(table)).load("s1")


def test_the_async_client_through_aload_and_asave():
    prisma = FakeAsyncPrisma()
    store = PrismaStore(prisma=prisma)

    async def scenario() -> None:
        v1 = await store.asave(bare("s1", nome="Ana"), 0)
        with pytest.raises(SessionConflictError) as caught:
            await store.asave(bare("s1"), 0)
        assert caught.value.actual_version == 1
        assert (await store.asave(v1, 1)).version == 2
        assert (await store.aload("s1")).version == 2
        await store.adisconnect()

    asyncio.run(scenario())
    assert prisma.disconnected == 1


def test_the_plain_methods_run_an_async_client_outside_a_loop():
    prisma = FakeAsyncPrisma()
    store = PrismaStore(prisma=prisma)
    v1 = store.save(bare("s1", nome="Ana"), 0)
    with pytest.raises(SessionConflictError) as caught:  # the P2002 raised by a coroutine
        store.save(bare("s1"), 0)
    assert caught.value.actual_version == 1
    assert store.save(v1, 1).version == 2
    assert store.load("s1").data == {"nome": "Ana"}
    assert [c[0] for c in prisma.table.calls] == ["create", "create", "find_unique", "update_many", "find_unique"]
    store.disconnect()
    assert prisma.disconnected == 1


def test_inside_a_running_loop_the_plain_methods_refuse_an_async_client_clearly():
    prisma = FakeAsyncPrisma()
    store = PrismaStore(prisma=prisma)

    async def scenario() -> None:
        with pytest.raises(TypeError, match=r"is async and an event loop is running: await store\.aload"):
            store.save(bare("s1"), 0)
        with pytest.raises(TypeError, match="await store.aload"):
            store.load("s1")
        with pytest.raises(TypeError, match=r"await store\.adisconnect\(\)"):
            store.disconnect()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited" left behind
        asyncio.run(scenario())
    assert prisma.disconnected == 0
    assert prisma.table.rows == {}


def test_disconnect_and_close():
    prisma = FakePrisma()
    store = PrismaStore(prisma=prisma)
    store.disconnect()
    store.close()
    assert prisma.disconnected == 2

    class Bare:
        agentsession = FakeDelegate(FakeTable())

    PrismaStore(prisma=Bare()).disconnect()  # a client without one: nothing to do, no error
