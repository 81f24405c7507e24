"""Scenario: while triage asks, the customer mentions a competitor; the mention flow's `say`
answers, and the floor's talk step stays quiet (`another-reply`) but keeps asking."""

from __future__ import annotations

from .kit import Host, make_agent, run_of, triage_flow

CONCORRENTE = {
    "id": "concorrente", "name": "Concorrente",
    "on": [{"mention": ["fala de um concorrente", "!só cita de passagem"],
            "extract": {"marca": {"type": "string", "description": "qual concorrente"}}}],
    "steps": [{"id": "responde", "say": "Sobre a {{input.marca}}: nós integramos com ela sem custo."},
              {"id": "registra", "do": "log", "with": {"marca": "{{input.marca}}"}}],
}


def test_mention_say_answers_and_the_floor_keeps_asking():
    logged = []
    agent, provider, clock = make_agent(
        [triage_flow(), CONCORRENTE],
        understand=[{"mentions": {"concorrente": False}, "fields": {}},
                    {"mentions": {"concorrente": "sim"}, "extract": {"concorrente": {"marca": "Rival"}},
                     "fields": {"nome": "Ana"}}],
        speak=[{"message": "Oi! Com quem eu falo?", "nome": None, "empresa": None},
               {"message": "E de qual empresa você fala?", "empresa": None}],
        actions={"log": {"parameters": {"marca": {"type": "string"}},
                         "run": lambda p, ctx: logged.append(p["marca"]) or {"ok": True}}},
    )
    host = Host(agent, clock)
    host.message("oi", "m1")
    understand_prompt = provider.calls[0].prompt
    assert "Counts when: fala de um concorrente" in understand_prompt
    assert "Does not count when: só cita de passagem" in understand_prompt
    schema = provider.calls[0].input.parameters.json_schema
    assert set(schema["properties"]) == {"mentions", "extract", "fields"}

    r = host.message("sou a Ana, hoje uso a Rival", "m2")
    assert r.llm_calls == 1
    run = next(s for s in r.started if s.flow_id == "concorrente")
    assert run.run_id == "concorrente#m2"
    assert [(m.kind, m.text) for m in r.messages] == [
        ("verbatim", "Sobre a Rival: nós integramos com ela sem custo.")]
    assert logged == ["Rival"]
    skipped = [o for o in r.outcomes if o.code == "another-reply"]
    assert [(o.run_id, o.key) for o in skipped] == [("triagem#m1", "triagem#m1:quem:1")]
    assert run_of(r.session, "triagem").status == "asking"
    assert r.session.data == {"nome": "Ana"}
    assert r.session.claims["concorrente:s1:"]

