"""GeminiProvider and the common pipeline (engine-persistence-llm.md §5.1–§5.3), against the fake
Generative Language REST server of tests/providers/fake_gemini.py."""

from __future__ import annotations

import json

import pytest
from providers.fake_gemini import FakeGemini, Reply, error_body, function_call_chunk, text_chunks

from falai_django import GeminiProvider, ProviderError
from falai_django.llm.types import GenerateInput, GenerateParameters, ToolSpec, read_usage

SPEAK_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}, "nome": {"type": ["string", "null"]}},
    "required": ["message", "nome"],
    "additionalProperties": False,
}


@pytest.fixture
def server():
    fake = FakeGemini()
    yield fake
    fake.close()


@pytest.fixture
def make(server):
    made = []
    sleeps: list[float] = []

    def build(**options):
        options.setdefault("api_key", "k-123")
        options.setdefault("model", "gemini-2.5-flash")
        options.setdefault("base_url", server.base_url)
        options.setdefault("sleep", sleeps.append)
        provider = GeminiProvider(**options)
        provider.sleeps = sleeps
        made.append(provider)
        return provider

    yield build
    for p in made:
        p.close()


def req(prompt="Sou a Maria", *, system="Você é Ana.", history=(), schema=None, name="speak", tools=None,
        max_output_tokens=None, reasoning=None):
    return GenerateInput(
        prompt=prompt, system=system, history=list(history), tools=tools,
        parameters=GenerateParameters(json_schema=schema if schema is not None else {}, schema_name=name,
                                      max_output_tokens=max_output_tokens, reasoning=reasoning),
    )


# --------------------------------------------------------------------------- construction


def test_empty_api_key_error():
    with pytest.raises(Exception) as info:
        GeminiProvider(api_key="", model="gemini-2.5-flash")
    assert str(info.value).startswith("[GeminiProvider] apiKey is empty: the provider cannot authenticate.")


def test_empty_model_error():
    with pytest.raises(Exception) as info:
        GeminiProvider(api_key="k", model="")
    assert str(info.value).startswith("[GeminiProvider] model is empty: there is no default.")


def test_name_and_capabilities():
    p = GeminiProvider(api_key="k", model="gemini-2.5-flash")
    assert p.name == "gemini"
    c = p.capabilities
    assert all([c.supports_tools, c.supports_native_json_schema, c.supports_streaming,
                c.supports_streaming_tool_calls, c.supports_prompt_caching])
    p.close()


# --------------------------------------------------------------------------- the wire


def test_endpoint_header_and_model_prefix(server, make):
    server.stream_text("Oi!")
    p = make(model="models/gemini-2.5-flash")
    out = p.generate_message(req())
    assert out.message == "Oi!"
    rec = server.requests[0]
    assert rec.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert rec.headers["x-goog-api-key"] == "k-123"


def test_stream_uses_the_same_endpoint(server, make):
    server.stream_text("Olá, Maria!", pieces=3)
    chunks = list(make().generate_message_stream(req()))
    assert server.requests[0].path.endswith(":streamGenerateContent?alt=sse")
    *parts, last = chunks
    assert [c.delta for c in parts] == ["Olá,", " Ma", "ria!"] or "".join(c.delta for c in parts) == "Olá, Maria!"
    assert all(c.done is False for c in parts)
    acc = ""
    for c in parts:
        acc += c.delta
        assert c.accumulated == acc
    assert last.done is True and last.delta == "" and last.accumulated == "Olá, Maria!"


