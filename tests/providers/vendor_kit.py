"""The vendor providers as test "flavors": how to build each against a `FakeVendor`, and how its
wire says "here is this text", "call these tools", "this failed in-band".

Every flavor runs the same contract tests (test_vendor_contract.py); vendor-specific wire
details are tested in each vendor's own file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from falai_django.llm.types import GenerateInput, GenerateParameters

from . import fake_vendors as fv

SECRET = "sk-test-SECRET-7f3a9c"  # distinctive, so a leak into any text is found
SPEAK_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}, "nome": {"type": ["string", "null"]}},
    "required": ["message", "nome"],
    "additionalProperties": False,
}


def speak_input(**overrides: Any) -> GenerateInput:
    values: dict[str, Any] = dict(
        prompt="O cliente disse: oi",
        system="Você é Ana, da loja.",
        history=[{"role": "user", "content": "oi"}, {"role": "assistant", "content": "Olá!"}],
        parameters=GenerateParameters(json_schema=SPEAK_SCHEMA, schema_name="speak"),
    )
    values.update(overrides)
    return GenerateInput(**values)


def envelope(message: str, **fields: Any) -> str:
    return json.dumps({"message": message, "nome": None, **fields}, ensure_ascii=False)


@dataclass
class Flavor:
    id: str
    factory: Callable[..., Any]  # the provider class
    model: str
    path: str  # the base URL suffix the SDK is pointed at
    endpoint: str  # the path the request lands on
    text: Callable[..., list[fv.Event]]  # (text, pieces, usage=(prompt, completion, cached)) -> events
    calls: Callable[[list[dict[str, Any]]], list[fv.Event]]  # [{"id", "name", "arguments"}] -> events
    stream_error: Callable[[str, str], list[fv.Event]]  # (code, message) -> events failing in-band
    rate_body: dict[str, Any]  # a 429 body
    overload_status: int
    overload_body: dict[str, Any]
    options: dict[str, Any]

    def make(self, server: fv.FakeVendor, **options: Any) -> Any:
        values = {"api_key": SECRET, "model": self.model, "base_url": server.url(self.path), **self.options,
                  **options}
        return self.factory(**values)


def _responses_text(text: str, pieces: int = 1, usage: tuple[int, int, int] | None = None) -> list[fv.Event]:
    return fv.responses_text(text, pieces, usage=fv.responses_usage(*usage) if usage else None)


def _responses_calls(calls: list[dict[str, Any]]) -> list[fv.Event]:
    return fv.responses_text("", calls=[{"call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                                        for c in calls])


def _chat_text(text: str, pieces: int = 1, usage: tuple[int, int, int] | None = None) -> list[fv.Event]:
    return fv.chat_text(text, pieces, usage=fv.chat_usage(*usage) if usage else None)


def _chat_calls(calls: list[dict[str, Any]]) -> list[fv.Event]:
    return fv.chat_text("", calls=calls)


def _chat_stream_error(code: str, message: str) -> list[fv.Event]:
    # an OpenAI-compatible server reports a mid-stream failure as a chunk carrying "error"
    return [fv.chat_text("x")[0], (None, {"error": {"message": message, "type": code, "code": code}})]


def _anthropic_text(text: str, pieces: int = 1, usage: tuple[int, int, int] | None = None) -> list[fv.Event]:
    if usage is None:
        return fv.anthropic_text(text, pieces)
    prompt, completion, cached = usage
    return fv.anthropic_text(text, pieces, input_tokens=prompt - cached, output_tokens=completion, cache_read=cached)


def _anthropic_calls(calls: list[dict[str, Any]]) -> list[fv.Event]:
    return fv.anthropic_text("", tools=[{"id": c["id"], "name": c["name"], "input": c["arguments"]} for c in calls])


def _anthropic_stream_error(code: str, message: str) -> list[fv.Event]:
    return fv.anthropic_stream_error(code, message)


def flavors() -> list[Flavor]:
    from falai_django import (
        AnthropicProvider,
        DeepSeekProvider,
        OpenAICompatibleProvider,
        OpenAIProvider,
        OpenRouterProvider,
    )

    openai_rate = fv.openai_error("Rate limit reached for gpt-4.1-mini on requests per min (RPM)", "requests",
                                  "rate_limit_exceeded")
    openai_overload = fv.openai_error("The server is overloaded, please try again later.", "server_error")
    chat = dict(text=_chat_text, calls=_chat_calls, stream_error=_chat_stream_error, rate_body=openai_rate,
                overload_status=503, overload_body=openai_overload)
    return [
        Flavor("openai", OpenAIProvider, "gpt-4.1-mini", "/v1", "/v1/responses", _responses_text,
               _responses_calls, fv.responses_error, openai_rate, 500,
               fv.openai_error("The server had an error while processing your request.", "server_error"), {}),
        Flavor("compatible-json_schema", OpenAICompatibleProvider, "llama3.3", "/v1", "/v1/chat/completions",
               options={"name": "local"}, **chat),
        Flavor("compatible-json_object", OpenAICompatibleProvider, "llama3.3", "/v1", "/v1/chat/completions",
               options={"structured_output": "json_object"}, **chat),
        Flavor("compatible-responses_parse", OpenAICompatibleProvider, "gpt-4.1-mini", "/v1", "/v1/responses",
               _responses_text, _responses_calls, fv.responses_error, openai_rate, 500,
               fv.openai_error("The server had an error while processing your request.", "server_error"),
               {"structured_output": "responses_parse"}),
        Flavor("openrouter", OpenRouterProvider, "openai/gpt-4.1-mini", "/api/v1", "/api/v1/chat/completions",
               options={"provider_order": ["openai"]}, **chat),
        Flavor("deepseek", DeepSeekProvider, "deepseek-chat", "", "/chat/completions", options={}, **chat),
        Flavor("anthropic", AnthropicProvider, "claude-sonnet-4-5", "", "/v1/messages", _anthropic_text,
               _anthropic_calls, _anthropic_stream_error, fv.anthropic_error("rate_limit_error", "Number of request "
                                                                             "tokens has exceeded your rate limit"),
               529, fv.anthropic_error("overloaded_error", "Overloaded"), {}),
    ]


FLAVOR_IDS = [f.id for f in flavors()]
