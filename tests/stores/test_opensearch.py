"""OpenSearchStore specifics: the index and document upstream writes, the REST calls, the conflict
signals, the two Python clients and a Node-shaped one.

The real `opensearch-py` client talks to the fake cluster (tests/stores/fake_opensearch.py: an
HTTP server on 127.0.0.1 speaking the wire format, running the store's painless script), so
every assertion on a call is an assertion on what went over the wire. The shared contract runs
in tests/stores/test_contract.py, on a real cluster too when `FALAI_TEST_OPENSEARCH_URL` is set.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from typing import Any

import opensearchpy
import pytest

from falai_django import OpenSearchStore
from falai_django.engine.errors import InvalidSessionError, SessionConflictError
from falai_django.engine.jstime import is_iso
from falai_django.engine.session import Session
from falai_django.stores.opensearch import CAS_SCRIPT, MAPPINGS

from .contract import bare, full_session
from .fake_opensearch import FakeOpenSearch

INDEX = "agent_sessions"


@pytest.fixture
def fake():
    with FakeOpenSearch() as server:
        yield server


@pytest.fixture
def client(fake):
    c = opensearchpy.OpenSearch(hosts=[fake.url])
    yield c
    c.close()


def store_on(client: Any, **options: Any) -> OpenSearchStore:
    store = OpenSearchStore(client, **options)
    store.initialize()
    return store


def test_a_real_cluster_runs_the_contract_when_named():
    url = os.environ.get("FALAI_TEST_OPENSEARCH_URL")
    if not url:
        pytest.skip("FALAI_TEST_OPENSEARCH_URL is not set: the store contract ran against the fake cluster "
                    "only; set it (e.g. http://127.0.0.1:9200) to run it on a real OpenSearch too")
    info = opensearchpy.OpenSearch(hosts=[url]).info()
    assert info["version"]["number"]


# -- the index -----------------------------------------------------------------------------------


def test_initialize_creates_the_index_with_upstreams_mappings_only_when_missing(fake, client):
    store = OpenSearchStore(client)
    store.initialize()
    assert [(r.method, r.path) for r in fake.requests] == [("HEAD", "/agent_sessions"), ("PUT", "/agent_sessions")]
    assert fake.requests[1].body == {"mappings": MAPPINGS}
    assert fake.indices[INDEX].mappings["properties"] == {
        "id": {"type": "keyword"}, "version": {"type": "integer"},
        "blob": {"type": "object", "enabled": False},  # stored, never indexed
        "createdAt": {"type": "date"}, "updatedAt": {"type": "date"},
    }
    store.initialize()  # exists now: looked at, never created or altered again
    assert [(r.method, r.path) for r in fake.requests[2:]] == [("HEAD", "/agent_sessions")]


def test_an_existing_index_is_left_as_it_is(fake, client):
    client.indices.create(index="conversas", body={"mappings": {"properties": {"id": {"type": "keyword"}}}})
    fake.requests.clear()
    OpenSearchStore(client, indices={"sessions": "conversas"}).initialize()
    assert [(r.method, r.path) for r in fake.requests] == [("HEAD", "/conversas")]
    assert fake.indices["conversas"].mappings == {"properties": {"id": {"type": "keyword"}}}


def test_two_processes_initializing_at_once_both_succeed(fake, client):
    """Both see the index missing; the second create answers 400 resource_already_exists."""
    client.indices.exists = lambda **kwargs: False  # it looked before the other one created it
    late = OpenSearchStore(client)
    OpenSearchStore(opensearchpy.OpenSearch(hosts=[fake.url])).initialize()
    late.initialize()
    assert [(r.method, r.path) for r in fake.requests] == [("HEAD", "/agent_sessions"), ("PUT", "/agent_sessions"),
                                                          ("PUT", "/agent_sessions")]
    assert fake.indices[INDEX].mappings == MAPPINGS
    fake.fail_next(400, "mapper_parsing_exception", method="PUT")  # any other refusal still propagates
    with pytest.raises(opensearchpy.RequestError) as caught:
        OpenSearchStore(client, indices={"sessions": "outro"}).initialize()
    assert caught.value.error == "mapper_parsing_exception"


def test_auto_create_indices_false_creates_nothing(fake, client):
    store = OpenSearchStore(client=client, auto_create_indices=False)
    store.initialize()
    asyncio.run(store.ainitialize())
    assert fake.requests == []
    # the first write then lands in an index the cluster makes itself, without the mappings
    store.save(bare("s1"), 0)
    assert fake.indices[INDEX].mappings is None


# -- the document and the writes --------------------------------------------------------------------


def test_the_document_is_upstreams_shape(fake, client):
    store = store_on(client)
    v1 = store.save(full_session("s1"), 0)
    source = fake.source(INDEX, "s1")
    assert set(source) == {"id", "version", "blob", "createdAt", "updatedAt"}
    assert source["id"] == "s1" and source["version"] == 1
    assert isinstance(source["blob"], dict)  # an object, not text
    assert source["blob"] == v1.to_json()
    assert is_iso(source["createdAt"]) and source["createdAt"].endswith("Z") and len(source["createdAt"]) == 24
    assert source["createdAt"] == source["updatedAt"]


def test_insert_is_op_type_create_with_refresh_passed_through(fake, client):
    store = store_on(client, refresh="wait_for")
    fake.requests.clear()
    store.save(bare("s1", nome="Ana"), 0)
    (write,) = fake.requests
    assert (write.method, write.path) == ("PUT", "/agent_sessions/_doc/s1")
    assert write.params == {"op_type": "create", "refresh": "wait_for"}
    assert write.body["blob"]["data"] == {"nome": "Ana"}


@pytest.mark.parametrize("refresh, wire", [(False, "false"), (True, "true"), ("wait_for", "wait_for")])
def test_every_write_carries_the_refresh_policy(fake, client, refresh, wire):
    store = store_on(client, refresh=refresh)
    v1 = store.save(bare("s1"), 0)
    store.save(v1, 1)
    writes = [r for r in fake.requests if r.method in ("PUT", "POST") and r.path != "/agent_sessions"]
    assert [r.params["refresh"] for r in writes] == [wire, wire]


def test_update_is_one_painless_script_comparing_the_version(fake, client):
    store = store_on(client)
    v1 = store.save(bare("s1", nome="Ana"), 0)
    created = fake.source(INDEX, "s1")["createdAt"]
    fake.requests.clear()
    v2 = store.save(v1.model_copy(update={"data": {"nome": "Bia"}}), 1)
    (update,) = fake.requests
    assert (update.method, update.path) == ("POST", "/agent_sessions/_update/s1")
    assert update.params == {"retry_on_conflict": "3", "refresh": "false"}
    script = update.body["script"]
    assert script["lang"] == "painless" and script["source"] == CAS_SCRIPT
    assert "ctx._source.version != params.expected" in script["source"] and "'noop'" in script["source"]
    assert script["params"]["expected"] == 1 and script["params"]["version"] == 2
    assert script["params"]["blob"] == v2.to_json()
    source = fake.source(INDEX, "s1")
    assert source["version"] == 2 and source["blob"]["data"] == {"nome": "Bia"}
    assert source["createdAt"] == created  # the update never touches createdAt
    assert is_iso(source["updatedAt"]) and source["updatedAt"] >= created


def test_ids_with_slashes_and_colons_are_sent_escaped_and_stored_as_given(fake, client):
    store = store_on(client)
    sid = "whatsapp:5511999/ação"
    store.save(bare(sid), 0)
    assert fake.requests[-1].path == "/agent_sessions/_doc/whatsapp%3A5511999%2Fa%C3%A7%C3%A3o"
    assert fake.source(INDEX, sid)["id"] == sid
    assert store.load(sid).id == sid


# -- conflicts ------------------------------------------------------------------------------------


def test_a_noop_update_is_a_conflict_and_the_version_is_read_back(fake, client):
    store = store_on(client)
    v1 = store.save(bare("s1"), 0)
    store.save(v1, 1)
    fake.requests.clear()
    with pytest.raises(SessionConflictError) as caught:
        store.save(v1, 1)
    assert (caught.value.expected_version, caught.value.actual_version) == (1, 2)
    assert [(r.method, r.path) for r in fake.requests] == [("POST", "/agent_sessions/_update/s1"),
                                                          ("GET", "/agent_sessions/_doc/s1")]
    assert fake.indices[INDEX].docs["s1"].version == 2  # the noop wrote nothing


def test_a_409_on_insert_is_a_conflict_with_the_stored_version(fake, client):
    store = store_on(client)
    store.save(bare("s1", nome="Ana"), 0)
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1", nome="Bia"), 0)
    assert (caught.value.session_id, caught.value.expected_version, caught.value.actual_version) == ("s1", 0, 1)
    assert fake.source(INDEX, "s1")["blob"]["data"] == {"nome": "Ana"}


def test_a_404_on_update_is_a_conflict_with_no_version(fake, client):
    store = store_on(client)
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 4)
    assert (caught.value.expected_version, caught.value.actual_version) == (4, None)
    assert store.load("s1") is None


def test_a_409_on_update_retries_ran_out_is_a_conflict(fake, client):
    store = store_on(client)
    store.save(bare("s1"), 0)
    fake.fail_next(409, "version_conflict_engine_exception", method="POST")
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 1)
    assert (caught.value.expected_version, caught.value.actual_version) == (1, 1)


@pytest.mark.parametrize("method, expected", [("PUT", 0), ("POST", 1)])
def test_other_errors_propagate(fake, client, method, expected):
    store = store_on(client)
    store.save(bare("s1"), 0)
    fake.fail_next(500, "internal_server_error", method=method)
    with pytest.raises(opensearchpy.TransportError) as caught:
        store.save(bare("s1"), expected)
    assert caught.value.status_code == 500
    assert not isinstance(caught.value, SessionConflictError)


def test_a_failing_load_propagates_and_a_404_is_none(fake, client):
    store = OpenSearchStore(client)
    assert store.load("s1") is None  # no index at all yet: 404, so None
    fake.fail_next(500, "exception", method="GET")  # (a 503 the client itself would retry)
    with pytest.raises(opensearchpy.TransportError) as caught:
        store.load("s1")
    assert caught.value.status_code == 500


def test_a_lost_connection_propagates():
    with FakeOpenSearch() as gone:
        url = gone.url  # nothing listens there once it is closed
    store = OpenSearchStore(opensearchpy.OpenSearch(hosts=[url], max_retries=0, timeout=2))
    for call in (lambda: store.save(bare("s1"), 0), lambda: store.save(bare("s1"), 1), lambda: store.load("s1")):
        with pytest.raises(opensearchpy.ConnectionError):
            call()


# -- reading what upstream wrote, and the other way round --------------------------------------------


def test_a_document_written_by_upstream_is_read(fake, client):
    """What `@falai/agent`'s OpenSearchStore indexes: the blob object with JS ISO times."""
    store = store_on(client)
    blob = dict(full_session("u1").to_json(), version=3)
    client.index(index=INDEX, id="u1", body={"id": "u1", "version": 3, "blob": blob,
                                             "createdAt": "2026-09-20T10:00:00.000Z",
                                             "updatedAt": "2026-09-21T10:00:00.000Z"})
    loaded = store.load("u1")
    assert loaded.version == 3
    assert loaded.to_json() == blob
    saved = store.save(loaded, 3)  # and the update goes on from upstream's version
    assert saved.version == 4 and fake.source(INDEX, "u1")["createdAt"] == "2026-09-20T10:00:00.000Z"


