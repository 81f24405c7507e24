"""A fake OpenSearch cluster for tests: a real HTTP server on 127.0.0.1 that speaks the REST wire
format of the endpoints OpenSearchStore uses, so the real `opensearch-py` client (sync and async)
talks to it as to a cluster.

- `HEAD /{index}` (indices.exists), `PUT /{index}` (indices.create, mappings kept), `DELETE /{index}`;
- `GET /{index}/_doc/{id}` (get: `found`, `_source`, `_version`, `_seq_no`);
- `PUT|POST /{index}/_doc/{id}` (index; `op_type=create` answers 409
  `version_conflict_engine_exception` over an existing document), `PUT|POST /{index}/_create/{id}`;
- `POST /{index}/_update/{id}` with a painless `script` (see below); a missing document is 404
  `document_missing_exception`, an unchanged one `"result": "noop"`;
- `DELETE /{index}/_doc/{id}`.

Writes to a missing index create it with no mappings (`action.auto_create_index`'s default).
Documents are kept in memory under one lock, so each request is atomic, as a shard applies one
operation on a document at a time; clients in other processes reach it over HTTP, so the
contract's process race runs against it. Every request is recorded (`server.requests`: method,
path, query parameters, parsed body), and `fail_next(status, type)` answers the next request
matching a method with an error, as the cluster would.

Scripts are run by a small interpreter of the painless the store needs, not by matching its
text: `if (<a> != | == <b>) { ... } else { ... }` and the assignments `ctx._source.<field> = <v>`
and `ctx.op = '<op>'`, where values are `ctx._source.<field>`, `params.<name>`, quoted strings
and numbers. A script outside that grammar is refused with 400 `script_exception` (compile
error), as a cluster refuses a script that does not compile.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.providers.fake_http import LocalServer

# -- painless, the part the store uses -----------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<string>'[^']*'|\"[^\"]*\")|(?P<number>-?\d+)|(?P<op>!=|==|=)"
                    r"|(?P<punct>[(){};])|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*))")


class ScriptError(Exception):
    """The script does not compile in this small painless."""


def _tokens(source: str) -> list[tuple[str, str]]:
    tokens, at = [], 0
    source = source.rstrip()
    while at < len(source):
        match = _TOKEN.match(source, at)
        if match is None or match.end() == at:
            raise ScriptError(f"unexpected character at {at}: {source[at:at + 12]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        at = match.end()
    return tokens


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokens(source)
        self.at = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, text: str | None = None, kind: str | None = None) -> str:
        token = self.peek()
        if token is None or (text is not None and token[1] != text) or (kind is not None and token[0] != kind):
            raise ScriptError(f"expected {text or kind}, got {token[1] if token else 'the end'}")
        self.at += 1
        return token[1]

    def statements(self, until: str | None = None) -> list[Any]:
        body = []
        while (token := self.peek()) is not None and token[1] != until:
            if token[1] == ";":
                self.at += 1
                continue
            body.append(self.statement())
        return body

    def statement(self) -> Any:
        if self.peek() == ("name", "if"):
            self.take("if")
            self.take("(")
            left = self.value()
            op = self.take(kind="op")
            if op not in ("!=", "=="):
                raise ScriptError(f"expected a comparison, got {op}")
            right = self.value()
            self.take(")")
            then = self.block()
            otherwise = []
            if self.peek() == ("name", "else"):
                self.take("else")
                otherwise = self.block()
            return ("if", left, op, right, then, otherwise)
        target = self.take(kind="name")
        if target != "ctx.op" and not re.fullmatch(r"ctx\._source\.[A-Za-z_]\w*", target):
            raise ScriptError(f"cannot assign to {target}")
        self.take("=")
        return ("set", target, self.value())

    def block(self) -> list[Any]:
        self.take("{")
        body = self.statements(until="}")
        self.take("}")
        return body

    def value(self) -> Any:
        kind, text = self.peek() or ("", "")
        if kind == "string":
            self.at += 1
            return ("literal", text[1:-1])
        if kind == "number":
            self.at += 1
            return ("literal", int(text))
        name = self.take(kind="name")
        if not re.fullmatch(r"(ctx\._source|params)\.[A-Za-z_]\w*", name):
            raise ScriptError(f"unknown value {name}")
        return ("read", name)


def compile_script(source: str) -> list[Any]:
    parser = _Parser(source)
    program = parser.statements()
    if parser.peek() is not None:
        raise ScriptError(f"unexpected {parser.peek()[1]}")
    return program


def run_script(program: list[Any], ctx: dict[str, Any], params: dict[str, Any]) -> None:
    def read(node: Any) -> Any:
        if node[0] == "literal":
            return node[1]
        scope, name = node[1].rsplit(".", 1)
        return (ctx["_source"] if scope == "ctx._source" else params).get(name)

    for node in program:
        if node[0] == "if":
            _, left, op, right, then, otherwise = node
            equal = read(left) == read(right)
            run_script(then if equal == (op == "==") else otherwise, ctx, params)
        elif node[1] == "ctx.op":
            ctx["op"] = read(node[2])
        else:
            ctx["_source"][node[1].rsplit(".", 1)[1]] = read(node[2])


# -- the server -------------------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    params: dict[str, str]
    body: Any


@dataclass
class Doc:
    source: dict[str, Any]
    version: int
    seq_no: int


@dataclass
class Index:
    mappings: dict[str, Any] | None
    docs: dict[str, Doc] = field(default_factory=dict)


def _error(status: int, kind: str, reason: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    cause = {"type": kind, "reason": reason, **extra}
    return status, {"error": {"root_cause": [cause], **cause}, "status": status}


class FakeOpenSearch(LocalServer):
    thread_name = "fake-opensearch"

    def __init__(self) -> None:
        self.indices: dict[str, Index] = {}
        self.requests: list[Recorded] = []
        self.failures: list[tuple[str | None, int, str]] = []
        self.lock = threading.Lock()
        self._seq = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                fake._serve(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815 - http.server's naming

        super().__init__(Handler)
        self.url = self.base_url

    # -- scripting and reading -----------------------------------------------------------------

    def fail_next(self, status: int, kind: str, method: str | None = None) -> Self:
        """Answer the next request (with `method`, if given) with this error."""
        with self.lock:
            self.failures.append((method, status, kind))
        return self

    def source(self, index: str, doc_id: str) -> dict[str, Any] | None:
        with self.lock:
            doc = self.indices.get(index, Index(None)).docs.get(doc_id)
            return None if doc is None else json.loads(json.dumps(doc.source))

    def calls(self, method: str | None = None, kind: str | None = None) -> list[Recorded]:
        """Recorded requests, by method and by endpoint (`_doc`, `_update`, `_create`, or "index")."""
        with self.lock:
            found = list(self.requests)
        return [r for r in found if (method is None or r.method == method)
                and (kind is None or _endpoint(r.path) == kind)]

    # -- serving ------------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        method = handler.command
        with self.lock:
            self.requests.append(Recorded(method, url.path, params, body))
            failure = next((f for f in self.failures if f[0] in (None, method)), None)
            if failure is not None:
                self.failures.remove(failure)
                status, payload = _error(failure[1], failure[2], "injected by the test")
            else:
                status, payload = self._answer(method, [unquote(p) for p in url.path.strip("/").split("/")],
                                               params, body)
        data = b"" if payload is None else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=UTF-8")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if method != "HEAD":
            handler.wfile.write(data)

    def _answer(self, method: str, parts: list[str], params: dict[str, str], body: Any) -> tuple[int, Any]:
        if parts == [""]:
            return 200, {"name": "fake", "cluster_name": "fake", "version": {"distribution": "opensearch",
                                                                          "number": "2.19.0"}}
        name = parts[0]
        if len(parts) == 1:
            return self._index_admin(method, name, body)
        if len(parts) != 3 or parts[1] not in ("_doc", "_update", "_create"):
            return _error(400, "illegal_argument_exception", f"no handler for {method} /{'/'.join(parts)}")
        endpoint, doc_id = parts[1], parts[2]
        index = self.indices.get(name)
        if method == "GET" and endpoint == "_doc":
            return self._get(name, index, doc_id)
        if method == "DELETE" and endpoint == "_doc":
            doc = None if index is None else index.docs.pop(doc_id, None)
            return (200 if doc else 404), {"_index": name, "_id": doc_id, "result": "deleted" if doc else "not_found"}
        if method in ("PUT", "POST") and endpoint in ("_doc", "_create"):
            create = endpoint == "_create" or params.get("op_type") == "create"
            return self._write(name, doc_id, body, create)
        if method == "POST" and endpoint == "_update":
            return self._update(name, index, doc_id, body)
        return _error(405, "method_not_allowed", f"{method} not allowed on {endpoint}")

    def _index_admin(self, method: str, name: str, body: Any) -> tuple[int, Any]:
        if method == "HEAD":
            return (200 if name in self.indices else 404), None
        if method == "PUT":
            if name in self.indices:
                return _error(400, "resource_already_exists_exception", f"index [{name}] already exists",
                              index=name)
            self.indices[name] = Index(mappings=(body or {}).get("mappings"))
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        if method == "DELETE":
            if self.indices.pop(name, None) is None:
                return _error(404, "index_not_found_exception", f"no such index [{name}]", index=name)
            return 200, {"acknowledged": True}
        return _error(405, "method_not_allowed", f"{method} not allowed on an index")

    def _get(self, name: str, index: Index | None, doc_id: str) -> tuple[int, Any]:
        if index is None:
            return _error(404, "index_not_found_exception", f"no such index [{name}]", index=name)
        doc = index.docs.get(doc_id)
        if doc is None:
            return 404, {"_index": name, "_id": doc_id, "found": False}
        return 200, {"_index": name, "_id": doc_id, "_version": doc.version, "_seq_no": doc.seq_no,
                     "_primary_term": 1, "found": True, "_source": doc.source}

    def _result(self, name: str, doc_id: str, doc: Doc, result: str) -> dict[str, Any]:
        return {"_index": name, "_id": doc_id, "_version": doc.version, "result": result,
                "_shards": {"total": 2, "successful": 1, "failed": 0}, "_seq_no": doc.seq_no, "_primary_term": 1}

    def _write(self, name: str, doc_id: str, body: Any, create: bool) -> tuple[int, Any]:
        if not isinstance(body, dict):
            return _error(400, "parse_exception", "request body is required")
        index = self.indices.setdefault(name, Index(mappings=None))  # auto-created, as by default
        current = index.docs.get(doc_id)
        if current is not None and create:
            return _error(409, "version_conflict_engine_exception",
                          f"[{doc_id}]: version conflict, document already exists (current version "
                          f"[{current.version}])", index=name)
        self._seq += 1
        doc = Doc(source=body, version=1 if current is None else current.version + 1, seq_no=self._seq)
        index.docs[doc_id] = doc
        return (201 if current is None else 200), self._result(name, doc_id, doc,
                                                               "created" if current is None else "updated")

    def _update(self, name: str, index: Index | None, doc_id: str, body: Any) -> tuple[int, Any]:
        if index is None:
            return _error(404, "index_not_found_exception", f"no such index [{name}]", index=name)
        current = index.docs.get(doc_id)
        if current is None:
            return _error(404, "document_missing_exception", f"[{doc_id}]: document missing", index=name)
        script = (body or {}).get("script")
        if not isinstance(script, dict) or script.get("lang", "painless") != "painless":
            return _error(400, "illegal_argument_exception", "the fake runs painless scripts only")
        try:
            program = compile_script(script.get("source", ""))
        except ScriptError as exc:
            return _error(400, "script_exception", f"compile error: {exc}", lang="painless")
        ctx = {"_source": json.loads(json.dumps(current.source)), "op": "index"}
        run_script(program, ctx, script.get("params") or {})
        if ctx["op"] in ("noop", "none"):
            return 200, self._result(name, doc_id, current, "noop")
        if ctx["op"] != "index":
            return _error(400, "illegal_argument_exception", f"operation type [{ctx['op']}] not allowed")
        self._seq += 1
        doc = Doc(source=ctx["_source"], version=current.version + 1, seq_no=self._seq)
        index.docs[doc_id] = doc
        return 200, self._result(name, doc_id, doc, "updated")


def _endpoint(path: str) -> str:
    parts = path.strip("/").split("/")
    return "index" if len(parts) == 1 else parts[1]