def test_messages_mapping(server, make):
    server.stream_text("ok")
    history = [
        {"role": "system", "content": "Resumo: falamos de preço."},
        {"role": "user", "content": "oi"},
        {"role": "assistant", "content": "Oi! Com quem eu falo?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "toolName": "agenda", "arguments": {"dia": 3}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "agenda", "content": "livre às 10h"},
        {"role": "tool", "tool_call_id": "c2", "name": "preco", "content": json.dumps({"valor": 10})},
        {"role": "assistant", "content": ""},
    ]
    make().generate_message(req(history=history))
    body = server.requests[0].body
    assert body["systemInstruction"]["parts"] == [{"text": "Você é Ana.\n\nResumo: falamos de preço."}]
    contents = body["contents"]
    assert contents[0] == {"role": "user", "parts": [{"text": "oi"}]}
    assert contents[1] == {"role": "model", "parts": [{"text": "Oi! Com quem eu falo?"}]}
    assert contents[2]["role"] == "model"
    call = contents[2]["parts"][0]["functionCall"]
    assert call["name"] == "agenda" and call["args"] == {"dia": 3}
    responses = [p["functionResponse"] for c in contents[3:-1] for p in c["parts"]]
    assert all(c["role"] == "user" for c in contents[3:-1])
    assert responses[0]["name"] == "agenda" and responses[0]["response"] == {"output": "livre às 10h"}
    assert responses[1]["name"] == "preco" and responses[1]["response"] == {"valor": 10}
    # the empty assistant turn is omitted; the prompt goes last as a user message
    assert contents[-1] == {"role": "user", "parts": [{"text": "Sou a Maria"}]}


def test_blank_system_is_not_sent(server, make):
    server.stream_text("ok")
    make().generate_message(req(system="   "))
    assert "systemInstruction" not in server.requests[0].body


def test_json_mode_and_its_absence(server, make):
    server.stream_text(json.dumps({"message": "Oi", "nome": None}))
    out = make().generate_message(req(schema=SPEAK_SCHEMA))
    gen = server.requests[0].body["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    assert gen["responseJsonSchema"]["properties"]["message"] == {"type": "string"}
    assert out.structured == {"message": "Oi", "nome": None}
    server.stream_text("texto livre")
    out2 = make().generate_message(req(schema={}, name=None))
    gen2 = server.requests[1].body.get("generationConfig", {})
    assert "responseMimeType" not in gen2 and "responseJsonSchema" not in gen2
    assert out2.message == "texto livre"


def test_tools_declarations(server, make):
    server.stream_text("ok")
    tools = [ToolSpec(id="agenda", description="Horários livres",
                      parameters={"type": "object", "properties": {"dia": {"type": "integer"}}}),
             ToolSpec(id="t2", name="preco")]
    make(model="gemini-3-flash").generate_message(req(tools=tools, schema=SPEAK_SCHEMA))
    decls = server.requests[0].body["tools"][0]["functionDeclarations"]
    assert decls[0]["name"] == "agenda" and decls[0]["description"] == "Horários livres"
    assert decls[0]["parametersJsonSchema"]["properties"] == {"dia": {"type": "integer"}}
    assert decls[1]["name"] == "preco" and decls[1]["parametersJsonSchema"] == {"type": "object"}
    assert "toolConfig" not in server.requests[0].body


def test_generation_config_max_tokens_and_effort(server, make):
    for effort, level in [("none", "MINIMAL"), ("low", "LOW"), ("medium", "MEDIUM"), ("high", "HIGH"),
                          ("max", "HIGH")]:
        server.stream_text("ok")
        make().generate_message(req(max_output_tokens=256, reasoning={"effort": effort}))
        gen = server.requests[-1].body["generationConfig"]
        assert gen["maxOutputTokens"] == 256
        assert gen["thinkingConfig"]["thinkingLevel"] == level
    server.stream_text("ok")
    make().generate_message(req())
    assert "thinkingConfig" not in server.requests[-1].body.get("generationConfig", {})


# --------------------------------------------------------------------------- the reply


def test_usage_and_finish_metadata(server, make):
    server.stream_text("Oi!", usage={"promptTokenCount": 100, "candidatesTokenCount": 7, "thoughtsTokenCount": 5,
                                     "cachedContentTokenCount": 40})
    out = make().generate_message(req())
    m = out.metadata
    assert m["model"] == "gemini-2.5-flash"
    assert m["finishReason"] == "stop"
    assert (m["promptTokens"], m["completionTokens"], m["cachedInputTokens"], m["tokensUsed"]) == (100, 12, 40, 112)
    assert read_usage(m) == {"promptTokens": 100, "completionTokens": 12, "cachedInputTokens": 40}


def test_no_usage_reported_stays_none(server, make):
    server.stream_text("Oi!")
    out = make().generate_message(req())
    assert read_usage(out.metadata) is None


@pytest.mark.parametrize(("finish", "mapped"), [("MAX_TOKENS", "length"), ("STOP", "stop"), ("OTHER", "stop"),
                                               ("SAFETY", "content_filter"), ("PROHIBITED_CONTENT", "content_filter")])
def test_finish_mapping(server, make, finish, mapped):
    server.stream_text("Oi", finish=finish)
    assert make().generate_message(req()).metadata["finishReason"] == mapped


def test_function_calls_become_tool_calls(server, make):
    server.push(Reply(chunks=[function_call_chunk("agenda", {"dia": 3}, text="deixa eu ver")]))
    out = make(retries=0).generate_message(req(tools=[ToolSpec(id="agenda")]))
    calls = out.structured["toolCalls"]
    assert [(c["toolName"], c["arguments"]) for c in calls] == [("agenda", {"dia": 3})]
    assert calls[0]["id"] == "call_0"
    assert out.structured["message"] == "deixa eu ver"
    assert out.metadata["finishReason"] == "tool_calls"


def test_thought_parts_are_reasoning_not_content(server, make):
    chunk = {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "pensando...", "thought": True}, {"text": "Oi!"}]}, "finishReason": "STOP"}]}
    server.push(Reply(chunks=[chunk]))
    out = make().generate_message(req())
    assert out.message == "Oi!"