def test_what_we_write_is_what_upstream_reads(fake, client):
    """Upstream reads `_source.blob` as an object and `_source.version` as a number."""
    store = store_on(client)
    store.save(full_session("s1"), 0)
    source = client.get(index=INDEX, id="s1")["_source"]
    assert isinstance(source["version"], int)
    assert Session.from_json(source["blob"], "s1").to_json() == dict(full_session("s1").to_json(), version=1)


def test_a_3x_document_without_a_blob_is_refused(client):
    store = store_on(client)
    client.index(index=INDEX, id="old", body={"sessionId": "old", "currentFlow": "vendas", "data": {}})
    with pytest.raises(InvalidSessionError) as caught:
        store.load("old")
    assert caught.value.session_id == "old"
    assert "got missing" in str(caught.value)


# -- construction -------------------------------------------------------------------------------------


def test_the_client_comes_first_or_by_name_or_in_one_options_object(fake, client):
    for store in (OpenSearchStore(client, indices={"sessions": "conversas"}, refresh=True),
                  OpenSearchStore(client=client, indices={"sessions": "conversas"}, refresh=True),
                  OpenSearchStore({"client": client, "indices": {"sessions": "conversas"}, "refresh": True}),
                  OpenSearchStore({"client": client, "indices": {"sessions": "conversas"}, "refresh": True,
                                   "autoCreateIndices": True})):
        assert (store.client, store.index_name, store.refresh, store.auto_create_indices) == (
            client, "conversas", True, True)
    defaults = OpenSearchStore(client)
    assert (defaults.index_name, defaults.refresh, defaults.auto_create_indices) == ("agent_sessions", False, True)


