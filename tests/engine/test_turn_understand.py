"""engine-turn.md §3.4-§3.5: when understand runs, its envelope and aliases, parsing,
coercion with the three drop codes, and routing (40 / +15, catch-all, lone flow)."""

from __future__ import annotations

import pytest
from scenarios.kit import codes, make_agent, run_of, triage_flow

from falai_django import ProviderError
from falai_django.engine.prompt import Aliases

VENDAS = {"id": "vendas.b2b", "name": "Vendas", "description": "Quer comprar para a empresa.",
          "on": [{"message": ["quer comprar", "!só está pesquisando"]}],
          "steps": [{"id": "p", "prompt": "Entenda a necessidade.", "collect": ["nome completo", "message"]}]}
SUPORTE = {"id": "suporte", "name": "Suporte", "on": [{"message": ["tem um problema"]}],
           "steps": [{"id": "s", "prompt": "Ajude."}]}
FIELDS = {"nome completo": {"type": "string", "ask": "Pergunte."}, "message": {"type": "string", "ask": "x"},
          "idade": {"type": "integer", "ask": "x"}, "plano": {"type": "string", "enum": ["a", "b"], "ask": "x"}}


def test_aliases_share_one_counter_and_map_back():
    a = Aliases()
    assert a.alias("flows", "vendas.b2b", "f") == "f1"
    assert a.alias("flows", "suporte", "f") == "suporte"
    assert a.alias("branches", "x#1:s/0", "q", force=True) == "q2"
    assert a.alias("fields", "nome completo", "d") == "d3"
    assert a.alias("fields", "nome", "d") == "nome"
    assert a.real("fields", "d3") == "nome completo" and a.real("fields", "nome") == "nome"
    assert a.real("flows", "unknown") == "unknown"


def test_envelope_aliases_and_prompt_sections():
    agent, provider, _ = make_agent([VENDAS, SUPORTE], fields=FIELDS,
                                    understand=[{"flows": {"f1": "95", "suporte": 10},
                                                 "fields": {"d2": "Ana Souza", "message": "oi"}}],
                                    speak=[{"message": "Olá!"}])
    r = agent.turn(session_id="s1", message="quero comprar", id="m1")
    call = provider.calls[0]
    schema = call.input.parameters.json_schema
    assert call.schema_name == "understand" and call.input.tools is None
    assert schema["required"] == ["flows", "fields"] and schema["additionalProperties"] is False
    assert list(schema["properties"]["flows"]["properties"]) == ["f1", "suporte"]
    assert list(schema["properties"]["fields"]["properties"]) == ["d2", "message"]
    assert schema["properties"]["fields"]["properties"]["d2"]["type"] == ["string", "null"]
    assert "1. f1 — Vendas: Quer comprar para a empresa." in call.prompt
    assert "Score 0 when: só está pesquisando" in call.prompt
    assert '"""\nquero comprar\n"""' in call.prompt
    # aliases mapped back; a numeric-string score counts; the route starts vendas
    assert [s.run_id for s in r.started] == ["vendas.b2b#m1"]
    assert r.session.data == {"nome completo": "Ana Souza", "message": "oi"}


