"""OpenAIProvider on the Responses API: its wire, its stream events, and OpenAI's documented
error statuses and bodies, each mapped to a `ProviderError` kind (real `openai` SDK, fake server)."""

from __future__ import annotations

import json

import pytest

from falai_django import OpenAIProvider
from falai_django.engine.errors import ProviderError
from falai_django.llm.types import GenerateParameters, ToolSpec
from falai_django.providers.openai import is_strict_schema

from . import fake_vendors as fv
from .vendor_kit import SECRET, SPEAK_SCHEMA, envelope, speak_input


@pytest.fixture
def make(make_vendor):
    return lambda **options: make_vendor(OpenAIProvider, **options)


def test_name_capabilities_and_policy_defaults(make):
    provider = make()
    assert provider.name == "openai" and provider.structured_output == "responses_parse"
    assert (provider.timeout_ms, provider.retries) == (60_000, 3)
    caps = provider.capabilities
    assert caps.supports_native_json_schema and caps.supports_prompt_caching and caps.supports_streaming_tool_calls
    assert repr(provider) == "OpenAIProvider(name='openai', model='gpt-4.1-mini')"
    tuned = make(retry_config={"timeout": 5_000, "retries": 0})
    assert (tuned.timeout_ms, tuned.retries) == (5_000, 0)