@pytest.mark.parametrize("options, error, match", [
    ({"refresh": "yes"}, ValueError, r'refresh must be False, True or "wait_for"'),
    ({"refresh": 1}, ValueError, "refresh must be"),
    ({"indices": {"sessions": "Ana"}}, ValueError, r"indices\.sessions 'Ana' is not an index name"),
    ({"indices": {"sessions": "_x"}}, ValueError, "is not an index name"),
    ({"indices": {"sessions": "a b"}}, ValueError, "is not an index name"),
    ({"auto_create_indices": "no"}, TypeError, "auto_create_indices must be True or False"),
])
def test_bad_options_are_refused(client, options, error, match):
    with pytest.raises(error, match=match):
        OpenSearchStore(client, **options)


def test_something_that_is_not_a_client_is_refused():
    with pytest.raises(TypeError, match=r"client must be an OpenSearch client .* got str"):
        OpenSearchStore("http://127.0.0.1:9200")
    with pytest.raises(TypeError, match=r"unknown options \['index'\]"):
        OpenSearchStore({"client": object(), "index": "x"})


def test_close_closes_the_client(fake):
    closed = []

    class Client(opensearchpy.OpenSearch):
        def close(self) -> None:
            closed.append(True)
            super().close()

    store = OpenSearchStore(Client(hosts=[fake.url]))
    store.close()
    store.disconnect()
    assert closed == [True, True]


