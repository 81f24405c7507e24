"""AnthropicProvider on the Messages API: its wire (the schema as a system block, cacheable system
text, alternating turns, tool_use / tool_result), its stream events and Anthropic's documented
errors, each mapped to a `ProviderError` kind (real `anthropic` SDK, fake server)."""

from __future__ import annotations

import json

import pytest

from falai_django import AnthropicProvider
from falai_django.engine.errors import ProviderError
from falai_django.llm.types import GenerateInput, GenerateParameters, ToolSpec

from . import fake_vendors as fv
from .vendor_kit import SPEAK_SCHEMA, envelope, speak_input


@pytest.fixture
def make(make_vendor):
    return lambda **options: make_vendor(AnthropicProvider, "", **{"model": "claude-sonnet-4-5", **options})


def test_name_and_capabilities(make):
    provider = make()
    assert provider.name == "anthropic" and provider.max_tokens == 4096
    assert provider.capabilities.supports_prompt_caching and not provider.capabilities.supports_native_json_schema
    assert repr(provider) == "AnthropicProvider(name='anthropic', model='claude-sonnet-4-5')"


def test_the_schema_travels_as_a_system_block_after_the_cacheable_system_text(server, make):
    provider = make()
    server.stream(fv.anthropic_text(envelope("oi")))
    provider.generate_message(speak_input(history=[{"role": "system", "content": "Regra extra."},
                                                   {"role": "user", "content": "oi"}]))
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/messages" and body["stream"] is True and body["max_tokens"] == 4096
    assert body["system"][0] == {"type": "text", "text": "Você é Ana, da loja.\n\nRegra extra.",
                                 "cache_control": {"type": "ephemeral"}}
    assert body["system"][1]["text"].endswith(json.dumps(SPEAK_SCHEMA))
    assert "cache_control" not in body["system"][1]  # the per-call part is not cached
    # consecutive user items become one turn: Anthropic wants the roles to alternate
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "oi"},
                                                             {"type": "text", "text": "O cliente disse: oi"}]}]


def test_prompt_caching_off_and_no_schema_means_no_extra_block(server, make):
    provider = make(prompt_caching=False)
    server.stream(fv.anthropic_text("resumo"))
    provider.generate_message(GenerateInput(prompt="resuma", system="Sistema."))
    assert server.requests[0].body["system"] == [{"type": "text", "text": "Sistema."}]


def test_tool_round_on_the_wire(server, make):
    provider = make()
    server.stream(fv.anthropic_text(envelope("ok")))
    provider.generate_message(speak_input(
        tools=[ToolSpec(id="preco", description="Preço", parameters={"type": "object",
                                                                     "properties": {"sku": {"type": "string"}}})],
        history=[{"role": "user", "content": "quanto?"},
                 {"role": "assistant", "content": "Vou ver.", "tool_calls": [
                     {"id": "toolu_1", "toolName": "preco", "arguments": {"sku": "A"}}]},
                 {"role": "tool", "tool_call_id": "toolu_1", "name": "preco", "content": {"preco": 10}}]))
    body = server.requests[0].body
    assert body["tools"] == [{"name": "preco", "description": "Preço",
                              "input_schema": {"type": "object", "properties": {"sku": {"type": "string"}}}}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "quanto?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Vou ver."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "preco",
                                           "input": {"sku": "A"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"preco": 10}'},
                                     {"type": "text", "text": "O cliente disse: oi"}]},
    ]


def test_usage_counts_cache_reads_and_writes_in_the_prompt(server, make):
    provider = make()
    server.stream(fv.anthropic_text(envelope("oi"), input_tokens=20, output_tokens=9, cache_read=300,
                                    cache_write=50))
    meta = provider.generate_message(speak_input()).metadata
    assert (meta["promptTokens"], meta["cachedInputTokens"], meta["completionTokens"]) == (370, 300, 9)
    assert meta["modelVersion"] == "claude-sonnet-4-5-20250929" and meta["responseId"] == "msg_01"