def test_unparsable_envelope_is_never_shown(server, make):
    server.push(Reply(chunks=text_chunks('{"message": "Oi, tudo', 1)))
    with pytest.raises(Exception) as info:
        make(retries=0).generate_message(req(schema=SPEAK_SCHEMA))
    assert "No response from gemini" in str(info.value)


def test_fenced_json_is_parsed_leniently(server, make):
    server.stream_text('```json\n{"message": "Oi", "nome": "Ana"}\n```')
    out = make().generate_message(req(schema=SPEAK_SCHEMA))
    assert out.structured == {"message": "Oi", "nome": "Ana"}


# --------------------------------------------------------------------------- failures, retries, backups


def test_transient_failure_is_retried_then_succeeds(server, make):
    server.error(503, error_body(503, "UNAVAILABLE", "The model is overloaded."))
    server.stream_text("Oi!")
    p = make()
    assert p.generate_message(req()).message == "Oi!"
    assert len(server.requests) == 2 and len(p.sleeps) == 1
    assert 0 <= p.sleeps[0] <= 1000  # full jitter, base 1 s


def test_default_three_retries_make_four_attempts(server, make):
    for _ in range(4):
        server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    with pytest.raises(ProviderError) as info:
        make().generate_message(req())
    assert info.value.kind == "overload" and len(server.requests) == 4


def test_retries_zero_makes_one_call(server, make):
    server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    with pytest.raises(ProviderError):
        make(retries=0).generate_message(req())
    assert len(server.requests) == 1


def test_non_transient_failure_is_not_retried(server, make):
    server.error(400, error_body(400, "INVALID_ARGUMENT", "bad request field"))
    with pytest.raises(ProviderError) as info:
        make().generate_message(req())
    assert info.value.kind == "invalid" and info.value.status == 400 and len(server.requests) == 1