def test_drop_codes_unknown_bad_value_not_in_enum():
    flow = {"id": "f", "name": "F", "on": [{"message": []}],
            "steps": [{"id": "a", "say": "oi"}, {"id": "b", "collect": ["idade", "plano"]}]}
    agent, provider, _ = make_agent([flow], fields=FIELDS, understand=[
        {"fields": {"idade": "vinte", "plano": "c", "cor": "azul"}}], speak=[{"message": "Certo"}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    drops = [(o.kind, o.status, o.code, o.detail, o.run_id, o.key) for o in r.outcomes if o.run_id is None]
    assert drops == [("collect", "skipped", "bad-value", "idade", None, None),
                     ("collect", "skipped", "not-in-enum", "plano", None, None),
                     ("collect", "skipped", "unknown-field", "cor", None, None)]
    assert r.session.data == {}


def test_coercion_writes_typed_values():
    flow = {"id": "f", "name": "F", "on": [{"message": []}],
            "steps": [{"id": "a", "say": "oi"}, {"id": "b", "collect": ["idade", "plano"]}]}
    agent, _, _ = make_agent([flow], fields=FIELDS, understand=[{"fields": {"idade": "41,7", "plano": "a"}}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert r.session.data == {"idade": 41, "plano": "a"}


def test_floor_alone_with_nothing_to_judge_makes_no_understand_call():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [{"id": "a", "prompt": "Converse."}],
            "onEnd": "stay"}
    agent, provider, _ = make_agent([flow], fields={}, speak=[{"message": "Oi"}, {"message": "De novo"}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    r2 = agent.turn(session_id="s1", message="tudo bem?", id="m2", session=r.session)
    assert provider.names() == ["speak", "speak"] and r2.llm_calls == 1


def test_lone_flow_with_silent_idle_starts_unscored():
    agent, provider, _ = make_agent([SUPORTE], fields={}, idle="silent", speak=[{"message": "Vamos ver"}])
    r = agent.turn(session_id="s1", message="bom dia", id="m1")
    assert provider.names() == ["speak"] and [s.flow_id for s in r.started] == ["suporte"]


def test_lone_flow_with_idle_is_scored_and_low_score_goes_to_idle():
    agent, provider, _ = make_agent([SUPORTE], fields={}, understand=[{"flows": {"suporte": 39}}],
                                    speak=[{"message": "Bom dia!"}])
    r = agent.turn(session_id="s1", message="bom dia", id="m1")
    assert provider.names() == ["understand", "speak"]
    assert r.started == [] and [m.key for m in r.messages] == ["idle:m1"]


@pytest.mark.parametrize(("score", "switches"), [(54, False), (55, True), (39, False)])
def test_routing_away_from_an_asker_needs_40_and_15_over_its_score(score, switches):
    agent, provider, _ = make_agent(
        [triage_flow(), SUPORTE],
        understand=[{"flows": {"suporte": 0}, "fields": {}},
                    {"flows": {"triagem": 40 if score != 39 else 0, "suporte": score}, "fields": {}}],
        speak=[{"message": "Oi! Com quem falo?", "nome": None, "empresa": None}, {"message": "Próximo"}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    r2 = agent.turn(session_id="s1", message="tenho um problema", id="m2", session=r.session)
    started = [s.flow_id for s in r2.started]
    assert started == (["suporte"] if switches else [])
    if switches:
        # suporte answered (its prompt spoke once and ended); triage resumed the floor at settle
        assert [m.key for m in r2.messages] == ["suporte#m2:s:1"]
        assert run_of(r2.session, "triagem").status == "asking"
        assert "suspendedAt" not in r2.session.to_json()["runs"][0]
    else:
        assert [m.key for m in r2.messages] == ["triagem#m1:quem:1"]


def test_when_branch_is_judged_and_fires():
    flow = triage_flow()
    flow["steps"][0]["branches"] = [{"when": "a pessoa quer falar com um humano", "then": "tchau"}]
    agent, provider, _ = make_agent([flow], understand=[{"fields": {}}, {"branches": {"q1": True}, "fields": {}}],
                                    speak=[{"message": "Oi!", "nome": None, "empresa": None},
                                           {"message": "Tchau!"}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    r2 = agent.turn(session_id="s1", message="quero um humano", id="m2", session=r.session)
    assert provider.names() == ["understand", "speak", "understand", "speak"]
    schema = provider.calls[2].input.parameters.json_schema
    assert list(schema["properties"]["branches"]["properties"]) == ["q1"]
    assert "- q1: a pessoa quer falar com um humano" in provider.calls[2].prompt
    line = r2.outcomes[0]
    assert (line.kind, line.status, line.code, line.next, line.key) == ("collect", "ok", "branch", "tchau",
                                                                          "triagem#m1:quem:1")
    assert [m.key for m in r2.messages] == ["triagem#m1:tchau:1"]


def test_unusable_reply_still_costs_one_call():
    agent, provider, _ = make_agent([VENDAS, SUPORTE], fields=FIELDS, understand=[{"nada": 1}],
                                    speak=[{"message": "Olá!"}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert r.llm_calls == 2 and [m.key for m in r.messages] == ["idle:m1"]


def test_understand_failure_raises_and_changes_nothing():
    agent, provider, _ = make_agent([VENDAS, SUPORTE], fields=FIELDS,
                                    understand=[ProviderError("mock", "rate", "slow down", retry_after_ms=500)])
    with pytest.raises(ProviderError) as info:
        agent.turn(session_id="s1", message="oi", id="m1")
    assert info.value.kind == "rate"


def test_understand_non_provider_error_is_classified():
    agent, provider, _ = make_agent([VENDAS, SUPORTE], fields=FIELDS, understand=[RuntimeError("socket closed")])
    with pytest.raises(ProviderError):
        agent.turn(session_id="s1", message="oi", id="m1")


def test_understand_exhausted_mock_raises_with_the_spec_message():
    agent, provider, _ = make_agent([VENDAS, SUPORTE], fields=FIELDS)
    with pytest.raises(ProviderError, match=r'mockProvider: no scripted "understand" reply left for call #1\.'):
        agent.turn(session_id="s1", message="oi", id="m1")


def test_mention_code_only_detector_runs_every_message_and_logs_repeat_skip():
    alert = {"id": "alerta", "name": "Alerta", "on": [{"mention": [], "if": lambda ctx: "urgente" in str(ctx.context)}],
             "steps": [{"id": "a", "do": "ping"}]}
    agent, provider, _ = make_agent([alert], fields={}, idle="silent",
                                    actions={"ping": {"parameters": {}, "run": lambda p, c: {"ok": True}}})
    r = agent.turn(session_id="s1", message="oi", id="m1", context="urgente")
    assert [s.run_id for s in r.started] == ["alerta#m1"] and provider.calls == []
    r2 = agent.turn(session_id="s1", message="oi", id="m2", context="urgente", session=r.session)
    assert [s.code for s in r2.skipped] == ["already-claimed"]
    r3 = agent.turn(session_id="s1", message="oi", id="m3", context="calmo", session=r.session)
    assert r3.skipped == [] and codes(r3) == []
