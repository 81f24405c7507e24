"""GeminiProvider on the real google-genai client against a fake Gemini REST server (§5.2, §5.3)."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from falai_django.engine.errors import ProviderError
from falai_django.llm.streaming import StreamingMessageDecoder
from falai_django.llm.types import GenerateInput, GenerateParameters, ToolSpec
from falai_django.providers.gemini import GeminiProvider, gemini_json_schema

from .fake_gemini import Reply, error_body, function_call_chunk, text_chunks

SPEAK_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "the reply"},
        "nome": {"type": ["string", "null"], "default": None},
        "tamanho": {"type": ["string", "null"], "enum": ["1-10", "11-50", None]},
    },
    "required": ["message", "nome", "tamanho"],
    "additionalProperties": False,
}
USAGE = {"promptTokenCount": 120, "candidatesTokenCount": 30, "thoughtsTokenCount": 5,
         "cachedContentTokenCount": 100, "totalTokenCount": 155}


def speak_input(**overrides) -> GenerateInput:
    values = dict(
        prompt="O cliente disse: oi",
        system="Você é Ana, da loja.",
        history=[{"role": "user", "content": "oi"}, {"role": "assistant", "content": "Olá!"}],
        parameters=GenerateParameters(json_schema=SPEAK_SCHEMA, schema_name="speak"),
    )
    values.update(overrides)
    return GenerateInput(**values)


def envelope(message: str, **fields) -> str:
    return json.dumps({"message": message, "nome": None, "tamanho": None, **fields}, ensure_ascii=False)


# -- construction ------------------------------------------------------------------------------


def test_missing_api_key_fails_at_construction():
    with pytest.raises(ValueError, match=r"^\[GeminiProvider\] apiKey is empty: "):
        GeminiProvider(api_key="")
    with pytest.raises(ValueError, match=r"^\[GeminiProvider\] apiKey is empty: "):
        GeminiProvider(api_key="   ")
    with pytest.raises(ValueError, match=r"^\[GeminiProvider\] model is empty: "):
        GeminiProvider(api_key="k", model="")


def test_name_capabilities_and_defaults():
    provider = GeminiProvider(api_key="k")
    try:
        assert provider.name == "gemini"
        assert provider.model == "gemini-2.5-flash"
        assert provider.timeout_ms == 60_000 and provider.retries == 3
        caps = provider.capabilities
        assert all([caps.supports_tools, caps.supports_native_json_schema, caps.supports_streaming,
                    caps.supports_streaming_tool_calls, caps.supports_prompt_caching])
    finally:
        provider.close()


def test_zero_timeout_means_the_default_and_zero_retries_is_honoured():
    provider = GeminiProvider(api_key="k", timeout_ms=0, retries=0)
    try:
        assert (provider.timeout_ms, provider.retries) == (60_000, 0)
    finally:
        provider.close()


def test_empty_history_messages_are_not_sent(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text(envelope("ok"))
    provider.generate_message(speak_input(history=[{"role": "user", "content": ""},
                                                   {"role": "assistant", "content": ""},
                                                   {"role": "user", "content": "oi"}]))
    assert gemini_server.requests[0].body["contents"] == [
        {"role": "user", "parts": [{"text": "oi"}]}, {"role": "user", "parts": [{"text": "O cliente disse: oi"}]}]


def test_env_base_url_is_honoured(gemini_server, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini_server.base_url)
    provider = GeminiProvider(api_key="env-key", retries=0)
    try:
        gemini_server.stream_text(envelope("via env"))
        assert provider.generate_message(speak_input()).structured["message"] == "via env"
        assert gemini_server.requests[0].headers["x-goog-api-key"] == "env-key"
    finally:
        provider.close()


# -- structured output -------------------------------------------------------------------------


def test_structured_output_is_parsed_into_the_envelope(gemini_server, make_gemini):
    provider = make_gemini(model="models/gemini-2.5-flash")
    gemini_server.push(Reply(chunks=text_chunks(envelope("Olá, Ana aqui!", nome="Rui"), 3, usage=USAGE,
                                                model_version="gemini-2.5-flash-001")))

    out = provider.generate_message(speak_input())

    assert out.structured == {"message": "Olá, Ana aqui!", "nome": "Rui", "tamanho": None}
    assert json.loads(out.message) == out.structured
    assert out.metadata == {
        "model": "gemini-2.5-flash", "modelVersion": "gemini-2.5-flash-001", "finishReason": "stop",
        "promptTokens": 120, "completionTokens": 35, "cachedInputTokens": 100, "tokensUsed": 155,
    }
    [sent] = gemini_server.requests
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert sent.headers["x-goog-api-key"] == "test-key"
    body = sent.body
    assert body["systemInstruction"]["parts"] == [{"text": "Você é Ana, da loja."}]
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "oi"}]},
        {"role": "model", "parts": [{"text": "Olá!"}]},
        {"role": "user", "parts": [{"text": "O cliente disse: oi"}]},
    ]
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config["responseJsonSchema"]
    assert "$schema" not in schema and "default" not in schema["properties"]["nome"]
    assert schema["properties"]["tamanho"] == {"anyOf": [{"type": "string", "enum": ["1-10", "11-50"]},
                                                         {"type": "null"}]}
    assert schema["required"] == ["message", "nome", "tamanho"] and schema["additionalProperties"] is False
    assert "tools" not in body


def test_history_system_items_merge_into_the_system_instruction(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text(envelope("ok"))
    provider.generate_message(speak_input(history=[{"role": "system", "content": "Resumo: pediu preço."}]))
    assert gemini_server.requests[0].body["systemInstruction"]["parts"] == [
        {"text": "Você é Ana, da loja.\n\nResumo: pediu preço."}]


def test_no_schema_means_no_json_mode_and_plain_text_is_the_message(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text("Resumo da conversa.", 2)
    out = provider.generate_message(GenerateInput(prompt="Resuma", parameters=GenerateParameters(json_schema={})))
    assert out.message == "Resumo da conversa." and out.structured is None
    assert "responseMimeType" not in gemini_server.requests[0].body.get("generationConfig", {})


def test_fenced_envelope_is_parsed_leniently(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text('```json\n{"message": "linha 1\nlinha 2"}\n```', 4)
    assert provider.generate_message(speak_input()).structured == {"message": "linha 1\nlinha 2"}


def test_broken_envelope_is_never_shown_and_fails(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text('{"message": "cortado', 2)
    with pytest.raises(ProviderError, match="No response from gemini") as caught:
        provider.generate_message(speak_input())
    assert caught.value.kind == "unknown"
    assert len(gemini_server.requests) == 1  # not a transient kind: not retried


def test_generation_options_reach_the_wire(gemini_server, make_gemini):
    provider = make_gemini(config={"temperature": 0.2, "top_p": 0.9, "stop_sequences": ["FIM"]})
    gemini_server.stream_text(envelope("ok"))
    provider.generate_message(speak_input(parameters=GenerateParameters(
        json_schema=SPEAK_SCHEMA, schema_name="speak", max_output_tokens=256, reasoning={"effort": "none"})))
    config = gemini_server.requests[0].body["generationConfig"]
    assert config["temperature"] == 0.2 and config["topP"] == 0.9 and config["stopSequences"] == ["FIM"]
    assert config["maxOutputTokens"] == 256
    # the SDK sends nested config keys as proto field names, which the API accepts too
    assert config["thinkingConfig"] in ({"thinkingLevel": "MINIMAL"}, {"thinking_level": "MINIMAL"})


def test_effort_is_not_sent_when_absent(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text(envelope("ok"))
    provider.generate_message(speak_input())
    assert "thinkingConfig" not in gemini_server.requests[0].body["generationConfig"]


def test_schema_translation_keeps_structure_and_drops_unknown_keywords():
    schema = {"type": "object", "title": "T", "examples": [1], "properties": {
        "a": {"const": "x"}, "b": {"type": "array", "items": {"type": "integer", "default": 1}},
        "c": {"anyOf": [{"type": "string", "format": "date", "$comment": "c"}, {"type": "null"}]}}}
    assert gemini_json_schema(schema) == {"type": "object", "title": "T", "properties": {
        "a": {"enum": ["x"]}, "b": {"type": "array", "items": {"type": "integer"}},
        "c": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}}}


# -- streaming ---------------------------------------------------------------------------------


def test_stream_deltas_arrive_in_order_and_match_the_final_message(gemini_server, make_gemini):
    message = "Oi! Tudo bem? Posso te ajudar com \"preços\", prazos e entregas 😀 — é só falar."
    gemini_server.push(Reply(chunks=text_chunks(envelope(message), 12, usage=USAGE)))
    provider = make_gemini()

    decoder = StreamingMessageDecoder()
    deltas, accumulated = [], []
    chunks = list(provider.generate_message_stream(speak_input()))
    for chunk in chunks:
        accumulated.append(chunk.accumulated)
        _, delta = decoder.push(chunk.accumulated)
        if delta:
            deltas.append(delta)

    assert len(deltas) >= 8  # many small deltas, not one at the end
    assert "".join(deltas) == message
    *body, last = chunks
    assert all(not c.done and c.structured is None for c in body)
    assert "".join(c.delta for c in body) == envelope(message)
    assert last.done and last.delta == "" and last.accumulated == envelope(message)
    assert last.structured["message"] == message
    assert last.metadata["promptTokens"] == 120
    assert accumulated == sorted(accumulated, key=len)  # accumulated only grows


def test_usage_is_absent_when_gemini_reports_none(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text(envelope("ok"))
    metadata = provider.generate_message(speak_input()).metadata
    assert metadata == {"model": "gemini-2.5-flash", "finishReason": "stop"}


def test_max_tokens_finish_is_length(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.push(Reply(chunks=text_chunks(envelope("ok"), 1, finish="MAX_TOKENS")))
    assert provider.generate_message(speak_input()).metadata["finishReason"] == "length"


# -- function calling --------------------------------------------------------------------------

PRICE_TOOL = ToolSpec(id="consultar_preco", description="Consulta o preço de um produto.",
                      parameters={"type": "object", "properties": {"sku": {"type": "string"}},
                                  "required": ["sku"]})


def test_function_call_round_trip(gemini_server, make_gemini):
    provider = make_gemini()
    signature = base64.b64encode(b"sig-bytes").decode()
    gemini_server.push(Reply(chunks=[function_call_chunk("consultar_preco", {"sku": "A1"}, call_id="c-1",
                                                         thought_signature=signature)]))

    first = provider.generate_message(speak_input(tools=[PRICE_TOOL]))

    assert first.structured == {"message": "", "toolCalls": [
        {"id": "c-1", "toolName": "consultar_preco", "arguments": {"sku": "A1"}, "thoughtSignature": signature}]}
    assert first.metadata["finishReason"] == "tool_calls"
    sent = gemini_server.requests[0].body
    [declaration] = sent["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "consultar_preco"
    assert declaration["description"] == "Consulta o preço de um produto."
    # nested keys travel as proto field names (parameters_json_schema), which the API accepts
    parameters = declaration.get("parametersJsonSchema", declaration.get("parameters_json_schema"))
    assert parameters == {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    # Gemini 2 cannot take a response schema together with tools: the schema rides in the prompt.
    assert "responseJsonSchema" not in sent["generationConfig"]
    assert '"message"' in sent["systemInstruction"]["parts"][0]["text"]

    call = first.structured["toolCalls"][0]
    history = [
        {"role": "user", "content": "quanto custa o A1?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c-1", "name": "consultar_preco", "content": json.dumps({"preco": 10})},
    ]
    gemini_server.stream_text('```json\n{"message": "Custa R$ 10."}\n```', 3)
    second = provider.generate_message(speak_input(history=history, tools=[PRICE_TOOL]))

    assert second.structured == {"message": "Custa R$ 10."}
    contents = gemini_server.requests[1].body["contents"]
    assert contents[1] == {"role": "model", "parts": [
        {"functionCall": {"id": "c-1", "name": "consultar_preco", "args": {"sku": "A1"}},
         "thoughtSignature": signature}]}
    assert contents[2] == {"role": "user", "parts": [
        {"functionResponse": {"id": "c-1", "name": "consultar_preco", "response": {"preco": 10}}}]}
    assert contents[3] == {"role": "user", "parts": [{"text": "O cliente disse: oi"}]}


def test_parallel_tool_results_travel_in_one_turn_and_text_results_are_wrapped(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text(envelope("ok"))
    history = [
        {"role": "assistant", "content": "deixa eu ver", "tool_calls": [
            {"id": "a", "toolName": "t1", "arguments": '{"x": 1}'}, {"id": "b", "toolName": "t2", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "a", "name": "t1", "content": "feito"},
        {"role": "tool", "tool_call_id": "b", "name": "t2", "content": "[1, 2]"},
    ]
    provider.generate_message(speak_input(history=history, prompt=""))
    contents = gemini_server.requests[0].body["contents"]
    assert contents[0]["parts"][0] == {"text": "deixa eu ver"}
    assert contents[0]["parts"][1]["functionCall"] == {"id": "a", "name": "t1", "args": {"x": 1}}
    assert contents[1] == {"role": "user", "parts": [
        {"functionResponse": {"id": "a", "name": "t1", "response": {"output": "feito"}}},
        {"functionResponse": {"id": "b", "name": "t2", "response": {"output": [1, 2]}}}]}
    assert len(contents) == 2  # an empty prompt adds no empty user turn


def test_gemini_3_takes_schema_and_tools_together(gemini_server, make_gemini):
    provider = make_gemini(model="gemini-3-flash")
    gemini_server.stream_text(envelope("ok"))
    provider.generate_message(speak_input(tools=[PRICE_TOOL]))
    sent = gemini_server.requests[0].body
    assert sent["generationConfig"]["responseJsonSchema"]["required"] == ["message", "nome", "tamanho"]
    assert "functionDeclarations" in sent["tools"][0]


def test_json_with_tools_prompt_forces_schema_in_prompt(gemini_server, make_gemini):
    provider = make_gemini(model="gemini-3-flash", json_with_tools="prompt")
    gemini_server.stream_text(envelope("ok"))
    gemini_server.stream_text(envelope("ok"))
    provider.generate_message(speak_input(tools=[PRICE_TOOL]))
    provider.generate_message(speak_input())
    with_tools, without = (r.body for r in gemini_server.requests)
    assert "responseJsonSchema" not in with_tools["generationConfig"]
    assert "responseJsonSchema" in without["generationConfig"]


def test_missing_call_id_becomes_call_index(gemini_server, make_gemini):
    provider = make_gemini()
    chunk = function_call_chunk("t1", {})
    chunk["candidates"][0]["content"]["parts"].append({"functionCall": {"name": "t2", "args": {"a": 1}}})
    gemini_server.push(Reply(chunks=[chunk]))
    calls = provider.generate_message(speak_input(tools=[PRICE_TOOL])).structured["toolCalls"]
    assert [(c["id"], c["toolName"]) for c in calls] == [("call_0", "t1"), ("call_1", "t2")]


# -- failures ----------------------------------------------------------------------------------


def failure(provider, server) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        provider.generate_message(speak_input())
    return caught.value


def test_429_with_retry_after_is_rate(gemini_server, make_gemini):
    provider = make_gemini(retries=0)
    gemini_server.error(429, error_body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
                        headers={"Retry-After": "7"})
    error = failure(provider, gemini_server)
    assert (error.kind, error.status, error.code, error.retry_after_ms) == (
        "rate", 429, "RESOURCE_EXHAUSTED", 7000)
    assert error.provider == "gemini" and error.is_transient


def test_429_with_gemini_retry_info_is_rate(gemini_server, make_gemini):
    provider = make_gemini(retries=0)
    gemini_server.error(429, error_body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).",
                                        [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}]))
    error = failure(provider, gemini_server)
    assert (error.kind, error.retry_after_ms) == ("rate", 2500)


def test_quota_wording_is_quota_even_on_429(gemini_server, make_gemini):
    provider = make_gemini(retries=0)
    gemini_server.error(429, error_body(429, "RESOURCE_EXHAUSTED",
                                        "You exceeded your current quota, please check your plan and billing details."))
    assert failure(provider, gemini_server).kind == "quota"


@pytest.mark.parametrize("status,name", [(500, "INTERNAL"), (503, "UNAVAILABLE"), (502, "BAD_GATEWAY")])
def test_server_errors_are_overload(gemini_server, make_gemini, status, name):
    provider = make_gemini(retries=0)
    gemini_server.error(status, error_body(status, name, "The model is overloaded. Please try again later."))
    error = failure(provider, gemini_server)
    assert (error.kind, error.status) == ("overload", status)


@pytest.mark.parametrize("status,name,message", [
    (401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
    (403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."),
    (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
])
def test_auth_failures_are_auth(gemini_server, make_gemini, status, name, message):
    provider = make_gemini()
    gemini_server.error(status, error_body(status, name, message))
    assert failure(provider, gemini_server).kind == "auth"
    assert len(gemini_server.requests) == 1  # never retried


def test_context_length_wording_is_context(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.error(400, error_body(400, "INVALID_ARGUMENT",
                                        "The input token count (1200000) exceeds the maximum number of tokens "
                                        "allowed (1048576)."))
    error = failure(provider, gemini_server)
    assert (error.kind, error.status) == ("context", 400)


def test_unknown_model_is_model(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.error(404, error_body(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta."))
    assert failure(provider, gemini_server).kind == "model"


def test_other_400_is_invalid(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.error(400, error_body(400, "INVALID_ARGUMENT", "Invalid JSON payload received."))
    assert failure(provider, gemini_server).kind == "invalid"


def test_dropped_connection_is_network(gemini_server, make_gemini):
    provider = make_gemini(retries=0)
    gemini_server.push(Reply(drop_after=0))
    assert failure(provider, gemini_server).kind == "network"


def test_connection_refused_is_network():
    provider = GeminiProvider(api_key="k", base_url="http://127.0.0.1:9", retries=0)
    try:
        with pytest.raises(ProviderError) as caught:
            provider.generate_message(speak_input())
        assert caught.value.kind == "network"
    finally:
        provider.close()


def test_idle_timeout_is_timeout(gemini_server, make_gemini):
    provider = make_gemini(retries=0, timeout_ms=150)
    gemini_server.push(Reply(chunks=text_chunks(envelope("tarde"), 1), delay_s=0.6))
    assert failure(provider, gemini_server).kind == "timeout"


def test_idle_timeout_counts_gaps_between_chunks_not_the_whole_reply(gemini_server, make_gemini):
    provider = make_gemini(retries=0, timeout_ms=400)
    gemini_server.push(Reply(chunks=text_chunks(envelope("devagar mas sempre"), 6), chunk_delay_s=0.15))
    assert provider.generate_message(speak_input()).structured["message"] == "devagar mas sempre"


def test_in_band_stream_error_is_classified(gemini_server, make_gemini):
    provider = make_gemini(retries=0)
    gemini_server.push(Reply(chunks=[error_body(503, "UNAVAILABLE", "The model is overloaded.")]))
    error = failure(provider, gemini_server)
    assert (error.kind, error.status) == ("overload", 503)


def test_empty_stream_is_overload(gemini_server, make_gemini):
    provider = make_gemini(retries=0)
    gemini_server.push(Reply(chunks=[{"candidates": [{"content": {"role": "model", "parts": []},
                                                      "finishReason": "STOP"}]}]))
    assert failure(provider, gemini_server).kind == "overload"


def test_blocked_prompt_is_content(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.push(Reply(chunks=[{"promptFeedback": {"blockReason": "SAFETY"}}]))
    assert failure(provider, gemini_server).kind == "content"
    assert len(gemini_server.requests) == 1


# -- retries and backups -----------------------------------------------------------------------


def test_transient_failures_are_retried_with_backoff(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=3, backoff_base_ms=10)
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    gemini_server.push(Reply(drop_after=0))
    gemini_server.stream_text(envelope("enfim"))

    assert provider.generate_message(speak_input()).structured["message"] == "enfim"
    assert len(gemini_server.requests) == 3
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 10 and 0 <= sleeps[1] <= 20  # full jitter under base * 2**attempt


def test_retries_stop_after_the_budget(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=2)
    for _ in range(3):
        gemini_server.error(500, error_body(500, "INTERNAL", "Internal error encountered."))
    assert failure(provider, gemini_server).kind == "overload"
    assert len(gemini_server.requests) == 3 and len(sleeps) == 2


def test_zero_retries_makes_exactly_one_call(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=0)
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    failure(provider, gemini_server)
    assert len(gemini_server.requests) == 1 and sleeps == []


def test_server_retry_after_is_honoured_within_the_cap(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=3)
    gemini_server.error(429, error_body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted."),
                        headers={"Retry-After": "2"})
    gemini_server.stream_text(envelope("ok"))
    provider.generate_message(speak_input())
    assert sleeps == [2000]


def test_retry_after_beyond_the_cap_stops_retrying(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=3, backoff_cap_ms=1000)
    gemini_server.error(429, error_body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted."),
                        headers={"Retry-After": "60"})
    error = failure(provider, gemini_server)
    assert (error.kind, error.retry_after_ms) == ("rate", 60_000)
    assert len(gemini_server.requests) == 1 and sleeps == []


def test_nothing_is_retried_after_output_was_emitted(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=3)
    gemini_server.push(Reply(chunks=text_chunks(envelope("uma resposta bem longa"), 5), drop_after=2))
    stream = provider.generate_message_stream(speak_input())
    first = next(stream)
    assert first.delta
    with pytest.raises(ProviderError) as caught:
        list(stream)
    assert caught.value.kind == "network"
    assert len(gemini_server.requests) == 1 and sleeps == []


def test_backup_model_answers_when_the_primary_is_overloaded(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=1, backup_models=["gemini-2.5-flash-lite"])
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    gemini_server.stream_text(envelope("do backup"))

    out = provider.generate_message(speak_input())

    assert out.structured["message"] == "do backup"
    assert out.metadata["model"] == "gemini-2.5-flash-lite"
    assert [r.model for r in gemini_server.requests] == ["gemini-2.5-flash", "gemini-2.5-flash",
                                                         "gemini-2.5-flash-lite"]


def test_backup_model_is_not_used_for_auth_failures(gemini_server, make_gemini):
    provider = make_gemini(backup_models=["gemini-2.5-flash-lite"])
    gemini_server.error(403, error_body(403, "PERMISSION_DENIED", "denied"))
    assert failure(provider, gemini_server).kind == "auth"
    assert len(gemini_server.requests) == 1


# -- async twins -------------------------------------------------------------------------------


def test_async_generate_message(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text(envelope("assíncrono"), 3, usage=USAGE)
    out = asyncio.run(provider.agenerate_message(speak_input()))
    assert out.structured["message"] == "assíncrono" and out.metadata["tokensUsed"] == 155


def test_async_stream_retries_then_streams_deltas(gemini_server, make_gemini, sleeps):
    provider = make_gemini(retries=2)
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    gemini_server.stream_text(envelope("um dois três quatro cinco seis sete oito nove dez"), 8)

    async def consume():
        decoder = StreamingMessageDecoder()
        deltas = []
        async for chunk in provider.agenerate_message_stream(speak_input()):
            _, delta = decoder.push(chunk.accumulated)
            if delta:
                deltas.append(delta)
        return deltas

    deltas = asyncio.run(consume())
    assert "".join(deltas) == "um dois três quatro cinco seis sete oito nove dez" and len(deltas) >= 3
    assert len(gemini_server.requests) == 2 and len(sleeps) == 1


def test_async_failure_is_classified(gemini_server, make_gemini):
    provider = make_gemini(retries=0)
    gemini_server.error(401, error_body(401, "UNAUTHENTICATED", "bad key"))
    with pytest.raises(ProviderError) as caught:
        asyncio.run(provider.agenerate_message(speak_input()))
    assert caught.value.kind == "auth"


def test_async_idle_timeout_and_drop_are_classified(gemini_server, make_gemini):
    provider = make_gemini(retries=0, timeout_ms=150)
    gemini_server.push(Reply(chunks=text_chunks(envelope("tarde"), 1), delay_s=0.6))
    gemini_server.push(Reply(drop_after=0))

    async def kinds():
        found = []
        for _ in range(2):
            try:
                await provider.agenerate_message(speak_input())
            except ProviderError as error:
                found.append(error.kind)
        return found

    assert asyncio.run(kinds()) == ["timeout", "network"]


def _no_threads(monkeypatch):
    """Make every way of running the call in a worker thread fail loudly."""
    import threading

    def refuse(*args, **kwargs):
        raise AssertionError("the async twin used a thread")

    loop_thread = threading.current_thread()
    start = threading.Thread.start

    def start_elsewhere(thread):  # the fake server's own handler threads may start
        if threading.current_thread() is loop_thread:
            refuse()
        return start(thread)

    monkeypatch.setattr(asyncio, "to_thread", refuse)
    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", refuse)
    monkeypatch.setattr(threading.Thread, "start", start_elsewhere)


def _spy_calls(provider, monkeypatch) -> list[str]:
    """Which SDK client ran the request: 'aio' (native async) or 'sync'."""
    calls: list[str] = []
    aio_models, sync_models = provider._client.aio.models, provider._client.models
    aio_stream, sync_stream = aio_models.generate_content_stream, sync_models.generate_content_stream

    async def aio_spy(**kwargs):
        calls.append("aio")
        return await aio_stream(**kwargs)

    def sync_spy(**kwargs):
        calls.append("sync")
        return sync_stream(**kwargs)

    monkeypatch.setattr(aio_models, "generate_content_stream", aio_spy)
    monkeypatch.setattr(sync_models, "generate_content_stream", sync_spy)
    return calls


def test_async_twins_use_the_sdk_async_client_and_no_thread(gemini_server, make_gemini, monkeypatch):
    provider = make_gemini(retries=1)
    calls = _spy_calls(provider, monkeypatch)
    gemini_server.stream_text(envelope("sem thread"), 2, usage=USAGE)
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    gemini_server.stream_text(envelope("de novo"), 4)

    async def run():
        _no_threads(monkeypatch)
        out = await provider.agenerate_message(speak_input())
        chunks = [c async for c in provider.agenerate_message_stream(speak_input())]
        return out, chunks

    out, chunks = asyncio.run(run())
    monkeypatch.undo()
    assert out.structured["message"] == "sem thread" and out.metadata["tokensUsed"] == 155
    assert chunks[-1].structured["message"] == "de novo" and len(chunks) >= 3
    assert calls == ["aio", "aio", "aio"]  # one answer, then a 503 retried, all on the async client
    assert all(r.stream for r in gemini_server.requests)  # the same SSE endpoint as the sync path


def test_async_calls_stay_on_httpx_with_aiohttp_installed_across_event_loops(gemini_server, make_gemini):
    """aiohttp is importable here (opensearch-py[async] brings it), which alone would move the
    SDK's async calls to aiohttp; the provider keeps them on httpx with a pool per event loop,
    so one provider serves one `asyncio.run()` after another."""
    import importlib.util

    from falai_django.providers.loop_transport import PerLoopTransport

    assert importlib.util.find_spec("aiohttp") is not None
    provider = make_gemini(retries=0)
    api = provider._client._api_client
    assert not api._use_aiohttp()
    transport = api._http_options.async_client_args["transport"]
    assert isinstance(transport, PerLoopTransport)
    for word in ("um", "dois", "três"):
        gemini_server.stream_text(envelope(word), 2)
        out = asyncio.run(provider.agenerate_message(speak_input()))
        assert out.structured["message"] == word
    assert len(transport._pools) <= 1  # the pools of the closed loops were let go
    gemini_server.push(Reply(drop_after=0))
    with pytest.raises(ProviderError) as caught:
        asyncio.run(provider.agenerate_message(speak_input()))
    assert caught.value.kind == "network"


def test_a_caller_async_client_setting_is_left_alone(gemini_server, make_gemini):
    provider = make_gemini(http_options={"async_client_args": {"timeout": 5}})
    assert "transport" not in provider._client._api_client._http_options.async_client_args


@pytest.mark.parametrize(("status", "reason", "kind", "requests"), [
    (401, "UNAUTHENTICATED", "auth", 1),
    (403, "PERMISSION_DENIED", "auth", 1),
    (400, "INVALID_ARGUMENT", "invalid", 1),
    (404, "NOT_FOUND", "model", 1),
    (429, "RESOURCE_EXHAUSTED", "rate", 3),
    (500, "INTERNAL", "overload", 3),
    (503, "UNAVAILABLE", "overload", 3),
])
def test_async_failures_are_classified_and_retried_as_the_sync_path(gemini_server, make_gemini, sleeps,
                                                                    status, reason, kind, requests):
    def attempt(call):
        gemini_server.requests.clear()
        sleeps.clear()
        for _ in range(3):
            gemini_server.error(status, error_body(status, reason, "nope"))
        with pytest.raises(ProviderError) as caught:
            call()
        while gemini_server.replies:  # what the call did not use
            gemini_server.replies.pop()
        return caught.value.kind, caught.value.status, len(gemini_server.requests), len(sleeps)

    provider = make_gemini(retries=2)
    sync = attempt(lambda: provider.generate_message(speak_input()))
    native = attempt(lambda: asyncio.run(provider.agenerate_message(speak_input())))
    streamed = attempt(lambda: asyncio.run(_drain(provider.agenerate_message_stream(speak_input()))))
    assert sync == native == streamed
    assert sync[0] == kind and sync[2] == requests


async def _drain(stream):
    return [chunk async for chunk in stream]


def test_async_call_can_be_cancelled_mid_request(gemini_server, make_gemini):
    provider = make_gemini(retries=0, timeout_ms=10_000)
    gemini_server.push(Reply(chunks=text_chunks(envelope("tarde demais"), 1), delay_s=2.0))
    gemini_server.stream_text(envelope("depois"), 1)

    async def run():
        task = asyncio.create_task(provider.agenerate_message(speak_input()))
        await asyncio.sleep(0.2)
        task.cancel()
        started = asyncio.get_running_loop().time()
        with pytest.raises(asyncio.CancelledError):
            await task
        return asyncio.get_running_loop().time() - started

    assert asyncio.run(run()) < 1.0  # the request was abandoned, not waited out
    assert provider.generate_message(speak_input()).structured["message"] == "depois"
