"""Scenario: booking a slot twice; `clearOnStart` forgets the first date before the second
run's extracted values land, and the action is keyed by `ctx.key`."""

from __future__ import annotations

from .kit import Host, make_agent, run_of

FIELDS = {"data": {"type": "string", "ask": "Pergunte o dia e a hora."}}
AGENDAR = {
    "id": "agendar", "name": "Agendar", "on": [{"message": ["quer agendar uma visita"], "repeat": "always"}],
    "clearOnStart": ["data"],
    "steps": [
        {"id": "quando", "collect": ["data"]},
        {"id": "marca", "do": "book", "with": {"when": "{{data.data}}"}},
        {"id": "ok", "say": "Agendado para {{data.data}}!"},
    ],
}


def test_clear_on_start_runs_before_this_turns_values_land():
    booked = []
    agent, provider, clock = make_agent(
        [AGENDAR], fields=FIELDS, idle="silent",
        understand=[{"flows": {"agendar": 95}, "fields": {"data": "terça 10h"}},
                    {"flows": {"agendar": 92}, "fields": {}}],
        speak=[{"message": "Claro! Qual dia e hora?", "data": None}],
        actions={"book": {"parameters": {"when": {"type": "string"}},
                          "run": lambda p, ctx: booked.append((p["when"], ctx.key)) or {"ok": True,
                                                                                        "detail": p["when"]}}},
    )
    host = Host(agent, clock)
    r1 = host.message("quero agendar na terça 10h", "m1")
    assert r1.llm_calls == 1
    assert [o.code for o in r1.outcomes] == ["already-known", None, None]
    assert booked == [("terça 10h", "agendar#m1:marca:1")]
    assert [m.text for m in r1.messages] == ["Agendado para terça 10h!"]
    assert r1.session.data == {"data": "terça 10h"}
    assert r1.outcomes[1].detail == "terça 10h"

    r2 = host.message("quero agendar outra visita", "m2")
    assert [s.run_id for s in r2.started] == ["agendar#m2"]
    assert "data" not in r2.session.data  # cleared by the new run, and nothing new was said
    assert [m.key for m in r2.messages] == ["agendar#m2:quando:1"]
    assert run_of(r2.session, "agendar").status == "asking"
    assert set(r2.session.claims) == {"agendar:s1:m1", "agendar:s1:m2"}
