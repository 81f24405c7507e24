"""Scenario: a silence follow-up cadence (S2). The customer goes quiet after Ana asks; 24h
later the follow-up flow speaks first, then waits 2 days before a last verbatim goodbye."""

from __future__ import annotations

from falai_django.engine.jstime import to_iso

from .kit import T0, T0_MS, Host, codes, make_agent, run_of, triage_flow

DAY = 86_400_000
RETOMAR = {
    "id": "retomar", "name": "Retomar", "on": [{"silence": "24h"}],
    "steps": [
        {"id": "lembra", "prompt": "Retome a conversa com leveza."},
        {"id": "w1", "wait": "2d", "else": "end"},
        {"id": "tchau", "say": "Vou encerrar por aqui. Qualquer coisa, é só chamar!"},
    ],
}


def build(**kw):
    agent, provider, clock = make_agent(
        [triage_flow(), RETOMAR],
        understand=kw.pop("understand", [{"fields": {}}]),
        speak=kw.pop("speak", [{"message": "Oi! Com quem eu falo?", "nome": None, "empresa": None},
                               {"message": "Oi, ainda por aí? Posso ajudar?"}]),
        **kw,
    )
    return agent, provider, clock, Host(agent, clock)


def test_first_reply_arms_the_silence_wake_without_replaces():
    _, _, _, host = build()
    r = host.message("oi", "m1")
    assert [(e.key, to_iso(e.at), e.replaces) for e in r.schedule] == [
        (f"silence:retomar:s1:{T0_MS}", "2026-09-21T10:00:00.000Z", None)]


def test_follow_up_cadence_speaks_first_then_waits_then_says_goodbye():
    agent, provider, clock, host = build()
    host.message("oi", "m1")
    clock.advance("24h")
    (r,) = host.fire_due()
    assert r.changed and r.llm_calls == 1
    assert [s.run_id for s in r.started] == [f"retomar#{T0_MS}"]
    assert [(m.kind, m.key) for m in r.messages] == [("ai", f"retomar#{T0_MS}:lembra:1")]
    assert "You speak first" in provider.calls[-1].prompt
    # only its own wait: retomar ran once, so no new silence wake is armed
    wait_key = f"retomar#{T0_MS}:w1:{T0_MS + DAY + 2 * DAY}"
    assert [e.key for e in r.schedule] == [wait_key]
    assert run_of(r.session, "retomar").status == "waiting"
    assert run_of(r.session, "triagem").status == "asking"  # suspended by the follow-up, back on the floor
    assert r.session.claims["retomar:s1:"] == {"at": "2026-09-21T10:00:00.000Z"}

    clock.advance("2d")
    (r2,) = host.fire_due()
    assert codes(r2)[0] == "no-reply"
    assert [(m.kind, m.text) for m in r2.messages] == [("verbatim", "Vou encerrar por aqui. Qualquer coisa, é só chamar!")]
    assert r2.llm_calls == 0
    assert [(e.id, e.reason) for e in r2.ended] == [(f"retomar#{T0_MS}", "end")]
    assert r2.schedule == []


def test_a_reply_before_the_wake_breaks_the_silence():
    agent, provider, clock, host = build(understand=[{"fields": {}}, {"fields": {"nome": "Ana"}}],
                                         speak=[{"message": "Oi! Com quem eu falo?", "nome": None, "empresa": None},
                                                {"message": "E a empresa?", "empresa": None}])
    first = host.message("oi", "m1")
    silence_key = first.schedule[0].key
    clock.advance("1h")
    r = host.message("sou a Ana", "m2")
    assert [(e.key, e.replaces) for e in r.schedule] == [(f"silence:retomar:s1:{T0_MS + 3_600_000}", silence_key)]
    clock.advance("24h")
    stale = agent.turn(session_id="s1", wake=silence_key, session=host.session, history=host.history)
    assert stale.changed is False
    assert [(o.code, o.key) for o in stale.outcomes] == [("silence-broken", silence_key)]


def test_a_silence_wake_whose_trigger_if_fails_changes_nothing():
    flow = dict(RETOMAR, on=[{"silence": "24h", "if": lambda ctx: bool((ctx.context or {}).get("open"))}])
    agent, provider, clock = make_agent([triage_flow(), flow], understand=[{"fields": {}}],
                                        speak=[{"message": "Oi!", "nome": None, "empresa": None}])
    host = Host(agent, clock)
    first = host.message("oi", "m1", context={"open": True})
    assert [e.key for e in first.schedule] == [f"silence:retomar:s1:{T0_MS}"]
    clock.advance("24h")
    r = agent.turn(session_id="s1", wake=first.schedule[0].key, session=host.session, context={"open": False})
    assert (r.changed, r.started, r.skipped, r.outcomes) == (False, [], [], [])


def test_customer_reply_during_the_wait_resolves_it_as_replied():
    agent, provider, clock, host = build(
        understand=[{"fields": {}}, {"fields": {"nome": "Ana"}}],
        speak=[{"message": "Oi! Com quem eu falo?", "nome": None, "empresa": None},
               {"message": "Oi, ainda por aí?"}, {"message": "Legal, Ana! E a empresa?", "empresa": None}])
    host.message("oi", "m1")
    clock.advance("24h")
    host.fire_due()
    clock.advance("1h")
    r = host.message("sou a Ana", "m2")
    replied = r.outcomes[0]
    assert (replied.kind, replied.status, replied.code, replied.next, replied.key) == ("wait", "ok", "replied", "end", None)
    assert [(e.flow_id, e.reason) for e in r.ended] == [("retomar", "end")]
    assert [m.key for m in r.messages] == ["triagem#m1:quem:1"]
    assert r.session.data == {"nome": "Ana"}
    assert T0 < r.session.last_user_at
