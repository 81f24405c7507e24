"""End to end: `turn()` and `turn_stream()` over the real GeminiProvider talking to the fake
Gemini REST server (tests/providers/fake_gemini.py): the understand and speak envelopes, a
tool round echoing Gemini's thought signature, and streamed deltas."""

from __future__ import annotations

import json

import pytest
from providers.fake_gemini import FakeGemini, Reply, function_call_chunk
from scenarios.kit import make_agent, triage_flow

from falai_django.providers.gemini import GeminiProvider


@pytest.fixture
def gemini():
    server = FakeGemini()
    provider = GeminiProvider(api_key="test-key", base_url=server.base_url, model="gemini-2.5-flash",
                              sleep=lambda ms: None, backoff_base_ms=1)
    yield server, provider
    provider.close()
    server.close()


def with_provider(agent, provider):
    agent.provider = provider
    return agent


def test_a_message_turn_over_gemini(gemini):
    server, provider = gemini
    server.stream_text(json.dumps({"fields": {"nome": "Ana", "empresa": None, "tamanho": None}}))
    server.stream_text(json.dumps({"message": "Oi, Ana! De qual empresa você fala?", "empresa": None}), pieces=5)
    agent, _, _ = make_agent([triage_flow()])
    with_provider(agent, provider)
    r = agent.turn(session_id="s1", message="oi, sou a Ana", id="m1")
    assert r.llm_calls == 2 and r.session.data == {"nome": "Ana"}
    assert [m.text for m in r.messages] == ["Oi, Ana! De qual empresa você fala?"]
    understand_body, speak_body = server.requests[0].body, server.requests[1].body
    assert understand_body["generationConfig"]["responseMimeType"] == "application/json"
    assert "empresa" in json.dumps(speak_body["generationConfig"].get("responseJsonSchema")
                                   or speak_body["generationConfig"].get("responseSchema"))


def test_a_streamed_turn_with_a_tool_round_over_gemini(gemini):
    server, provider = gemini
    flow = {"id": "saldo", "name": "Saldo", "on": [{"message": []}], "steps": [{"id": "s", "prompt": "Informe o saldo."}]}
    tool = {"id": "consulta", "description": "Saldo da conta.", "is_read_only": lambda a: True,
            "parameters": {"type": "object", "properties": {"conta": {"type": "string"}}, "required": ["conta"]},
            "handler": lambda args, ctx: {"value": {"saldo": 10}}}
    server.push(Reply(chunks=[function_call_chunk("consulta", {"conta": "9"}, thought_signature="c2ln")]))
    server.stream_text(json.dumps({"message": "Seu saldo é R$ 10."}), pieces=6)
    agent, _, _ = make_agent([flow], fields={}, tools=[tool])
    with_provider(agent, provider)
    chunks = list(agent.turn_stream(session_id="s1", message="meu saldo, conta 9", id="m1"))
    result = chunks[-1]["result"]
    assert "".join(c.get("delta", "") for c in chunks[:-1]) == "Seu saldo é R$ 10."
    assert [m.text for m in result.messages] == ["Seu saldo é R$ 10."] and result.llm_calls == 2
    second = server.requests[1].body
    calls = [p for c in second["contents"] for p in c["parts"] if "functionCall" in p or "function_call" in p]
    assert calls and any(p.get("thoughtSignature") or p.get("thought_signature") for p in calls)


def test_gemini_token_usage_is_summed_into_the_turn_usage(gemini):
    # Each call's usageMetadata (thought tokens count as completion) is added up in r.usage.
    server, provider = gemini
    server.stream_text(json.dumps({"fields": {"nome": "Ana", "empresa": None, "tamanho": None}}),
                       usage={"promptTokenCount": 100, "candidatesTokenCount": 7, "totalTokenCount": 107})
    server.stream_text(json.dumps({"message": "Oi, Ana!", "empresa": None}), pieces=3,
                       usage={"promptTokenCount": 200, "candidatesTokenCount": 10, "thoughtsTokenCount": 5,
                              "cachedContentTokenCount": 150, "totalTokenCount": 215})
    agent, _, _ = make_agent([triage_flow()])
    with_provider(agent, provider)
    r = agent.turn(session_id="s1", message="oi, sou a Ana", id="m1")
    assert r.llm_calls == 2
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.cached_input_tokens) == (300, 22, 150)


def test_an_understand_failure_over_gemini_raises_and_leaves_the_input_untouched(gemini):
    from providers.fake_gemini import error_body

    from falai_django import ProviderError

    server, provider = gemini
    server.stream_text(json.dumps({"fields": {"nome": "Ana", "empresa": None, "tamanho": None}}))
    server.stream_text(json.dumps({"message": "Oi, Ana! De qual empresa você fala?", "empresa": None}))
    agent, _, _ = make_agent([triage_flow()])
    with_provider(agent, provider)
    session = agent.turn(session_id="s1", message="oi, sou a Ana", id="m1").session
    before = session.to_json()
    server.error(401, error_body(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."))
    with pytest.raises(ProviderError) as info:
        agent.turn(session_id="s1", message="da ACME", id="m2", session=session)
    assert info.value.kind == "auth"
    assert len(server.requests) == 3  # the failed understand call only: no retry, no speak call
    assert session.to_json() == before  # nothing ran, nothing to save: the host retries the same input


def test_the_retry_ladder_over_six_failing_gemini_speak_calls():
    # engine-turn.md §8 (7) over the wire: each 503 from the speak call re-parks the talk step at
    # +1m, +5m, +15m, +1h, +6h under `<run>:<step>:<visit>:retry:<ms>`; the sixth ends the run failed.
    from providers.fake_gemini import error_body
    from scenarios.kit import Host

    from falai_django.engine.jstime import to_ms

    server = FakeGemini()
    provider = GeminiProvider(api_key="test-key", base_url=server.base_url, retries=0)
    try:
        server.stream_text(json.dumps({"fields": {"nome": None, "empresa": None, "tamanho": None}}))
        for _ in range(6):
            server.error(503, error_body(503, "UNAVAILABLE", "The model is overloaded. Please try again later."))
        agent, _, clock = make_agent([triage_flow()])
        with_provider(agent, provider)
        host = Host(agent, clock)
        r = host.message("oi", "m1")
        for delay in (60_000, 300_000, 900_000, 3_600_000, 21_600_000):
            line = r.outcomes[-1]
            assert (line.status, line.code, line.key) == ("deferred", "provider-unavailable", "triagem#m1:quem:1")
            (entry,) = r.schedule
            assert entry.key == f"triagem#m1:quem:1:retry:{to_ms(clock.now()) + delay}"
            assert r.messages == []
            clock.advance(delay)
            (r,) = host.fire_due()
            assert r.llm_calls == 1
        line = r.outcomes[-1]
        assert (line.status, line.code) == ("failed", "provider-unavailable")
        assert [e.reason for e in r.ended] == ["failed"] and r.schedule == [] and r.session.runs == []
        assert len(server.requests) == 7  # one understand call, six speak calls: the provider never retried
    finally:
        provider.close()
        server.close()
