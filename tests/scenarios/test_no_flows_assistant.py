"""Scenario: an agent with no flows: the idle speaker answers every message."""

from __future__ import annotations

from falai_django import ProviderError

from .kit import Host, make_agent


def test_idle_speaker_answers_with_one_call():
    agent, provider, clock = make_agent([], fields={}, idle={"prompt": "Responda com simpatia."},
                                        speak=[{"message": "Oi! Como posso ajudar?"}, {"message": "Claro."}])
    host = Host(agent, clock)
    r = host.message("oi", "m1")
    assert r.llm_calls == 1 and provider.names() == ["speak"]
    assert [(m.kind, m.key, m.run_id, m.step_id) for m in r.messages] == [("ai", "idle:m1", None, None)]
    assert [(o.kind, o.status, o.key, o.llm_calls, o.run_id) for o in r.outcomes] == [
        ("idle", "ok", "idle:m1", 1, None)]
    assert "Responda com simpatia." in provider.calls[0].prompt
    assert provider.calls[0].input.parameters.json_schema["properties"] == {"message": {"type": ["string", "null"]}}
    r2 = host.message("e os preços?", "m2")
    assert [m.key for m in r2.messages] == ["idle:m2"]
    assert '"e os preços?"' in provider.calls[1].prompt


def test_silent_idle_spends_nothing():
    agent, provider, clock = make_agent([], fields={}, idle="silent")
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert (r.llm_calls, r.messages, r.outcomes) == (0, [], [])
    assert r.changed is True  # a first turn creates the session
    assert provider.calls == []


def test_idle_failure_is_deferred_with_no_wake():
    agent, provider, clock = make_agent([], fields={}, speak=[ProviderError("mock", "overload", "busy")])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert [(o.kind, o.status, o.code, o.key, o.llm_calls) for o in r.outcomes] == [
        ("idle", "deferred", "provider-unavailable", None, 1)]
    assert r.schedule == [] and r.messages == []


def test_no_wake_without_a_session():
    agent, _, _ = make_agent([], fields={})
    r = agent.turn(session_id="s1", wake="x:y:1")
    assert r.changed is False
    assert [(o.code, o.key, o.kind, o.status) for o in r.outcomes] == [("no-session", "x:y:1", "wait", "skipped")]
