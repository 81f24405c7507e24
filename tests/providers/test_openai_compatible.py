"""OpenAICompatibleProvider's three `structured_output` modes on the wire, and its presets
OpenRouterProvider and DeepSeekProvider (real `openai` SDK, fake chat-completions server)."""

from __future__ import annotations

import json

import pytest

from falai_django import DeepSeekProvider, OpenAICompatibleProvider, OpenRouterProvider
from falai_django.engine.errors import ProviderError
from falai_django.llm.types import ToolSpec

from . import fake_vendors as fv
from .vendor_kit import SPEAK_SCHEMA, envelope, speak_input


@pytest.fixture
def make(make_vendor):
    def build(cls=OpenAICompatibleProvider, **options):
        return make_vendor(cls, **{"model": "llama3.3", **options})

    return build


def test_options_are_checked_at_construction():
    with pytest.raises(ValueError, match=r'structured_output is "xml": it must be "responses_parse", "json_schema"'):
        OpenAICompatibleProvider(api_key="k", model="m", base_url="http://127.0.0.1:9", structured_output="xml")
    with pytest.raises(ValueError, match=r'json_with_tools is "always"'):
        OpenAICompatibleProvider(api_key="k", model="m", base_url="http://127.0.0.1:9", json_with_tools="always")


def test_json_schema_mode_is_the_default_and_the_name_is_the_callers(server, make):
    provider = make(name="ollama")
    server.stream(fv.chat_text(envelope("oi")))
    provider.generate_message(speak_input())
    body = server.requests[0].body
    assert provider.name == "ollama" and server.requests[0].path == "/v1/chat/completions"
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "speak", "schema": SPEAK_SCHEMA, "strict": True}}
    assert body["messages"][0] == {"role": "system", "content": "Você é Ana, da loja."}
    assert body["messages"][-1] == {"role": "user", "content": "O cliente disse: oi"}
    assert body["stream_options"] == {"include_usage": True}


def test_json_object_mode_puts_the_schema_in_the_system_prompt(server, make):
    provider = make(structured_output="json_object")
    server.stream(fv.chat_text(envelope("oi")))
    provider.generate_message(speak_input())
    body = server.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]["content"]
    assert system.startswith("Você é Ana, da loja.\n\n") and json.dumps(SPEAK_SCHEMA) in system


def test_responses_parse_mode_uses_the_responses_api(server, make):
    provider = make(structured_output="responses_parse", model="gpt-4.1-mini")
    server.stream(fv.responses_text(envelope("pelo responses")))
    assert provider.generate_message(speak_input()).structured["message"] == "pelo responses"
    assert server.requests[0].path == "/v1/responses"
    assert server.requests[0].body["text"]["format"]["name"] == "speak"


def test_json_with_tools_prompt_drops_the_response_format_on_tool_calls(server, make):
    provider = make(json_with_tools="prompt")
    server.stream(fv.chat_text(envelope("ok")))
    provider.generate_message(speak_input(tools=[ToolSpec(id="preco", description="Preço")]))
    body = server.requests[0].body
    assert "response_format" not in body and "conforms to this JSON schema" in body["messages"][0]["content"]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "preco", "parameters": {"type": "object"}, "description": "Preço"}}]


def test_history_tool_round_in_chat_messages(server, make):
    provider = make()
    server.stream(fv.chat_text(envelope("ok")))
    provider.generate_message(speak_input(history=[
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "function": {"name": "preco", "arguments": '{"sku": "A"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "preco", "content": "10"},
    ]))
    messages = server.requests[0].body["messages"]
    assert messages[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "preco", "arguments": '{"sku": "A"}'}}]}
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "10"}


def test_cut_tool_arguments_are_salvaged_and_length_finish_is_reported(server, make):
    provider = make()
    events = fv.chat_text("", calls=[{"id": "c1", "name": "preco", "arguments": {"sku": "A"}}])
    server.stream(events)
    out = provider.generate_message(speak_input())
    assert out.structured["toolCalls"] == [{"id": "c1", "toolName": "preco", "arguments": {"sku": "A"}}]
    server.stream(fv.chat_text(envelope("corte"), finish="length"))
    assert provider.generate_message(speak_input()).metadata["finishReason"] == "length"


