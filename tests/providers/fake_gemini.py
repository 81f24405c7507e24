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
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .fake_http import ScriptedServer


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


class FakeGemini(ScriptedServer):
    """Start with `FakeGemini()`; use `.base_url`; script with `.push(Reply(...))`; `.close()`."""

    reply_class = Reply
    thread_name = "fake-gemini"

    def stream_text(self, text: str, pieces: int = 1, **kwargs: Any) -> FakeGemini:
        return self.push(Reply(chunks=text_chunks(text, pieces, **kwargs)))

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        route = path.split("?", 1)[0]
        model, _, method = route.rsplit("/", 1)[-1].partition(":")
        recorded = Recorded(method=method, path=path, model=model, stream=method == "streamGenerateContent",
                            headers=self._headers(handler), body=self._read_body(handler))
        reply = self._take(handler, recorded, lambda: Reply(
            status=500, body=error_body(500, "INTERNAL", "fake gemini: no scripted reply left")))
        if reply is None:
            return
        if reply.status != 200:
            self._send_body(handler, reply.status, json.dumps(reply.body or {}).encode(),
                            "application/json; charset=UTF-8", reply.headers)
        elif method == "generateContent":
            self._send_body(handler, 200, json.dumps(_merge(reply.chunks)).encode(),
                            "application/json; charset=UTF-8", {})
        else:
            self._send_stream(handler, reply, [b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n"
                                               for chunk in reply.chunks])
