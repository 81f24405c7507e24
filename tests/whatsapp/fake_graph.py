"""A local fake of the Graph API: `POST /{phone-number-id}/messages`, and the media endpoints
(`GET /{media-id}`, the lookup answering `url`, `mime_type`, `file_size`, and `GET` of that
url, the download). A real HTTP server on 127.0.0.1 (an ephemeral port) that records every
request and answers what the test scripts."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "EAAG-test-token"  # the access token the tests configure (conftest.TOKEN)

# Meta's documented error answers (status, body), by name.
ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "rate_limit_429": (429, {"error": {"message": "(#130429) Rate limit hit", "type": "OAuthException",
                                       "code": 130429, "error_data": {"messaging_product": "whatsapp",
                                                                     "details": "Cloud API message throughput has been reached."}}}),
    "pair_rate_limit": (400, {"error": {"message": "(#131056) (Business Account, Consumer Account) pair rate limit hit",
                                        "type": "OAuthException", "code": 131056,
                                        "error_data": {"details": "Too many messages sent to this phone number."}}}),
    "too_many_calls": (400, {"error": {"message": "(#80007) Rate limit issues", "type": "OAuthException",
                                       "code": 80007}}),
    "undeliverable": (400, {"error": {"message": "(#131026) Message undeliverable", "type": "OAuthException",
                                      "code": 131026, "error_data": {"details": "Unable to deliver message."}}}),
    "window_closed": (400, {"error": {"message": "(#131047) Re-engagement message", "type": "OAuthException",
                                      "code": 131047, "error_data": {
                                          "details": "Message failed to send because more than 24 hours have "
                                                     "passed since the customer last replied to this number."}}}),
    "invalid_parameter": (400, {"error": {"message": "(#100) Invalid parameter", "type": "OAuthException",
                                          "code": 100, "error_data": {"details": "Invalid parameter"}}}),
    "server_error": (500, {"error": {"message": "(#131000) Something went wrong", "code": 131000}}),
}


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Media:
    data: bytes
    mime_type: str
    file_size: int | None = None  # what the lookup says (None: the real size)
    lookup_status: int = 200  # e.g. 404 for a media id Meta no longer has
    download_status: int = 200
    delay_s: float = 0.0  # before the download answers (a slow CDN)


@dataclass
class FakeGraph:
    server: ThreadingHTTPServer
    requests: list[Recorded] = field(default_factory=list)
    script: deque = field(default_factory=deque)  # (status, body, headers) answers, then successes
    lock: threading.Lock = field(default_factory=threading.Lock)
    media: dict[str, Media] = field(default_factory=dict)  # media id -> what the endpoints serve
    gets: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (path, headers) of each GET

    def add_media(self, media_id: str, data: bytes, mime_type: str, **options: Any) -> None:
        self.media[media_id] = Media(data, mime_type, **options)

    def lookups(self) -> list[str]:
        """The media ids looked up, in order."""
        return [path.rsplit("/", 1)[-1] for path, _ in self.gets if "/download/" not in path]

    def downloads(self) -> list[str]:
        return [path.rsplit("/", 1)[-1] for path, _ in self.gets if "/download/" in path]

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v21.0"

    def answer(self, name: str, times: int = 1, headers: dict[str, str] | None = None) -> None:
        status, body = ERRORS[name]
        for _ in range(times):
            self.script.append((status, body, headers or {}))

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    def texts(self) -> list[str]:
        return [b["text"]["body"] for b in self.bodies() if b.get("type") == "text"]


def start() -> FakeGraph:
    fake: FakeGraph

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            with fake.lock:
                fake.requests.append(Recorded(self.path, dict(self.headers), body))
                count = len(fake.requests)
                status, answer, headers = fake.script.popleft() if fake.script else (200, None, {})
            if answer is None:
                answer = {"messaging_product": "whatsapp",
                          "contacts": [{"input": body.get("to"), "wa_id": body.get("to")}],
                          "messages": [{"id": f"wamid.OUT{count}"}]}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            with fake.lock:
                fake.gets.append((self.path, dict(self.headers)))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._json(401, {"error": {"message": "Invalid OAuth access token", "code": 190}})
            media_id = self.path.rsplit("/", 1)[-1]
            media = fake.media.get(media_id)
            if self.path.startswith("/download/"):
                if media is not None and media.delay_s:
                    time.sleep(media.delay_s)
                if media is None or media.download_status != 200:
                    return self._json(media.download_status if media else 404, {"error": "not found"})
                self.send_response(200)
                self.send_header("Content-Type", media.mime_type)
                self.send_header("Content-Length", str(len(media.data)))
                self.end_headers()
                self.wfile.write(media.data)
                return None
            if media is None or media.lookup_status != 200:
                return self._json(media.lookup_status if media else 400, {"error": {
                    "message": "(#100) Invalid parameter", "type": "OAuthException", "code": 100}})
            host, port = fake.server.server_address[:2]
            return self._json(200, {"messaging_product": "whatsapp", "id": media_id,
                                    "url": f"http://{host}:{port}/download/{media_id}",
                                    "mime_type": media.mime_type, "sha256": "0" * 64,
                                    "file_size": media.file_size if media.file_size is not None else len(media.data)})

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake = FakeGraph(server=server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return fake