def test_content_filter_with_no_text_is_content(server, make):
    provider = make(retries=0)
    server.stream(fv.chat_text("", finish="content_filter"))
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert info.value.kind == "content"


def test_openrouter_preset_pins_the_provider_order_and_sends_attribution(server, make):
    provider = make(OpenRouterProvider, model="anthropic/claude-sonnet-4.5", base_url=server.url("/api/v1"),
                    provider_order=["anthropic", "amazon-bedrock"], site_url="https://loja.example",
                    site_name="Loja")
    server.stream(fv.chat_text(envelope("via openrouter"), usage=fv.chat_usage(40, 8, 32)))
    out = provider.generate_message(speak_input())
    sent = server.requests[0]
    assert provider.name == "openrouter" and out.metadata["cachedInputTokens"] == 32
    assert sent.body["provider"] == {"order": ["anthropic", "amazon-bedrock"], "allow_fallbacks": False}
    assert (sent.headers["http-referer"], sent.headers["x-title"]) == ("https://loja.example", "Loja")
    assert sent.body["response_format"]["type"] == "json_schema"
    assert OpenRouterProvider.DEFAULT_BASE_URL == "https://openrouter.ai/api/v1"


def test_deepseek_preset_json_object_reasoning_and_cache_hits(server, make):
    provider = make(DeepSeekProvider, model="deepseek-chat", base_url=server.url(""))
    server.stream(fv.chat_text(envelope("olá"), 3, reasoning="pensando...",
                               usage=fv.chat_usage(90, 12, prompt_cache_hit_tokens=64,
                                                   prompt_cache_miss_tokens=26)))
    out = provider.generate_message(speak_input(tools=[ToolSpec(id="preco")]))
    body = server.requests[0].body
    assert provider.name == "deepseek" and server.requests[0].path == "/chat/completions"
    assert body["response_format"] == {"type": "json_object"} and "JSON schema" in body["messages"][0]["content"]
    assert out.metadata["cachedInputTokens"] == 64 and out.metadata["promptTokens"] == 90
    assert DeepSeekProvider.DEFAULT_BASE_URL == "https://api.deepseek.com"


def test_in_band_chat_error_is_classified_by_its_body(server, make):
    provider = make(retries=0)
    server.stream([fv.chat_text("x")[0], (None, {"error": {"message": "Rate limit exceeded: free-models-per-min",
                                                            "code": 429}})])
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert info.value.kind == "rate"


# Statuses the presets' vendors document beyond OpenAI's own: status, body -> kind.
COMPATIBLE_ERRORS = [
    (402, {"error": {"message": "Insufficient Balance", "type": "unknown_error"}}, "quota"),  # DeepSeek
    (402, {"error": {"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/credits"}},
     "quota"),  # OpenRouter
    (422, {"error": {"message": "Invalid Parameters", "type": "invalid_request_error"}}, "invalid"),  # DeepSeek
    (503, {"error": {"message": "Server Overloaded", "type": "service_unavailable"}}, "overload"),  # DeepSeek
    (502, {"error": {"code": 502, "message": "Provider returned error"}}, "overload"),  # OpenRouter
    (404, {"error": {"message": "model 'llama9' not found, try pulling it first"}}, "model"),  # Ollama
    (403, {"error": {"message": "Your plan doesn't include this model. Upgrade to Pro or higher to use it."}},
     "entitlement"),  # a coding-plan gateway
    (401, {"error": {"message": "No auth credentials found", "code": 401}}, "auth"),  # OpenRouter
]


@pytest.mark.parametrize(("status", "body", "kind"), COMPATIBLE_ERRORS,
                         ids=[f"{s}-{k}-{i}" for i, (s, _, k) in enumerate(COMPATIBLE_ERRORS)])
def test_compatible_vendors_error_statuses(server, make, status, body, kind):
    provider = make(retries=0)
    server.error(status, body)
    with pytest.raises(ProviderError) as info:
        provider.generate_message(speak_input())
    assert (info.value.kind, info.value.status) == (kind, status)
