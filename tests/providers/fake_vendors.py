"""Fake OpenAI and Anthropic HTTP servers for tests and the stream bench (127.0.0.1, port 0).

They speak the wire formats the official SDKs read:

- OpenAI Responses API (`POST /v1/responses`, `stream: true`): `event: <type>` + `data: {...}`
  server-sent events (`response.output_text.delta`, `response.output_item.done`,
  `response.completed`, `error`, ...);
- OpenAI chat completions (`POST /v1/chat/completions`): `data: {chunk}` events then
  `data: [DONE]`, usage in a last chunk with no choices;
- Anthropic Messages (`POST /v1/messages`): `event: message_start` ... `message_stop`.
- OpenAI audio transcriptions (`POST /v1/audio/transcriptions`, multipart/form-data, recorded
  as its fields with the file as `{"filename", "content_type", "data"}`): a 200 JSON body
  (`transcription(text)`).

Each request takes the next scripted `Reply` (FIFO; when the script is dry, the optional
`responder(recorded)` answers, else a 500) and is recorded (`server.requests`: path,
headers, parsed body). A reply is a stream of events, an HTTP error with a JSON body and
headers, a connection dropped before or during the body, or a delay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .fake_http import ScriptedServer

Event = tuple[str | None, Any]  # (SSE event name or None, data: a dict, or raw text)


@dataclass
class Reply:
    status: int = 200
    events: list[Event] = field(default_factory=list)
    body: Any = None  # the JSON body of an error status (a str is sent as it is)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before the status line
    chunk_delay_s: float = 0.0  # between events
    drop_after: int | None = None  # close the socket after this many events (0: before any byte)
    mark: int = 0  # the event whose write time goes to `first_chunk_at` (the bench marks the first text)
    json: Any = None  # a 200 answered with this JSON body instead of a stream


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeVendor(ScriptedServer):
    """Start with `FakeVendor()`; point an SDK at `.url("/v1")`; script with `.push(Reply(...))`."""

    reply_class = Reply
    thread_name = "fake-vendor"

    def stream(self, events: list[Event], **kwargs: Any) -> FakeVendor:
        return self.push(Reply(events=events, **kwargs))

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        recorded = Recorded(path=handler.path, headers=self._headers(handler), body=self._read_body(handler))
        reply = self._take(handler, recorded, lambda: Reply(
            status=500, body={"error": {"message": "fake vendor: no scripted reply left"}}))
        if reply is None:
            return
        if reply.status != 200:
            payload = reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body or {}).encode()
            self._send_body(handler, reply.status, payload, "application/json", reply.headers)
            return
        if reply.json is not None:
            self._send_body(handler, 200, json.dumps(reply.json).encode(), "application/json", reply.headers)
            return
        events = [((f"event: {name}\n" if name else "")
                   + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n").encode()
                  for name, data in reply.events]
        self._send_stream(handler, reply, events, mark=reply.mark)


def transcription(text: str) -> Reply:
    """The transcription endpoint's answer (`response_format` json, its default)."""
    return Reply(json={"text": text, "usage": {"type": "duration", "seconds": 3}})


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# -- OpenAI Responses API ------------------------------------------------------------------------


def responses_usage(input_tokens: int, output_tokens: int, cached: int = 0) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": cached}, "output_tokens_details": {"reasoning_tokens": 0}}


