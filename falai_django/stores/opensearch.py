"""OpenSearchStore: one document per session, the compare-and-swap done on the shard by a script.

    store = OpenSearchStore(client=opensearchpy.OpenSearch(hosts=[url]),
                            indices={"sessions": "agent_sessions"}, auto_create_indices=True,
                            refresh=False)
    store.initialize()   # creates the index with its mappings when it is missing

Each session is the document `{id, version, blob, createdAt, updatedAt}` under the session id,
the shape upstream's OpenSearchStore writes, so either library reads the other's documents. The
blob is an *object* in a field mapped `enabled: false`: stored and returned, never indexed, so
claim keys holding dots (channel message ids) never turn into mapped fields.

A first save is `index(op_type="create")`, and the 409 is the conflict. A later save is one
`update` whose painless script compares the stored `version` with the expected one and turns
the write into a `noop` when they differ: check and write happen together on the shard. A
`noop`, a 404 (no such document) or a 409 (the retries on the shard's own version ran out) is a
conflict; one `get` then reads the stored version. `refresh` (False, True or "wait_for") goes
with every write.

The store imports no driver: `client` is an `opensearchpy.OpenSearch` (its methods take
arguments by name and return the body), an `opensearchpy.AsyncOpenSearch` (use `aload`,
`asave`, `ainitialize`, `aclose`: its plain twins refuse it, since its connections belong to
one event loop), or a Node-shaped client whose methods take one object and
answer `{body: ...}`. Errors are recognised by their HTTP status (`status_code`, or the Node
client's `statusCode`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.jstime import to_iso, utc_now
from falai_django.engine.session import Session

from .base import DEFAULT_TABLE, MISSING, read_blob, stamp, stored_version
from .steps import SteppedStore, Steps, method_of

__all__ = ["CAS_SCRIPT", "MAPPINGS", "OpenSearchStore"]

# Written only while the stored version is the expected one; otherwise the update is a noop.
CAS_SCRIPT = (
    "if (ctx._source.version != params.expected) { ctx.op = 'noop' } "
    "else { ctx._source.version = params.version; ctx._source.blob = params.blob; "
    "ctx._source.updatedAt = params.updatedAt }"
)

MAPPINGS: dict[str, Any] = {
    "properties": {
        "id": {"type": "keyword"},
        "version": {"type": "integer"},
        "blob": {"type": "object", "enabled": False},  # stored, not indexed
        "createdAt": {"type": "date"},
        "updatedAt": {"type": "date"},
    }
}

REFRESH_POLICIES = (False, True, "wait_for")

# OpenSearch's rules for index names: lower case, none of these characters, no leading - _ +
_BAD_INDEX_CHARACTERS = re.compile(r'[\\/*?"<>| ,#:A-Z]')
_ARGUMENT_NAMES = ("index", "id", "body")


def _status(error: BaseException) -> int | None:
    """The HTTP status an error carries: opensearch-py's `status_code`, the Node client's
    `statusCode` (or `meta.statusCode`); None for a connection failure (opensearch-py's
    ConnectionError says "N/A")."""
    meta = getattr(error, "meta", None)
    for holder in (error, meta):
        for name in ("status_code", "statusCode", "status"):
            value = holder.get(name) if isinstance(holder, Mapping) else getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _already_exists(error: BaseException) -> bool:
    """The 400 a cluster answers when another process created the index first."""
    return _status(error) == 400 and "resource_already_exists_exception" in f"{getattr(error, 'error', '')} {error}"


def _body(response: Any) -> Any:
    """opensearch-py returns the body; the Node client wraps it as `{body, statusCode, ...}`."""
    if isinstance(response, Mapping) and "body" in response and "_index" not in response:
        return response["body"]
    return response


def _source(response: Any) -> Any:
    body = _body(response)
    if not isinstance(body, Mapping) or body.get("found") is False:
        return None  # a fake or proxy answering "not found" without the 404
    return body.get("_source", MISSING)


def _check_index_name(name: Any) -> str:
    if (not isinstance(name, str) or not name or name in (".", "..") or name[0] in "-_+"
            or _BAD_INDEX_CHARACTERS.search(name) or len(name.encode()) > 255):
        raise ValueError(
            f"[OpenSearchStore] indices.sessions {name!r} is not an index name: use lower-case letters, "
            'digits, "-" and "_" (not first), e.g. "ana_sessions".')
    return name


class OpenSearchStore(SteppedStore):
    """Sessions in an OpenSearch index (`agent_sessions` unless `indices={"sessions": ...}`)."""

    label = "OpenSearchStore"
    client_kind = "OpenSearch"
    # AsyncOpenSearch's aiohttp session belongs to the loop it first ran in: no private loops
    sync_hint = "opensearchpy.OpenSearch(...)"

    def __init__(self, client: Any, indices: Mapping[str, str] | None = None, auto_create_indices: bool = True,
                 refresh: bool | str = False) -> None:
        if isinstance(client, Mapping) and "client" in client:
            # upstream's other constructor: one options object holding the client
            options = dict(client)
            client = options.pop("client")
            indices = options.pop("indices", indices)
            auto_create_indices = options.pop("auto_create_indices", options.pop("autoCreateIndices",
                                                                                auto_create_indices))
            refresh = options.pop("refresh", refresh)
            if options:
                raise TypeError(f"[OpenSearchStore] unknown options {sorted(options)}: "
                                "give client, indices, auto_create_indices and refresh.")
        get = method_of(client, "get")
        index = method_of(client, "index")
        update = method_of(client, "update")
        admin = getattr(client, "indices", None)
        exists = method_of(admin, "exists")
        create = method_of(admin, "create")
        if get is None or index is None or update is None or exists is None or create is None:
            raise TypeError(
                f"[OpenSearchStore] client must be an OpenSearch client (get, index, update, indices.exists, "
                f"indices.create), got {type(client).__name__}. Pass opensearchpy.OpenSearch(hosts=[...]).")
        if refresh not in REFRESH_POLICIES or not isinstance(refresh, bool | str):
            raise ValueError(f"[OpenSearchStore] refresh must be False, True or \"wait_for\", got {refresh!r}.")
        if not isinstance(auto_create_indices, bool):
            raise TypeError(f"[OpenSearchStore] auto_create_indices must be True or False, "
                            f"got {auto_create_indices!r}.")
        self.client = client
        self.index_name = _check_index_name((indices or {}).get("sessions", DEFAULT_TABLE))
        self.auto_create_indices = auto_create_indices
        self.refresh: bool | str = refresh
        self._get, self._index, self._update = get, index, update
        self._exists, self._create = exists, create
        self._learn_calling((get, index, update, exists, create), _ARGUMENT_NAMES)

    # -- the steps, written once for the plain and the async methods (SteppedStore drives them) --

    def _initialize_steps(self) -> Steps[None]:
        """Create the index with its mappings when it is missing (never alters one that exists)."""
        if not self.auto_create_indices:
            return
        exists = yield self._exists, {"index": self.index_name}
        if _body(exists):
            return
        try:
            yield self._create, {"index": self.index_name, "body": {"mappings": MAPPINGS}}
        except Exception as exc:
            if not _already_exists(exc):  # another process won the race to create it: nothing missing
                raise

    def _source_steps(self, session_id: str) -> Steps[Any]:
        """The stored document's `_source` (MISSING when it has none), or None when there is no
        document (a 404: no document, or no index yet)."""
        try:
            response = yield self._get, {"index": self.index_name, "id": session_id}
        except Exception as exc:
            if _status(exc) == 404:
                return None
            raise
        return _source(response)

    def _load_steps(self, session_id: str) -> Steps[Session | None]:
        source = yield from self._source_steps(session_id)
        if source is None:
            return None
        blob = source.get("blob", MISSING) if isinstance(source, Mapping) else MISSING
        return read_blob(blob, session_id)

    def _save_steps(self, session: Session, expected_version: int) -> Steps[Session]:
        saved = stamp(session, expected_version)
        blob = saved.to_json()
        now = to_iso(utc_now())  # bookkeeping uses the wall clock, not the agent's
        if expected_version == 0:
            try:
                yield self._index, {
                    "index": self.index_name, "id": saved.id, "op_type": "create", "refresh": self.refresh,
                    "body": {"id": saved.id, "version": saved.version, "blob": blob, "createdAt": now,
                             "updatedAt": now},
                }
                return saved
            except Exception as exc:
                if _status(exc) != 409:
                    raise
        else:
            try:
                response = yield self._update, {
                    "index": self.index_name, "id": saved.id, "retry_on_conflict": 3, "refresh": self.refresh,
                    "body": {"script": {"lang": "painless", "source": CAS_SCRIPT, "params": {
                        "expected": expected_version, "version": saved.version, "blob": blob, "updatedAt": now,
                    }}},
                }
                body = _body(response)
                if not (isinstance(body, Mapping) and body.get("result") == "noop"):
                    return saved
            except Exception as exc:
                if _status(exc) not in (404, 409):  # no document / the shard's retries ran out
                    raise
        source = yield from self._source_steps(saved.id)  # the version it holds now
        actual = stored_version(source.get("version")) if isinstance(source, Mapping) else None
        raise SessionConflictError(saved.id, expected_version, actual)

    def _close_method(self) -> Callable[[], Any] | None:
        # upstream leaves closing to the host; opensearch-py's clients close their connections here
        return method_of(self.client, "close")