# -- the async client --------------------------------------------------------------------------------


def test_the_async_client_through_the_async_methods(fake):
    async def scenario() -> tuple[Any, ...]:
        store = OpenSearchStore(opensearchpy.AsyncOpenSearch(hosts=[fake.url]), refresh=True)
        await store.ainitialize()
        v1 = await store.asave(bare("s1", nome="Ana"), 0)
        v2 = await store.asave(v1, 1)
        with pytest.raises(SessionConflictError) as caught:
            await store.asave(v1, 1)
        loaded = await store.aload("s1")
        missing = await store.aload("nope")
        await store.aclose()
        return v2.version, caught.value.actual_version, loaded.data, missing

    assert asyncio.run(scenario()) == (2, 2, {"nome": "Ana"}, None)
    assert fake.indices[INDEX].mappings == MAPPINGS
    assert [r.params.get("refresh") for r in fake.requests if r.method in ("POST",)] == ["true", "true"]


def test_the_plain_methods_refuse_the_async_client_by_name_and_send_nothing(fake):
    client = opensearchpy.AsyncOpenSearch(hosts=[fake.url])
    store = OpenSearchStore(client)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine left unawaited would warn here
        with pytest.raises(TypeError, match=r"this OpenSearch client is async: await store\.aload\(\.\.\.\) and "
                                            r"store\.asave\(\.\.\.\), or pass opensearchpy\.OpenSearch"):
            store.save(bare("s1"), 0)
        with pytest.raises(TypeError, match=r"await store\.ainitialize\(\)"):
            store.initialize()
        with pytest.raises(TypeError, match=r"await store\.adisconnect\(\)"):
            store.close()
    assert fake.requests == []
    asyncio.run(client.close())


# -- a Node-shaped client (upstream's fake: one argument object, `{body}` back, `statusCode`) -----