def test_thinking_is_reasoning_and_effort_becomes_a_budget(server, make):
    provider = make(config={"temperature": 0.5, "stop_sequences": ["FIM"]})
    server.stream(fv.anthropic_text("", thinking="preciso do preço",
                                    tools=[{"id": "toolu_9", "name": "preco", "input": {"sku": "B"}}]))
    out = provider.generate_message(speak_input(tools=[ToolSpec(id="preco")], parameters=GenerateParameters(
        json_schema=SPEAK_SCHEMA, reasoning={"effort": "medium"})))
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096} and body["max_tokens"] == 5120
    assert "temperature" not in body and body["stop_sequences"] == ["FIM"]
    assert out.structured["reasoning"] == "preciso do preço"
    thinking = [{"type": "thinking", "thinking": "preciso do preço", "signature": "sig-abc"}]
    assert out.structured["toolCalls"] == [{"id": "toolu_9", "toolName": "preco", "arguments": {"sku": "B"},
                                            "thinking": thinking}]

    # the round replays the signed thinking first in the assistant turn, as the API requires
    server.stream(fv.anthropic_text(envelope("A B custa 10.")))
    provider.generate_message(speak_input(tools=[ToolSpec(id="preco")], history=[
        {"role": "user", "content": "quanto custa a B?"},
        {"role": "assistant", "content": "", "tool_calls": out.structured["toolCalls"]},
        {"role": "tool", "tool_call_id": "toolu_9", "name": "preco", "content": "10"}]))
    assistant = server.requests[1].body["messages"][1]
    assert assistant == {"role": "assistant", "content": [
        *thinking, {"type": "tool_use", "id": "toolu_9", "name": "preco", "input": {"sku": "B"}}]}


def test_sampling_settings_reach_the_body(server, make):
    provider = make(config={"temperature": 0.5, "top_p": 0.8, "max_tokens": 700})
    server.stream(fv.anthropic_text(envelope("ok")))
    provider.generate_message(speak_input())
    body = server.requests[0].body
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.5, 0.8, 700)
    assert "thinking" not in body


def test_stop_reasons(server, make):
    provider = make(retries=0)
    server.stream(fv.anthropic_text(envelope("corta"), stop="max_tokens"))
    assert provider.generate_message(speak_input()).metadata["finishReason"] == "length"
    server.stream(fv.anthropic_text("", stop="refusal"))
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert info.value.kind == "content"


@pytest.mark.parametrize(("type", "message", "kind"), [
    ("overloaded_error", "Overloaded", "overload"),
    ("api_error", "Internal server error", "overload"),
    ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "rate"),
])
def test_in_band_errors(server, make, type, message, kind):
    provider = make(retries=0)
    server.stream(fv.anthropic_stream_error(type, message))
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert info.value.kind == kind


# Anthropic's documented errors (docs.claude.com/en/api/errors): status, error.type, message -> kind.
ANTHROPIC_ERRORS = [
    (400, "invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\"", "invalid"),
    (400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum", "context"),
    (400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to "
                                   "Plans & Billing to upgrade or purchase credits.", "quota"),
    (401, "authentication_error", "invalid x-api-key", "auth"),
    (403, "permission_error", "Your API key does not have permission to use the specified resource.", "auth"),
    (404, "not_found_error", "model: claude-9", "model"),
    (413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", "invalid"),
    (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "rate"),
    (500, "api_error", "Internal server error", "overload"),
    (529, "overloaded_error", "Overloaded", "overload"),
]


@pytest.mark.parametrize(("status", "type", "message", "kind"), ANTHROPIC_ERRORS,
                         ids=[f"{s}-{t}-{k}" for s, t, _, k in ANTHROPIC_ERRORS])
def test_documented_error_statuses_and_bodies(server, make, status, type, message, kind):
    provider = make(retries=0)
    server.error(status, fv.anthropic_error(type, message), {"request-id": "req_1"})
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert (info.value.kind, info.value.status, info.value.provider) == (kind, status, "anthropic")


def test_rate_limit_retry_after_is_honoured(server, make, sleeps):
    provider = make(retries=2)
    server.error(429, fv.anthropic_error("rate_limit_error", "rate limited"), {"retry-after": "4"})
    server.stream(fv.anthropic_text(envelope("depois")))
    assert provider.generate_message(speak_input()).structured["message"] == "depois"
    assert sleeps == [4000.0]
