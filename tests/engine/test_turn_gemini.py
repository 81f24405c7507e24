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
