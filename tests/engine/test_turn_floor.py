"""engine-turn.md §3.10: the floor, the suspended stack and its fall-through, staying runs,
and the retry ladder's finer rules (quota reset time, `should_retry` overrides)."""

from __future__ import annotations

from scenarios.kit import T0_MS, Host, make_agent, run_of, triage_flow

from falai_django import ProviderError
from falai_django.engine.jstime import to_iso

EMAIL = {"id": "email", "name": "E-mail", "on": [{"message": ["quer receber por e-mail"]}],
         "steps": [{"id": "pede", "prompt": "Peça o e-mail.", "collect": ["email"]}, {"id": "envia", "do": "send"}]}
FIELDS = {"nome": {"type": "string", "ask": "x"}, "empresa": {"type": "string", "ask": "x"},
          "email": {"type": "string", "ask": "x"}, "tamanho": {"type": "string", "ask": "x"},
          "confirmado": {"type": "boolean", "ask": "x"}}


def test_a_routed_flow_suspends_the_asker_which_answers_when_it_goes_quiet():
    sent = []
    agent, provider, clock = make_agent(
        [triage_flow(), EMAIL], fields=FIELDS,
        actions={"send": {"parameters": {}, "run": lambda p, c: sent.append(c.key) or {"ok": True}}},
        understand=[{"flows": {"email": 0}, "fields": {}},
                    {"flows": {"triagem": 10, "email": 90}, "fields": {}},
                    {"flows": {"triagem": 0, "email": 50}, "fields": {"email": "ana@x.com"}}],
        speak=[{"message": "Oi! Com quem falo?", "nome": None, "empresa": None},
               {"message": "Claro, qual o e-mail?", "email": None},
               {"message": "Enviado! E com quem eu falo?", "nome": None, "empresa": None}])
    host = Host(agent, clock)
    host.message("oi", "m1")
    r2 = host.message("me manda por e-mail", "m2")
    assert [m.key for m in r2.messages] == ["email#m2:pede:1"]
    triage = run_of(r2.session, "triagem")
    assert triage.status == "suspended" and triage.suspended_at == to_iso(clock.now())
    r3 = host.message("ana@x.com", "m3")
    assert sent == ["email#m2:envia:1"]
    # the e-mail run finished without speaking: the suspended triage answers the same message
    assert [m.key for m in r3.messages] == ["triagem#m1:quem:1"]
    assert run_of(r3.session, "triagem").status == "asking"
    assert [e.reason for e in r3.ended] == ["end"]


def test_staying_if_branch_does_not_fire_toward_an_already_run_target():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "onEnd": "stay",
            "steps": [{"id": "p", "prompt": "Converse.", "branches": [{"if": {"known": ["nome"]}, "then": "end"}]}]}
    agent, provider, clock = make_agent([flow], fields=FIELDS,
                                        understand=[{"fields": {}}, {"fields": {}}],
                                        speak=[{"message": "1"}, {"message": "2"}],
                                        actions={"set": {"parameters": {}, "run": lambda p, c: {"ok": True}}})
    r = agent.turn(session_id="s1", message="a", id="m1")
    session = r.session
    session.data["nome"] = "Ana"
    r2 = agent.turn(session_id="s1", message="b", id="m2", session=session)
    assert [o.code for o in r2.outcomes] == [None] and [m.text for m in r2.messages] == ["2"]


def test_quota_with_a_reset_time_waits_for_the_reset():
    reset = T0_MS + 7_200_000
    agent, provider, clock = make_agent(
        [triage_flow()], fields=FIELDS, understand=[{"fields": {}}],
        speak=[ProviderError("mock", "quota", "spent", reset_at_ms=reset)])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    line = r.outcomes[-1]
    assert (line.status, line.code, line.until) == ("deferred", "provider-quota", to_iso(clock.now()).replace(
        "10:00", "12:00"))
    assert [e.key for e in r.schedule] == [f"triagem#m1:quem:1:retry:{reset}"]


def test_quota_without_reset_fails_and_should_retry_overrides():
    agent, _, _ = make_agent([triage_flow()], fields=FIELDS, understand=[{"fields": {}}],
                             speak=[ProviderError("mock", "quota", "spent")])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert [(o.status, o.code) for o in r.outcomes] == [("failed", "provider-quota")]

    agent, _, _ = make_agent([triage_flow()], fields=FIELDS, understand=[{"fields": {}}],
                             speak=[ProviderError("mock", "network", "x", should_retry=False)])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert [(o.status, o.code) for o in r.outcomes] == [("failed", "provider-unavailable")]

    agent, _, _ = make_agent([triage_flow()], fields=FIELDS, understand=[{"fields": {}}],
                             speak=[ProviderError("mock", "invalid", "x", should_retry=True)])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert [(o.status, o.code) for o in r.outcomes] == [("deferred", "provider-invalid")]


def test_empty_reply_is_a_retryable_deferral():
    agent, _, _ = make_agent([triage_flow()], fields=FIELDS, understand=[{"fields": {}}],
                             speak=[{"message": "   ", "nome": None, "empresa": None}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert [(o.status, o.code, o.llm_calls) for o in r.outcomes] == [("deferred", "provider-unavailable", None)]
    assert r.llm_calls == 2 and r.messages == []


def test_a_silenced_retry_wake_ends_the_run():
    agent, _, clock = make_agent([triage_flow()], fields=FIELDS, understand=[{"fields": {}}],
                                 speak=[ProviderError("mock", "timeout", "slow")])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    clock.advance("1m")
    w = agent.turn(session_id="s1", wake=r.schedule[0].key, session=r.session, silenced="humano")
    assert [(o.code, o.detail) for o in w.outcomes] == [("silenced", "humano")]
    assert [e.reason for e in w.ended] == ["skipped"]


def test_every_provider_kind_maps_to_its_code_and_retry_rule():
    table = {"timeout": ("provider-unavailable", "deferred"), "network": ("provider-unavailable", "deferred"),
             "overload": ("provider-unavailable", "deferred"), "rate": ("provider-unavailable", "deferred"),
             "unknown": ("provider-unavailable", "deferred"), "aborted": ("provider-unavailable", "failed"),
             "quota": ("provider-quota", "failed"), "auth": ("provider-auth", "failed"),
             "entitlement": ("provider-auth", "failed"), "model": ("provider-invalid", "failed"),
             "invalid": ("provider-invalid", "failed"), "content": ("provider-invalid", "failed"),
             "context": ("provider-context", "failed")}
    for kind, (code, status) in table.items():
        agent, _, _ = make_agent([triage_flow()], fields=FIELDS, understand=[{"fields": {}}],
                                 speak=[ProviderError("mock", kind, "x")])
        r = agent.turn(session_id="s1", message="oi", id="m1")
        assert [(o.status, o.code) for o in r.outcomes] == [(status, code)], kind
        assert bool(r.schedule) == (status == "deferred"), kind