def test_retry_info_is_honoured_under_the_cap_and_stops_retrying_above_it(server, make):
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}]
    server.error(429, error_body(429, "RESOURCE_EXHAUSTED", "slow down", details))
    server.stream_text("ok")
    p = make()
    p.generate_message(req())
    assert p.sleeps == [2000]
    long = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "52s"}]
    server.error(429, error_body(429, "RESOURCE_EXHAUSTED", "slow down", long))
    with pytest.raises(ProviderError) as info:
        make().generate_message(req())
    assert info.value.kind == "rate" and info.value.retry_after_ms == 52_000
    assert len(server.requests) == 3


def test_backup_models_on_overload_rate_or_model(server, make):
    server.error(404, error_body(404, "NOT_FOUND", "models/gemini-x is not found"))
    server.stream_text("from backup")
    p = make(model="gemini-x", backup_models=["gemini-2.5-flash"])
    out = p.generate_message(req())
    assert out.message == "from backup"
    assert [r.model for r in server.requests] == ["gemini-x", "gemini-2.5-flash"]
    assert out.metadata["model"] == "gemini-2.5-flash"


def test_no_backup_on_invalid(server, make):
    server.error(400, error_body(400, "INVALID_ARGUMENT", "bad"))
    with pytest.raises(ProviderError):
        make(backup_models=["gemini-2.0-flash"]).generate_message(req())
    assert len(server.requests) == 1


def test_in_band_error_unknown_is_floored_to_overload(server, make):
    server.push(Reply(chunks=[{"error": {"code": 200, "message": "something odd", "status": "WEIRD"}}]))
    with pytest.raises(ProviderError) as info:
        make(retries=0).generate_message(req())
    assert info.value.kind == "overload"


