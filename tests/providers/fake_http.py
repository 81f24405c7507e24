"""What every fake vendor server shares: a real HTTP server on 127.0.0.1 (an ephemeral port) that
records each request and answers from a script (`push`), else from a `responder`, else with a 500;
error bodies, chunked server-sent events written one flush at a time, and dropped connections.

`FakeGemini` (fake_gemini.py) and `FakeVendor` (fake_vendors.py) subclass it with their wire
format: how a request is recorded, and how a successful reply is written.
"""

from __future__ import annotations

import email.policy
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


def _form_fields(content_type: str, raw: bytes) -> dict[str, Any]:
    message = BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is None:
            fields[name] = data.decode()
        else:
            fields[name] = {"filename": filename, "content_type": part.get_content_type(), "data": data}
    return fields


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out or hung up mid-reply is expected here, not news."""


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 (an ephemeral port) serving `handler_class` until
    `close()`; a context manager. The fake vendors and the fake OpenSearch cluster build on it."""

    thread_name = "fake-http"

    def __init__(self, handler_class: type[BaseHTTPRequestHandler]) -> None:
        self._server = _QuietServer(("127.0.0.1", 0), handler_class)
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=self.thread_name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ScriptedServer(LocalServer):
    """Subclasses set `reply_class` (a dataclass with status, body, headers, delay_s,
    drop_after, ...) and implement `_serve(handler)` with `_take`, `_send_body` and the stream
    helpers."""

    reply_class: type

    def __init__(self, responder: Callable[[Any], Any] | None = None) -> None:
        self.responder = responder  # answers when the script is empty (else: 500)
        self.replies: deque[Any] = deque()
        self.requests: list[Any] = []
        self.first_chunk_at: list[float] = []  # perf_counter() as each stream's marked chunk is written
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # each SSE chunk leaves at once, as from a real front end

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                fake._serve(self)

        super().__init__(Handler)

    # -- scripting ----------------------------------------------------------------------

    def url(self, suffix: str = "") -> str:
        return self.base_url + suffix

    def push(self, *replies: Any) -> Self:
        with self._lock:
            self.replies.extend(replies)
        return self

    def error(self, status: int, body: Any, headers: dict[str, str] | None = None) -> Self:
        return self.push(self.reply_class(status=status, body=body, headers=headers or {}))

    # -- serving ------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    @staticmethod
    def _read_body(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
        """A JSON body parsed; a multipart/form-data one (OpenAI's audio upload) as its fields, each
        file field as `{"filename", "content_type", "data": bytes}`."""
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        content_type = handler.headers.get("Content-Type") or ""
        if content_type.startswith("multipart/form-data"):
            return _form_fields(content_type, raw)
        return json.loads(raw) if raw else {}

    @staticmethod
    def _headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
        return {k.lower(): v for k, v in handler.headers.items()}

    def _take(self, handler: BaseHTTPRequestHandler, recorded: Any, fallback: Callable[[], Any]) -> Any:
        """Record the request and pick its reply (script, responder, `fallback()`); wait its
        delay. None when the reply drops the connection before any byte (done here)."""
        with self._lock:
            self.requests.append(recorded)
            scripted = self.replies.popleft() if self.replies else None
        if scripted is not None:
            reply = scripted
        elif self.responder is not None:
            reply = self.responder(recorded)
        else:
            reply = fallback()
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.drop_after == 0:
            self._drop(handler)
            return None
        return reply

    @staticmethod
    def _send_body(handler: BaseHTTPRequestHandler, status: int, payload: bytes, content_type: str,
                   headers: dict[str, str]) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(payload)

    def _send_stream(self, handler: BaseHTTPRequestHandler, reply: Any, events: list[bytes], mark: int = 0) -> None:
        """A 200 of server-sent events, one chunk a flush: `reply.chunk_delay_s` between them, the
        connection dropped after `reply.drop_after`, the write time of event `mark` recorded."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.flush()
        for index, event in enumerate(events):
            if reply.drop_after is not None and index >= reply.drop_after:
                self._drop(handler)
                return
            if index and reply.chunk_delay_s:
                time.sleep(reply.chunk_delay_s)
            frame = b"%x\r\n%s\r\n" % (len(event), event)
            if index == mark:
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