def _response(model: str, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
              incomplete: str | None = None) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1_760_000_000, "model": model, "status": status,
            "output": output, "usage": usage, "error": None,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def responses_text(text: str, pieces: int = 1, *, model: str = "gpt-4.1-mini-2025-04-14",
                   usage: dict[str, Any] | None = None, incomplete: str | None = None,
                   calls: list[dict[str, Any]] | None = None) -> list[Event]:
    """A Responses stream writing `text` in `pieces` deltas (then any function calls), completed."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    events: list[Event] = [("response.created", {"type": "response.created", "sequence_number": 0,
                                                 "response": _response(model, "in_progress", [], None)})]
    output: list[dict[str, Any]] = []
    if text:
        events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                      "sequence_number": 1,
                                                      "item": {**message, "status": "in_progress", "content": []}}))
        for piece in _split(text, pieces):
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                "delta": piece, "sequence_number": len(events), "logprobs": []}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                     "sequence_number": len(events), "item": message}))
        output.append(message)
    for index, call in enumerate(calls or [], start=len(output)):
        item = {"id": f"fc_{index}", "type": "function_call", "status": "completed", "call_id": call["call_id"],
                "name": call["name"], "arguments": json.dumps(call["arguments"])}
        events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": index,
                                                      "sequence_number": len(events),
                                                      "item": {**item, "arguments": "", "status": "in_progress"}}))
        for piece in _split(item["arguments"], 3):
            events.append(("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": index,
                "delta": piece, "sequence_number": len(events)}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": index,
                                                     "sequence_number": len(events), "item": item}))
        output.append(item)
    status = "incomplete" if incomplete else "completed"
    events.append((f"response.{status}", {"type": f"response.{status}", "sequence_number": len(events),
                                          "response": _response(model, status, output, usage, incomplete)}))
    return events


def responses_error(code: str, message: str) -> list[Event]:
    """A stream that fails in-band: `response.created`, then an `error` event."""
    return [("response.created", {"type": "response.created", "sequence_number": 0,
                                  "response": _response("gpt-4.1-mini", "in_progress", [], None)}),
            ("error", {"type": "error", "code": code, "message": message, "param": None, "sequence_number": 1})]


# -- OpenAI chat completions ---------------------------------------------------------------------


def _chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None,
           usage: dict[str, Any] | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_760_000_000,
                             "model": model, "choices": []}
    if delta is not None:
        chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def chat_usage(prompt: int, completion: int, cached: int | None = None, **extra: Any) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion, **extra}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def chat_text(text: str, pieces: int = 1, *, model: str = "llama3.3", finish: str = "stop",
              usage: dict[str, Any] | None = None, reasoning: str | None = None,
              calls: list[dict[str, Any]] | None = None) -> list[Event]:
    """A chat-completions stream: role, (reasoning), `text` in pieces, tool-call fragments, finish, usage, [DONE]."""
    events: list[Event] = [(None, _chunk(model, {"role": "assistant", "content": ""}))]
    if reasoning:
        events.append((None, _chunk(model, {"reasoning_content": reasoning})))
    if text:
        events.extend((None, _chunk(model, {"content": piece})) for piece in _split(text, pieces))
    for index, call in enumerate(calls or []):
        arguments = json.dumps(call["arguments"])
        head, tail = arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]
        events.append((None, _chunk(model, {"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                            "function": {"name": call["name"], "arguments": head}}]})))
        events.append((None, _chunk(model, {"tool_calls": [{"index": index, "function": {"arguments": tail}}]})))
    events.append((None, _chunk(model, {}, "tool_calls" if calls else finish)))
    if usage is not None:
        events.append((None, _chunk(model, None, usage=usage)))
    events.append((None, "[DONE]"))
    return events


def openai_error(message: str, type: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


# -- Anthropic Messages --------------------------------------------------------------------------


def anthropic_text(text: str, pieces: int = 1, *, model: str = "claude-sonnet-4-5-20250929",
                   stop: str = "end_turn", input_tokens: int = 10, output_tokens: int = 5, cache_read: int = 0,
                   cache_write: int = 0, tools: list[dict[str, Any]] | None = None,
                   thinking: str | None = None) -> list[Event]:
    """A Messages stream: (thinking), `text` in pieces, tool_use blocks with fragmented input, stop."""
    events: list[Event] = [("message_start", {"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1, "cache_read_input_tokens": cache_read,
                  "cache_creation_input_tokens": cache_write}}})]
    index = 0
    if thinking:
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": {"type": "thinking_delta", "thinking": thinking}}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": {"type": "signature_delta", "signature": "sig-abc"}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if text:
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": {"type": "text", "text": ""}}))
        for piece in _split(text, pieces):
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "text_delta", "text": piece}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for tool in tools or []:
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": tool["id"], "name": tool["name"], "input": {}}}))
        for piece in _split(json.dumps(tool["input"]), 3):
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(("ping", {"type": "ping"}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": "tool_use" if tools else stop, "stop_sequence": None},
                                     "usage": {"output_tokens": output_tokens}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_error(type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type, "message": message}}


def anthropic_stream_error(type: str, message: str) -> list[Event]:
    """A stream that fails in-band after message_start (Anthropic's `event: error`)."""
    return [anthropic_text("", 1)[0], ("error", anthropic_error(type, message))]