def test_empty_stream_fails_overload_and_is_retried(server, make):
    server.push(Reply(chunks=[{"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]}]))
    server.stream_text("ok")
    assert make().generate_message(req()).message == "ok"
    assert len(server.requests) == 2


def test_no_retry_after_output_was_emitted(server, make):
    chunks = text_chunks("Olá, tudo bem?", 3)
    server.push(Reply(chunks=chunks, drop_after=1))
    server.stream_text("never")
    p = make()
    got = []
    with pytest.raises(ProviderError):
        for c in p.generate_message_stream(req()):
            got.append(c.delta)
    assert got and len(server.requests) == 1


def test_retry_config_translates_upstreams_option(server, make):
    server.error(503, error_body(503, "UNAVAILABLE", "overloaded"))
    with pytest.raises(ProviderError):
        make(retry_config={"retries": 0, "timeout": 0}).generate_message(req())
    assert len(server.requests) == 1


def test_thought_signature_is_replayed_and_tool_results_wrap_non_objects(server, make):
    server.stream_text("ok")
    history = [
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "toolName": "agenda", "arguments": {"d": 1}, "thoughtSignature": "c2ln"}]},
        {"role": "tool", "tool_call_id": "c1", "name": "agenda", "content": "[1, 2]"},
    ]
    make().generate_message(req(history=history))
    contents = server.requests[0].body["contents"]
    part = contents[0]["parts"][0]
    assert part["functionCall"] == {"id": "c1", "name": "agenda", "args": {"d": 1}}
    assert part["thoughtSignature"] == "c2ln"
    assert contents[1]["parts"][0]["functionResponse"]["response"] == {"output": [1, 2]}


def test_gemini_2_with_tools_puts_the_schema_in_the_prompt(server, make):
    server.stream_text('{"message": "Oi"}')
    out = make(model="gemini-2.5-flash").generate_message(req(tools=[ToolSpec(id="agenda")], schema=SPEAK_SCHEMA))
    body = server.requests[0].body
    gen = body.get("generationConfig", {})
    assert "responseJsonSchema" not in gen and "responseMimeType" not in gen
    assert '"message"' in body["systemInstruction"]["parts"][0]["text"]
    assert out.structured["message"] == "Oi"


def test_gemini_3_takes_both_unless_json_with_tools_prompt(server, make):
    server.stream_text('{"message": "Oi"}')
    server.stream_text('{"message": "Oi"}')
    server.stream_text('{"message": "Oi"}')
    make(model="gemini-3-flash").generate_message(req(tools=[ToolSpec(id="agenda")], schema=SPEAK_SCHEMA))
    assert "responseJsonSchema" in server.requests[0].body["generationConfig"]
    forced = make(model="gemini-3-flash", json_with_tools="prompt")
    forced.generate_message(req(tools=[ToolSpec(id="agenda")], schema=SPEAK_SCHEMA))
    assert "responseJsonSchema" not in server.requests[1].body.get("generationConfig", {})
    forced.generate_message(req(schema=SPEAK_SCHEMA))  # calls without tools are unchanged
    assert "responseJsonSchema" in server.requests[2].body["generationConfig"]


def test_async_twin_streams_too(server, make):
    import asyncio

    server.stream_text("Olá!", pieces=2)
    p = make()

    async def go():
        return [c async for c in p.agenerate_message_stream(req())]

    chunks = asyncio.run(go())
    assert chunks[-1].done and chunks[-1].accumulated == "Olá!"


def test_request_config_defaults_reach_generation_config(server, make):
    server.stream_text("ok")
    p = make(config={"temperature": 0.2, "topP": 0.9, "maxTokens": 300, "stopSequences": ["FIM"], "effort": "high"})
    p.generate_message(req())
    gen = server.requests[0].body["generationConfig"]
    assert gen["temperature"] == 0.2 and gen["topP"] == 0.9
    assert gen["maxOutputTokens"] == 300 and gen["stopSequences"] == ["FIM"]
    assert gen["thinkingConfig"] == {"thinkingLevel": "HIGH"}
    server.stream_text("ok")
    p.generate_message(req(max_output_tokens=50))  # the call's maxOutputTokens wins over the default
    assert server.requests[1].body["generationConfig"]["maxOutputTokens"] == 50


def test_in_band_rate_error_keeps_its_kind_and_retry_delay(server, make):
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}]
    server.push(Reply(chunks=[{"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED",
                                         "details": details}}]))
    server.stream_text("ok")
    p = make()
    assert p.generate_message(req()).message == "ok"
    assert p.sleeps == [3000]
    server.push(Reply(chunks=[{"error": {"code": 400, "message": "bad thing", "status": "INVALID_ARGUMENT"}}]))
    with pytest.raises(ProviderError) as info:
        make().generate_message(req())
    assert info.value.kind == "invalid"


def test_the_sdk_base_url_environment_variable_is_honoured(server, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
    server.stream_text("via env")
    p = GeminiProvider(api_key="k-env", model="gemini-2.5-flash", retries=0)
    try:
        assert p.generate_message(req()).message == "via env"
    finally:
        p.close()
    assert server.requests[0].headers["x-goog-api-key"] == "k-env"


def test_idle_timeout_before_the_first_byte_is_a_retried_timeout(server, make):
    server.push(Reply(chunks=text_chunks("tarde demais", 1), delay_s=1.0))
    server.stream_text("a tempo")
    p = make(timeout_ms=300, retries=1)
    assert p.generate_message(req()).message == "a tempo"
    assert len(server.requests) == 2 and len(p.sleeps) == 1
    server.push(Reply(chunks=text_chunks("tarde demais", 1), delay_s=1.0))
    with pytest.raises(ProviderError) as info:
        make(retry_config={"timeout": 300, "retries": 0}).generate_message(req())
    assert info.value.kind == "timeout"


def test_an_echoed_api_key_never_leaves_in_the_error(server, make):
    server.error(400, error_body(400, "INVALID_ARGUMENT", "bad request for key=k-123"))
    with pytest.raises(ProviderError) as info:
        make().generate_message(req())
    err = info.value
    assert "k-123" not in str(err) and "k-123" not in str(err.body or "")
    assert err.kind == "invalid" and err.__cause__ is None
