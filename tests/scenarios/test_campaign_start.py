"""Scenario: a campaign started by hand, a wait that a reply ends with `else: {flow}` into triage."""

from __future__ import annotations

from .kit import T0, T0_MS, Host, codes, make_agent, run_of

DAY = 86_400_000
CAMPANHA = {
    "id": "campanha", "name": "Campanha",
    "steps": [
        {"id": "abre", "say": "Oi {{input.nome}}! Temos uma condição especial este mês."},
        {"id": "espera", "wait": "2d", "else": {"flow": "triagem"}},
        {"id": "lembra", "say": "Lembrete: a condição acaba amanhã."},
    ],
}


def test_campaign_reply_chains_into_triage_with_the_floor():
    from .kit import triage_flow

    agent, provider, clock = make_agent(
        [triage_flow(on=[]), CAMPANHA],
        understand=[{"fields": {"nome": "Ana"}}],
        speak=[{"message": "Que bom! De qual empresa você fala?", "nome": None, "empresa": None}],
    )
    host = Host(agent, clock)
    r = host.handle(start={"flow": "campanha", "input": {"nome": "Ana"}, "key": "camp:1"})
    assert r.llm_calls == 0
    assert [(m.kind, m.text, m.key) for m in r.messages] == [
        ("verbatim", "Oi Ana! Temos uma condição especial este mês.", "campanha#camp:1:abre:1")]
    assert [e.key for e in r.schedule] == [f"campanha#camp:1:espera:{T0_MS + 2 * DAY}"]
    assert r.session.claims == {"campanha:s1:camp:1": {"at": T0}}

    clock.advance("3h")
    r2 = host.message("quero saber mais", "m1")
    first = r2.outcomes[0]
    assert (first.code, first.next) == ("replied", "flow:triagem")
    assert [(e.id, e.reason) for e in r2.ended] == [("campanha#camp:1", "flow")]
    child = run_of(r2.session, "triagem")
    assert child.id == "triagem#campanha#camp:1:espera:1"
    assert (child.trigger.kind, child.hop, child.input) == ("flow", 1, {"nome": "Ana"})
    assert child.dedupe_key == "triagem:s1:campanha#camp:1:espera:1"
    assert [m.key for m in r2.messages] == ["triagem#campanha#camp:1:espera:1:quem:1"]
    assert r2.llm_calls == 2
    # the stale campaign wake is dropped when it fires
    clock.advance("2d")
    (stale,) = host.fire_due()[:1]
    assert stale.changed is False and codes(stale) == ["stale-wake"]


def test_campaign_without_reply_sends_the_reminder():
    agent, provider, clock = make_agent([CAMPANHA], fields={})
    host = Host(agent, clock)
    host.handle(start={"flow": "campanha", "input": {"nome": "Ana"}, "key": "camp:1"})
    clock.advance("2d")
    (r,) = host.fire_due()
    assert codes(r) == ["no-reply", None]
    assert [m.text for m in r.messages] == ["Lembrete: a condição acaba amanhã."]
    assert [e.reason for e in r.ended] == ["end"] and r.llm_calls == 0


def test_start_of_a_missing_flow_is_skipped_flow_gone_and_changed():
    agent, _, _ = make_agent([CAMPANHA], fields={})
    r = agent.turn(session_id="s1", start={"flow": "sumiu", "key": "k"})
    assert [(s.flow_id, s.anchor, s.trigger_key, s.code) for s in r.skipped] == [("sumiu", "s1", "k", "flow-gone")]
    assert r.changed is True


def test_the_same_start_key_twice_is_already_claimed():
    agent, _, _ = make_agent([CAMPANHA], fields={})
    r = agent.turn(session_id="s1", start={"flow": "campanha", "key": "camp:1"})
    r2 = agent.turn(session_id="s1", start={"flow": "campanha", "key": "camp:1"}, session=r.session)
    assert [s.code for s in r2.skipped] == ["already-claimed"]
