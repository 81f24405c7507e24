"""Scenario: `silenced` in its three forms. The skip form (the user's page) skips a fresh
talk or say step and takes its `then`, so the `do` after it still alerts the team."""

from __future__ import annotations

from .kit import Host, make_agent, run_of, triage_flow

REASON = "janela de 24h fechada"
LEAD = {"id": "lead", "name": "Lead quente", "on": [{"event": "quente"}],
        "steps": [{"id": "oi", "say": "Oi! Vi seu interesse."}, {"id": "pergunta", "prompt": "Pergunte o melhor horário."},
                  {"id": "alerta", "do": "alert"}]}


def build():
    alerts = []
    agent, provider, clock = make_agent(
        [LEAD], fields={}, events={"quente": {}},
        actions={"alert": {"parameters": {}, "run": lambda p, ctx: alerts.append((ctx.key, ctx.silenced)) or {"ok": True}}})
    return agent, provider, alerts


def test_skip_form_skips_talk_and_say_and_runs_the_do():
    agent, provider, alerts = build()
    r = agent.turn(session_id="s1", event="quente", key="q1", silenced={"reason": REASON, "skip": True})
    assert [(o.step_id, o.kind, o.status, o.code, o.detail, o.next) for o in r.outcomes] == [
        ("oi", "say", "skipped", "silenced", REASON, "pergunta"),
        ("pergunta", "prompt", "skipped", "silenced", REASON, "alerta"),
        ("alerta", "do", "ok", None, None, None),
    ]
    assert r.outcomes[0].key == "lead#q1:oi:1"
    assert alerts == [("lead#q1:alerta:1", REASON)]
    assert r.messages == [] and r.llm_calls == 0 and provider.calls == []
    assert [e.reason for e in r.ended] == ["end"]
    assert r.session.last_assistant_at is None


def test_plain_string_ends_the_run_at_the_first_say():
    agent, provider, alerts = build()
    r = agent.turn(session_id="s1", event="quente", key="q1", silenced=REASON)
    assert [(o.kind, o.status, o.code, o.detail, o.key) for o in r.outcomes] == [
        ("say", "skipped", "silenced", REASON, None)]
    assert [e.reason for e in r.ended] == ["skipped"] and alerts == []


def test_skip_form_leaves_an_asking_run_asking_and_skips_understand():
    agent, provider, clock = make_agent([triage_flow()], understand=[{"fields": {}}, {"fields": {}}],
                                        speak=[{"message": "Oi! Com quem falo?", "nome": None, "empresa": None},
                                               {"message": "Voltei!", "nome": None, "empresa": None}])
    host = Host(agent, clock)
    host.message("oi", "m1")
    r = host.message("alô?", "m2", silenced={"reason": REASON, "skip": True})
    assert (r.llm_calls, r.messages, r.outcomes) == (0, [], [])
    assert run_of(r.session, "triagem").status == "asking"
    r2 = host.message("oi de novo", "m3")  # the gate opened: the asker speaks
    assert [m.text for m in r2.messages] == ["Voltei!"]


def test_understand_true_keeps_fields_landing_while_nothing_is_said():
    agent, provider, clock = make_agent([triage_flow()], understand=[{"fields": {}}, {"fields": {"nome": "Ana"}}],
                                        speak=[{"message": "Oi! Com quem falo?", "nome": None, "empresa": None}])
    host = Host(agent, clock)
    host.message("oi", "m1")
    r = host.message("sou a Ana", "m2", silenced={"reason": "humano atendendo", "understand": True})
    assert r.llm_calls == 1 and r.messages == [] and r.session.data == {"nome": "Ana"}
    assert provider.names() == ["understand", "speak", "understand"]


def test_silenced_first_message_starts_the_catch_all_which_ends_silenced():
    agent, provider, clock = make_agent([triage_flow()])
    r = agent.turn(session_id="s1", message="oi", id="m1", silenced="sem créditos")
    assert [s.run_id for s in r.started] == ["triagem#m1"]
    assert [(o.kind, o.code, o.detail) for o in r.outcomes] == [("collect", "silenced", "sem créditos")]
    assert r.session.claims == {"triagem:s1:": {"at": r.session.last_user_at}}
    assert r.llm_calls == 0