def test_the_request_on_the_wire(server, make):
    provider = make(config={"temperature": 0.2, "top_p": 0.9})
    server.stream(fv.responses_text(envelope("oi")))
    history = [
        {"role": "system", "content": "Regra extra."},
        {"role": "user", "content": "quanto custa?"},
        {"role": "assistant", "content": "Vou ver.", "tool_calls": [
            {"id": "call_1", "toolName": "preco", "arguments": {"sku": "C-1"}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "preco", "content": {"preco": 10}},
    ]
    provider.generate_message(speak_input(history=history, parameters=GenerateParameters(
        json_schema=SPEAK_SCHEMA, schema_name="speak", max_output_tokens=500, reasoning={"effort": "max"})))

    body = server.requests[0].body
    assert body["instructions"] == "Você é Ana, da loja.\n\nRegra extra."
    assert body["input"] == [
        {"role": "user", "content": "quanto custa?"},
        {"role": "assistant", "content": "Vou ver."},
        {"type": "function_call", "call_id": "call_1", "name": "preco", "arguments": '{"sku": "C-1"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"preco": 10}'},
        {"role": "user", "content": "O cliente disse: oi"},
    ]
    assert body["text"] == {"format": {"type": "json_schema", "name": "speak", "schema": SPEAK_SCHEMA,
                                       "strict": True}}
    assert body["stream"] is True and body["store"] is False  # nothing kept at OpenAI
    assert (body["max_output_tokens"], body["reasoning"], body["temperature"], body["top_p"]) == (
        500, {"effort": "high"}, 0.2, 0.9)
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_tools_are_function_tools_and_a_loose_schema_is_not_strict(server, make):
    provider = make()
    loose = {"type": "object", "properties": {"flows": {"type": "object"}}}
    server.stream(fv.responses_text(json.dumps({"flows": {}})))
    provider.generate_message(speak_input(tools=[ToolSpec(id="preco")], parameters=GenerateParameters(
        json_schema=loose, schema_name="understand")))
    body = server.requests[0].body
    assert body["tools"] == [{"type": "function", "name": "preco", "parameters": {"type": "object"}, "strict": False}]
    assert body["text"]["format"]["strict"] is False
    assert is_strict_schema(SPEAK_SCHEMA) and not is_strict_schema(loose)
    assert not is_strict_schema({**SPEAK_SCHEMA, "required": ["message"]})


def test_json_with_tools_prompt_writes_the_schema_into_the_instructions(server, make):
    provider = make(json_with_tools="prompt")
    server.stream(fv.responses_text(envelope("ok")))
    provider.generate_message(speak_input(tools=[ToolSpec(id="preco")]))
    body = server.requests[0].body
    assert "text" not in body and "conforms to this JSON schema" in body["instructions"]
    server.stream(fv.responses_text(envelope("ok")))
    provider.generate_message(speak_input())  # no tools: the schema stays on text.format
    assert "text" in server.requests[1].body


def test_cut_reply_is_length_and_refusal_is_content(server, make):
    provider = make(retries=0)
    server.stream(fv.responses_text(envelope("quase"), incomplete="max_output_tokens"))
    out = provider.generate_message(speak_input())
    assert out.metadata["finishReason"] == "length" and out.structured["message"] == "quase"

    refusal = [("response.created", {"type": "response.created", "sequence_number": 0,
                                     "response": {"id": "r", "object": "response", "model": "m", "output": [],
                                                  "status": "in_progress"}}),
               ("response.refusal.delta", {"type": "response.refusal.delta", "item_id": "m", "output_index": 0,
                                           "content_index": 0, "delta": "I can't help with that.",
                                           "sequence_number": 1})]
    server.stream(refusal)
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert info.value.kind == "content"


@pytest.mark.parametrize(("code", "message", "kind"), [
    ("rate_limit_exceeded", "Rate limit reached for requests", "rate"),
    ("insufficient_quota", "You exceeded your current quota, please check your plan and billing details.", "quota"),
    ("server_error", "The server had an error while processing your request.", "overload"),
    ("context_length_exceeded", "Your input exceeds the context window of this model.", "context"),
])
def test_response_failed_and_error_events_are_classified(server, make, code, message, kind):
    provider = make(retries=0)
    failed = [("response.created", {"type": "response.created", "sequence_number": 0,
                                    "response": {"id": "r", "object": "response", "model": "m", "output": [],
                                                 "status": "in_progress"}}),
              ("response.failed", {"type": "response.failed", "sequence_number": 1, "response": {
                  "id": "r", "object": "response", "model": "m", "output": [], "status": "failed",
                  "error": {"code": code, "message": message}}})]
    for events in (failed, fv.responses_error(code, message)):
        server.stream(events)
        with pytest.raises(ProviderError) as info:
            provider.generate_message(speak_input())
        assert info.value.kind == kind, events[-1][0]


# OpenAI's documented error codes (platform.openai.com/docs/guides/error-codes): status, body -> kind.
OPENAI_ERRORS = [
    (401, fv.openai_error("Incorrect API key provided: sk-test-***. You can find your API key at ...",
                          "invalid_request_error", "invalid_api_key"), "auth"),
    (401, fv.openai_error("You must be a member of an organization to use the API.", "invalid_request_error",
                          "no_organization"), "auth"),
    (403, fv.openai_error("Country, region, or territory not supported", "request_forbidden",
                          "unsupported_country_region_territory"), "auth"),
    (429, fv.openai_error("Rate limit reached for gpt-4.1-mini in organization org-1 on tokens per min (TPM)",
                          "tokens", "rate_limit_exceeded"), "rate"),
    (429, fv.openai_error("You exceeded your current quota, please check your plan and billing details.",
                          "insufficient_quota", "insufficient_quota"), "quota"),
    (500, fv.openai_error("The server had an error while processing your request. Sorry about that!",
                          "server_error"), "overload"),
    (503, fv.openai_error("The engine is currently overloaded, please try again later.", "server_error"),
     "overload"),
    (503, fv.openai_error("Slow Down: please reduce your request rate.", "server_error", "slow_down"), "overload"),
    (404, fv.openai_error("The model `gpt-9` does not exist or you do not have access to it.",
                          "invalid_request_error", "model_not_found"), "model"),
    (400, fv.openai_error("This model's maximum context length is 128000 tokens. However, your messages resulted "
                          "in 130512 tokens.", "invalid_request_error", "context_length_exceeded"), "context"),
    (400, fv.openai_error("Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
                          "invalid_request_error", "invalid_prompt"), "content"),
    (400, fv.openai_error("Invalid schema for response_format 'speak': 'additionalProperties' is required",
                          "invalid_request_error", "invalid_json_schema"), "invalid"),
    (408, "request timeout", "timeout"),
]


@pytest.mark.parametrize(("status", "body", "kind"), OPENAI_ERRORS,
                         ids=[f"{s}-{k}-{i}" for i, (s, _, k) in enumerate(OPENAI_ERRORS)])
def test_documented_error_statuses_and_bodies(server, make, status, body, kind):
    provider = make(retries=0)
    server.error(status, body)
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    error = info.value
    assert (error.kind, error.status, error.provider) == (kind, status, "openai")
    if isinstance(body, dict) and body["error"]["code"]:
        assert error.code == body["error"]["code"]


def test_x_should_retry_and_retry_after_ms_are_read(server, make):
    provider = make(retries=0)
    server.error(429, fv.openai_error("Rate limit reached", "requests", "rate_limit_exceeded"),
                 {"retry-after-ms": "1500", "x-should-retry": "false"})
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert (info.value.retry_after_ms, info.value.should_retry) == (1500, False)