class StatusError(Exception):
    """The Node client's ResponseError: `statusCode`, and `meta.statusCode` in newer versions."""

    def __init__(self, status: int, in_meta: bool = False) -> None:
        super().__init__(f"status {status}")
        if in_meta:
            self.meta = {"statusCode": status}
        else:
            self.statusCode = status  # noqa: N815 - the Node client's name


class NodeShapedClient:
    """Records each call; keeps documents; answers as @opensearch-project/opensearch does."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.docs: dict[str, dict[str, Any]] = {}
        self.made = False
        outer = self

        class Indices:
            def exists(self, params):
                outer.calls.append(("indices.exists", params))
                return {"body": outer.made, "statusCode": 200 if outer.made else 404}

            def create(self, params):
                outer.calls.append(("indices.create", params))
                outer.made = True
                return {"body": {"acknowledged": True}}

        self.indices = Indices()

    def get(self, params):
        self.calls.append(("get", params))
        if params["id"] not in self.docs:
            raise StatusError(404, in_meta=True)
        return {"body": {"_source": self.docs[params["id"]]}}

    def index(self, params):
        self.calls.append(("index", params))
        if params["id"] in self.docs:
            raise StatusError(409)
        self.docs[params["id"]] = params["body"]
        return {"body": {"result": "created"}}

    def update(self, params):
        self.calls.append(("update", params))
        doc = self.docs.get(params["id"])
        if doc is None:
            raise StatusError(404)
        p = params["body"]["script"]["params"]
        if doc["version"] != p["expected"]:
            return {"body": {"result": "noop"}}
        doc.update(version=p["version"], blob=p["blob"], updatedAt=p["updatedAt"])
        return {"body": {"result": "updated"}}


def test_a_node_shaped_client_gets_one_object_and_answers_in_body():
    client = NodeShapedClient()
    store = OpenSearchStore(client, indices={"sessions": "conversas"}, refresh="wait_for")
    store.initialize()
    assert [name for name, _ in client.calls] == ["indices.exists", "indices.create"]
    assert client.calls[1][1] == {"index": "conversas", "body": {"mappings": MAPPINGS}}
    v1 = store.save(bare("s1", nome="Ana"), 0)
    name, params = client.calls[-1]
    assert name == "index" and params["op_type"] == "create" and params["refresh"] == "wait_for"
    assert params["body"]["blob"] == v1.to_json()
    assert store.load("s1").data == {"nome": "Ana"}
    store.save(v1, 1)
    name, params = client.calls[-1]
    assert name == "update" and params["retry_on_conflict"] == 3 and params["refresh"] == "wait_for"
    with pytest.raises(SessionConflictError) as noop:  # result "noop"
        store.save(v1, 1)
    with pytest.raises(SessionConflictError) as exists:  # statusCode 409
        store.save(bare("s1"), 0)
    with pytest.raises(SessionConflictError) as missing:  # statusCode 404
        store.save(bare("s2"), 1)
    assert [(e.value.expected_version, e.value.actual_version) for e in (noop, exists, missing)] == [
        (1, 2), (0, 2), (1, None)]
    assert store.load("s2") is None
    store.initialize()  # the index exists now: not created twice
    assert [name for name, _ in client.calls].count("indices.create") == 1
    store.close()  # no close method on this client: nothing to do, no error


# -- the fake runs the script it is given ------------------------------------------------------------


def test_the_fake_runs_the_script_and_refuses_one_outside_its_grammar(fake, client):
    """So a wrong script in the store could not pass the contract: the fake evaluates it."""
    client.index(index=INDEX, id="d", body={"version": 1})
    swapped = CAS_SCRIPT.replace("!=", "==")
    body = {"script": {"lang": "painless", "source": swapped,
                       "params": {"expected": 1, "version": 2, "blob": {}, "updatedAt": "x"}}}
    assert client.update(index=INDEX, id="d", body=body)["result"] == "noop"
    body["script"]["params"]["expected"] = 7
    assert client.update(index=INDEX, id="d", body=body)["result"] == "updated"
    assert fake.source(INDEX, "d")["version"] == 2
    with pytest.raises(opensearchpy.RequestError) as caught:
        client.update(index=INDEX, id="d", body={"script": {"source": "ctx._source.version++"}})
    assert caught.value.status_code == 400 and caught.value.error == "script_exception"
