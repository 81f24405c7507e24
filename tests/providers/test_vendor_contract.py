"""The provider contract (§5.1, §5.2) for every vendor flavor, each on its real SDK against a fake
server speaking its wire: structured answers, streamed deltas of the `message` field, tool
rounds, usage, the lenient envelope reader, retries, backup models, failure kinds, native
async, and an API key that never leaks."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from falai_django.engine.errors import ProviderError
from falai_django.llm.jsonparse import envelope_of
from falai_django.llm.streaming import StreamingMessageDecoder
from falai_django.llm.types import GenerateInput, GenerateParameters, ToolSpec, read_usage
from falai_django.testing.postgres import free_port

from . import fake_vendors as fv
from .vendor_kit import FLAVOR_IDS, SECRET, envelope, flavors, speak_input

FLAVORS = {f.id: f for f in flavors()}


@pytest.fixture(params=FLAVOR_IDS)
def flavor(request):
    return FLAVORS[request.param]


@pytest.fixture
def make(flavor, server, sleeps):
    made = []

    def build(**options):
        options.setdefault("sleep", sleeps.append)
        options.setdefault("backoff_base_ms", 1)
        provider = flavor.make(server, **options)
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.close()


def failure(provider, request=None) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        provider.generate_message(request or speak_input())
    return info.value


# -- answers -------------------------------------------------------------------------------------


def test_structured_answer_with_usage(flavor, server, make):
    provider = make()
    server.stream(flavor.text(envelope("Olá, Ana aqui!", nome="Rui"), 3, usage=(120, 30, 100)))

    out = provider.generate_message(speak_input())

    assert out.structured == {"message": "Olá, Ana aqui!", "nome": "Rui"}
    assert json.loads(out.message) == out.structured
    assert out.metadata["model"] == flavor.model and out.metadata["finishReason"] == "stop"
    assert read_usage(out.metadata) == {"promptTokens": 120, "completionTokens": 30, "cachedInputTokens": 100}
    assert out.metadata["tokensUsed"] == 150
    [sent] = server.requests
    assert sent.path == flavor.endpoint
    assert SECRET in (sent.headers.get("authorization", "") + sent.headers.get("x-api-key", ""))
    assert json.dumps(sent.body, ensure_ascii=False).count("Você é Ana, da loja.") == 1  # the system text, once
    assert "O cliente disse: oi" in json.dumps(sent.body, ensure_ascii=False)


def test_usage_is_absent_when_the_vendor_counts_nothing(flavor, server, make):
    if flavor.id == "anthropic":
        pytest.skip("Anthropic always reports usage in message_start")
    provider = make()
    server.stream(flavor.text(envelope("sem contagem")))
    out = provider.generate_message(speak_input())
    assert read_usage(out.metadata) is None and "tokensUsed" not in out.metadata


def test_streamed_answer_yields_the_message_field_in_order(flavor, server, make):
    provider = make()
    message = "Claro! Temos três tamanhos, e o envio sai amanhã."
    server.stream(flavor.text(envelope(message), 12, usage=(10, 20, 0)))

    chunks = list(provider.generate_message_stream(speak_input()))

    assert len(chunks) >= 10 and all(not c.done for c in chunks[:-1]) and chunks[-1].done
    assert "".join(c.delta for c in chunks) == chunks[-1].accumulated == envelope(message)
    decoder, shown = StreamingMessageDecoder(), []
    for chunk in chunks[:-1]:
        _, delta = decoder.push(chunk.accumulated)
        shown.append(delta)
    assert "".join(shown) == message and sum(1 for d in shown if d) >= 5  # it arrived piece by piece
    assert chunks[-1].structured["message"] == message and chunks[-1].metadata["completionTokens"] == 20


def test_plain_text_without_a_schema_is_the_message(flavor, server, make):
    provider = make()
    server.stream(flavor.text("Resumo: cliente quer 3 camisetas.", 2))
    out = provider.generate_message(GenerateInput(prompt="resuma"))
    assert out.message == "Resumo: cliente quer 3 camisetas." and out.structured is None
    body = json.dumps(server.requests[0].body)
    assert "json_schema" not in body and "json_object" not in body and "JSON schema" not in body


def test_fenced_envelope_is_read_leniently(flavor, server, make):
    provider = make()
    server.stream(flavor.text("```json\n" + envelope("cercado") + "\n```", 2))
    assert provider.generate_message(speak_input()).structured["message"] == "cercado"


def test_prose_around_the_envelope_is_read_by_the_engine(flavor, server, make):
    provider = make()
    server.stream(flavor.text("Aqui está: " + envelope("embutido") + " fim.", 2))
    out = provider.generate_message(speak_input())
    assert out.structured is None  # not JSON as a whole ...
    assert envelope_of(out.structured, out.message)["message"] == "embutido"  # ... but the envelope is found


def test_broken_envelope_is_never_shown_and_fails(flavor, server, make):
    provider = make(retries=0)
    server.stream(flavor.text('{"message": "corta', 2))
    error = failure(provider)
    assert error.kind == "unknown" and "No response" in str(error)


# -- tool rounds ---------------------------------------------------------------------------------


def test_tool_round(flavor, server, make):
    provider = make()
    tools = [ToolSpec(id="preco", description="Preço de um produto",
                      parameters={"type": "object", "properties": {"sku": {"type": "string"}}})]
    server.stream(flavor.calls([{"id": "call_a", "name": "preco", "arguments": {"sku": "C-1"}},
                                {"id": "call_b", "name": "preco", "arguments": {"sku": "C-2"}}]))

    first = provider.generate_message(speak_input(tools=tools))

    assert first.metadata["finishReason"] == "tool_calls"
    assert first.structured["toolCalls"] == [
        {"id": "call_a", "toolName": "preco", "arguments": {"sku": "C-1"}},
        {"id": "call_b", "toolName": "preco", "arguments": {"sku": "C-2"}},
    ]
    sent = json.dumps(server.requests[0].body, ensure_ascii=False)
    assert "Preço de um produto" in sent and '"sku"' in sent

    # the round's results go back; the model answers
    history = [*speak_input().history,
               {"role": "assistant", "content": "", "tool_calls": first.structured["toolCalls"]},
               {"role": "tool", "tool_call_id": "call_a", "name": "preco", "content": {"preco": 59.9}},
               {"role": "tool", "tool_call_id": "call_b", "name": "preco", "content": "esgotado"}]
    server.stream(flavor.text(envelope("A C-1 custa R$ 59,90; a C-2 esgotou.")))
    second = provider.generate_message(speak_input(history=history, tools=tools))

    assert second.structured["message"] == "A C-1 custa R$ 59,90; a C-2 esgotou."
    replay = json.dumps(server.requests[1].body, ensure_ascii=False)
    for needle in ("call_a", "call_b", "59.9", "esgotado", '\\"sku\\": \\"C-1\\"' if flavor.id != "anthropic"
                   else '"sku": "C-1"'):
        assert needle in replay, needle


# -- failures ------------------------------------------------------------------------------------


def test_rate_limit_with_retry_after_is_rate_and_honoured(flavor, server, make, sleeps):
    provider = make(retries=1)
    server.error(429, flavor.rate_body, {"retry-after": "7"})
    server.stream(flavor.text(envelope("depois da espera")))
    assert provider.generate_message(speak_input()).structured["message"] == "depois da espera"
    assert sleeps == [7000.0] and len(server.requests) == 2

    server.error(429, flavor.rate_body, {"retry-after": "7"})
    error = failure(make(retries=0))
    assert (error.kind, error.status, error.retry_after_ms) == ("rate", 429, 7000)
    assert error.provider == provider.name


def test_server_overload_is_retried_then_surfaces_as_overload(flavor, server, make, sleeps):
    provider = make(retries=2)
    for _ in range(3):
        server.error(flavor.overload_status, flavor.overload_body)
    error = failure(provider)
    assert error.kind == "overload" and error.status == flavor.overload_status
    assert len(server.requests) == 3 and len(sleeps) == 2


def test_retry_after_beyond_the_cap_stops_retrying(flavor, server, make, sleeps):
    provider = make(retries=3, backoff_cap_ms=5_000)
    server.error(429, flavor.rate_body, {"retry-after": "60"})
    assert failure(provider).kind == "rate" and len(server.requests) == 1 and sleeps == []


def test_in_band_stream_error_is_classified(flavor, server, make):
    provider = make(retries=0)
    server.stream(flavor.stream_error("server_error" if flavor.id != "anthropic" else "api_error",
                                      "Internal server error"))
    assert failure(provider).kind == "overload"


def test_nothing_is_retried_after_output_was_emitted(flavor, server, make, sleeps):
    provider = make(retries=3)
    server.push(fv.Reply(events=flavor.text(envelope("metade"), 6), drop_after=4))
    with pytest.raises(ProviderError) as info:
        list(provider.generate_message_stream(speak_input()))
    assert info.value.kind == "network" and len(server.requests) == 1 and sleeps == []


def test_dropped_connection_is_network(flavor, server, make):
    server.push(fv.Reply(drop_after=0))
    assert failure(make(retries=0)).kind == "network"


def test_connection_refused_is_network(flavor):
    port = free_port()  # nothing listens there
    provider = flavor.factory(api_key=SECRET, model=flavor.model, base_url=f"http://127.0.0.1:{port}", retries=0,
                              **flavor.options)
    try:
        assert failure(provider).kind == "network"
    finally:
        provider.close()


def test_idle_timeout_is_timeout(flavor, server, make):
    provider = make(retries=0, timeout_ms=200)
    server.push(fv.Reply(events=flavor.text(envelope("tarde")), delay_s=0.6))
    assert failure(provider).kind == "timeout"


def test_backup_model_answers_when_the_primary_is_overloaded(flavor, server, make):
    provider = make(retries=0, backup_models=["reserva-1"])
    server.error(flavor.overload_status, flavor.overload_body)
    server.stream(flavor.text(envelope("pela reserva")))
    out = provider.generate_message(speak_input())
    assert out.structured["message"] == "pela reserva" and out.metadata["model"] == "reserva-1"
    assert [r.body["model"] for r in server.requests] == [flavor.model, "reserva-1"]


def test_auth_failure_is_auth_and_not_retried_nor_backed_up(flavor, server, make, sleeps):
    provider = make(retries=3, backup_models=["reserva-1"])
    body = (fv.anthropic_error("authentication_error", "invalid x-api-key") if flavor.id == "anthropic"
            else fv.openai_error("Incorrect API key provided: sk-test-***", "invalid_request_error", "invalid_api_key"))
    server.error(401, body)
    assert failure(provider).kind == "auth" and len(server.requests) == 1 and sleeps == []


# -- secrets -------------------------------------------------------------------------------------


def test_the_api_key_never_reaches_a_log_an_error_or_a_repr(flavor, server, make, caplog):
    provider = make(retries=1)
    echo = {"error": {"message": f"bad key {SECRET} echoed by a proxy", "type": "invalid_request_error"}}
    server.error(400, echo)
    server.stream(flavor.text(envelope("ok")))
    server.stream(flavor.text(envelope("ok"), 3))
    with caplog.at_level(logging.DEBUG):
        error = failure(provider)
        provider.generate_message(speak_input())
        list(provider.generate_message_stream(speak_input()))
    assert error.kind == "invalid"
    texts = [str(error), repr(error), str(error.body), repr(provider), str(provider),
             *(record.getMessage() for record in caplog.records)]
    assert caplog.records, "the SDK's debug logging ran"
    assert not [t for t in texts if SECRET in t]
    assert error.__cause__ is None and error.__suppress_context__  # the original (with the key) is not chained


# -- async ---------------------------------------------------------------------------------------


def _no_threads(monkeypatch):
    import threading

    loop_thread = threading.current_thread()
    start = threading.Thread.start

    def refuse(*args, **kwargs):
        raise AssertionError("the async twin used a thread")

    async def probe_only(func, *args, **kwargs):
        # the SDKs read the OS name once per client off the loop (`get_platform`); nothing else may hop
        if getattr(func, "__name__", "") != "get_platform":
            refuse()
        return func(*args, **kwargs)  # answered inline: the trap stays armed for everything else

    def start_elsewhere(thread):
        if threading.current_thread() is loop_thread:
            refuse()
        return start(thread)

    monkeypatch.setattr(asyncio, "to_thread", probe_only)
    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", refuse)
    monkeypatch.setattr(threading.Thread, "start", start_elsewhere)


def test_async_twins_run_on_the_native_async_client(flavor, server, make, sleeps, monkeypatch):
    provider = make(retries=1)
    server.stream(flavor.text(envelope("sem thread"), 3, usage=(5, 6, 0)))
    server.error(flavor.overload_status, flavor.overload_body)
    server.stream(flavor.text(envelope("de novo"), 4))

    async def run():
        _no_threads(monkeypatch)
        out = await provider.agenerate_message(speak_input())
        chunks = [c async for c in provider.agenerate_message_stream(speak_input())]
        await provider.aclose()
        return out, chunks

    out, chunks = asyncio.run(run())
    monkeypatch.undo()
    assert out.structured["message"] == "sem thread" and out.metadata["tokensUsed"] == 11
    assert chunks[-1].structured["message"] == "de novo" and len(chunks) >= 4 and len(sleeps) == 1
    assert server.requests[0].headers.get("x-stainless-async", "").startswith("async")


def test_async_failure_is_classified(flavor, server, make):
    provider = make(retries=0)
    server.error(429, flavor.rate_body, {"retry-after": "3"})

    async def run():
        try:
            await provider.agenerate_message(speak_input())
        finally:
            await provider.aclose()

    with pytest.raises(ProviderError) as info:
        asyncio.run(run())
    assert (info.value.kind, info.value.retry_after_ms) == ("rate", 3000)


def test_construction_refuses_an_empty_key_or_model(flavor):
    with pytest.raises(ValueError, match=r"apiKey is empty"):
        flavor.factory(api_key=" ", model=flavor.model, **flavor.options)
    with pytest.raises(ValueError, match=r"model is empty: there is no default"):
        flavor.factory(api_key="k", model="", **flavor.options)


def test_max_output_tokens_and_effort_reach_the_wire(flavor, server, make):
    provider = make(config={"temperature": 0.3})
    server.stream(flavor.text(envelope("ok")))
    provider.generate_message(speak_input(parameters=GenerateParameters(
        json_schema={}, max_output_tokens=321, reasoning={"effort": "low"})))
    body = server.requests[0].body
    assert 321 in (body.get("max_output_tokens"), body.get("max_tokens")) or body.get("max_tokens", 0) > 1024
    effort = body.get("reasoning", {}).get("effort") or body.get("reasoning_effort") or body.get("thinking")
    assert effort in ("low", {"type": "enabled", "budget_tokens": 1024})
    if flavor.id != "anthropic":
        assert body["temperature"] == 0.3
    else:
        assert "temperature" not in body  # extended thinking refuses a temperature
