"""A fake Gemini (Generative Language REST) server for tests and the stream bench.

It speaks the wire format the real `google-genai` client uses against
`https://generativelanguage.googleapis.com`:

- `POST /{version}/models/{model}:streamGenerateContent?alt=sse`: server-sent events, one
  `data: {...}\\r\\n\\r\\n` per scripted chunk, sent with chunked transfer encoding and
  flushed one by one;
- `POST /{version}/models/{model}:generateContent`: the chunks merged into one JSON body.

Each request takes the next scripted `Reply` (FIFO; a dry script asks the optional
`responder(recorded) -> Reply`, else answers 500) and is
recorded (`server.requests`: method, path, model, headers, parsed body). Replies can be a
normal answer, an HTTP error with a JSON body and headers, an in-band error chunk, a
connection dropped before or during the body, or a delay (to trip the client's timeout).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    chunks: list[dict[str, Any]] = field(default_factory=list)  # GenerateContentResponse dicts
    body: dict[str, Any] | None = None  # the JSON body of an error status
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before the status line
    chunk_delay_s: float = 0.0  # between chunks
    drop_after: int | None = None  # close the socket after this many chunks (0: before any byte)


@dataclass
class Recorded:
    method: str
    path: str
    model: str
    stream: bool
    headers: dict[str, str]
    body: dict[str, Any]


def text_chunks(text: str, pieces: int, *, finish: str = "STOP", usage: dict[str, int] | None = None,
                model_version: str | None = None) -> list[dict[str, Any]]:
    """`text` split into `pieces` streamed responses; the last carries finishReason and usage."""
    size = max(1, -(-len(text) // pieces))
    parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    chunks: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        chunk: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": [{"text": part}]},
                                                 "index": 0}]}
        if index == len(parts) - 1:
            chunk["candidates"][0]["finishReason"] = finish
            if usage is not None:
                chunk["usageMetadata"] = usage
        if model_version:
            chunk["modelVersion"] = model_version
        chunks.append(chunk)
    return chunks


def function_call_chunk(name: str, args: dict[str, Any], *, call_id: str | None = None,
                        thought_signature: str | None = None, text: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": text})
    call: dict[str, Any] = {"name": name, "args": args}
    if call_id:
        call["id"] = call_id
    part: dict[str, Any] = {"functionCall": call}
    if thought_signature:
        part["thoughtSignature"] = thought_signature
    parts.append(part)
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}]}


def error_body(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


def _merge(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    merged: dict[str, Any] = {}
    for chunk in chunks:
        for candidate in chunk.get("candidates", []):
            parts.extend(candidate.get("content", {}).get("parts", []))
            if "finishReason" in candidate:
                merged["finishReason"] = candidate["finishReason"]
        for key in ("usageMetadata", "modelVersion"):
            if key in chunk:
                merged[key] = chunk[key]
    body: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}
    if "finishReason" in merged:
        body["candidates"][0]["finishReason"] = merged.pop("finishReason")
    body.update(merged)
    return body


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out or hung up mid-reply is expected here, not news."""


class FakeGemini:
    """Start with `FakeGemini()`; use `.base_url`; script with `.push(Reply(...))`; `.close()`."""

    def __init__(self, responder: Callable[[Recorded], Reply] | None = None) -> None:
        self.responder = responder  # answers when the script is empty (else: 500)
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.first_chunk_at: list[float] = []  # perf_counter() as each stream's first chunk is written
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # each SSE chunk leaves at once, as from a real front end

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                fake._serve(self)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-gemini", daemon=True)
        self._thread.start()

    # -- scripting ----------------------------------------------------------------------

    def push(self, *replies: Reply) -> FakeGemini:
        with self._lock:
            self.replies.extend(replies)
        return self

    def stream_text(self, text: str, pieces: int = 1, **kwargs: Any) -> FakeGemini:
        return self.push(Reply(chunks=text_chunks(text, pieces, **kwargs)))

    def error(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> FakeGemini:
        return self.push(Reply(status=status, body=body, headers=headers or {}))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeGemini:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- serving ------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        path = handler.path
        route = path.split("?", 1)[0]
        model, _, method = route.rsplit("/", 1)[-1].partition(":")
        recorded = Recorded(
            method=method, path=path, model=model, stream=method == "streamGenerateContent",
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=json.loads(raw) if raw else {},
        )
        with self._lock:
            self.requests.append(recorded)
            scripted = self.replies.popleft() if self.replies else None
        if scripted is not None:
            reply = scripted
        elif self.responder is not None:
            reply = self.responder(recorded)
        else:
            reply = Reply(status=500, body=error_body(500, "INTERNAL", "fake gemini: no scripted reply left"))
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.drop_after == 0:
            self._drop(handler)
            return
        if reply.status != 200:
            payload = json.dumps(reply.body or {}).encode()
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json; charset=UTF-8")
            handler.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(payload)
            return
        if method == "generateContent":
            payload = json.dumps(_merge(reply.chunks)).encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json; charset=UTF-8")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.flush()
        for index, chunk in enumerate(reply.chunks):
            if reply.drop_after is not None and index >= reply.drop_after:
                self._drop(handler)
                return
            if index and reply.chunk_delay_s:
                time.sleep(reply.chunk_delay_s)
            event = b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n"
            frame = b"%x\r\n%s\r\n" % (len(event), event)
            if index == 0:
                self.first_chunk_at.append(time.perf_counter())
            handler.wfile.write(frame)
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    @staticmethod
    def _drop(handler: BaseHTTPRequestHandler) -> None:
        handler.wfile.flush()
        try:
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        handler.close_connection = True
