"""Scenario: a prompt step reached by a wake speaks first (no understand call, the "speak
first" situation), and a retry wake of a failed answer says the message has no answer yet."""

from __future__ import annotations

from falai_django import ProviderError, user_message

from .kit import T0_MS, Host, make_agent

CHECKIN = {"id": "checkin", "name": "Check-in", "on": [{"event": "compra", "after": "2h"}],
           "steps": [{"id": "pergunta", "prompt": "Pergunte se o pedido chegou bem."}]}


def test_event_wake_reaches_a_prompt_that_speaks_first():
    agent, provider, clock = make_agent([CHECKIN], fields={}, events={"compra": {}},
                                        speak=[{"message": "Oi! Seu pedido chegou bem?"}])
    host = Host(agent, clock)
    r = host.handle(event="compra", key="pedido:9", payload={"pedido": 9})
    assert r.llm_calls == 0 and r.outcomes[0].code == "awaiting-trigger"
    clock.advance("2h")
    (w,) = host.fire_due()
    assert w.llm_calls == 1 and provider.names() == ["speak"]
    assert [(m.kind, m.key) for m in w.messages] == [("ai", "checkin#pedido:9:pergunta:1")]
    prompt = provider.calls[0].prompt
    assert "## Situation\nThere is no new message from the customer. You speak first" in prompt
    assert "Pergunte se o pedido chegou bem." in prompt
    assert w.session.last_assistant_at is not None
    assert [e.reason for e in w.ended] == ["end"]  # a prompt without collect speaks once and moves on
    assert w.outcomes[-1].llm_calls == 1


def test_retry_wake_answers_the_unanswered_message():
    flow = {"id": "duvida", "name": "Dúvida", "on": [{"message": []}], "steps": [{"id": "responde", "prompt": "Responda."}]}
    agent, provider, clock = make_agent([flow], fields={},
                                        speak=[ProviderError("mock", "timeout", "slow"), {"message": "Respondendo!"}])
    r = agent.turn(session_id="s1", message="vocês abrem domingo?", id="m1")
    (entry,) = r.schedule
    assert entry.key == f"duvida#m1:responde:1:retry:{T0_MS + 60_000}"
    clock.advance("1m")
    w = agent.turn(session_id="s1", wake=entry.key, session=r.session, history=[user_message("vocês abrem domingo?")])
    assert [(m.key, m.text) for m in w.messages] == [("duvida#m1:responde:1", "Respondendo!")]
    assert "has no answer yet. Answer it now." in provider.calls[-1].prompt
