"""engine-turn.md §7: the LLM call budget, one row per test."""

from __future__ import annotations

from scenarios.kit import make_agent, triage_flow

VENDAS = {"id": "vendas", "name": "Vendas", "on": [{"message": ["quer comprar"]}], "steps": [{"id": "p", "prompt": "x"}]}
SUPORTE = {"id": "suporte", "name": "Suporte", "on": [{"message": ["tem problema"]}], "steps": [{"id": "p", "prompt": "y"}]}
BARE = {"id": "bare", "name": "Bare", "on": [{"message": []}], "steps": [{"id": "p", "prompt": "Converse."}]}


def calls(agent, **kw):
    return agent.turn(session_id="s1", **kw).llm_calls


def test_several_candidates_cost_understand_and_speak():
    agent, p, _ = make_agent([VENDAS, SUPORTE], fields={}, understand=[{"flows": {"vendas": 80}}],
                             speak=[{"message": "ok"}])
    assert calls(agent, message="quero comprar", id="m1") == 2 and p.names() == ["understand", "speak"]


def test_catch_all_alone_costs_speak_only():
    agent, p, _ = make_agent([BARE], fields={}, speak=[{"message": "ok"}])
    assert calls(agent, message="oi", id="m1") == 1 and p.names() == ["speak"]


def test_no_flows_idle_costs_speak_only():
    agent, p, _ = make_agent([], fields={}, speak=[{"message": "ok"}])
    assert calls(agent, message="oi", id="m1") == 1


def test_silent_idle_with_nothing_eligible_costs_nothing():
    agent, p, _ = make_agent([], fields={}, idle="silent")
    assert calls(agent, message="oi", id="m1") == 0


def test_silenced_string_costs_nothing_and_understand_true_at_most_one():
    agent, p, _ = make_agent([VENDAS, SUPORTE], fields={}, understand=[{"flows": {}}])
    assert calls(agent, message="oi", id="m1", silenced="humano") == 0
    assert calls(agent, message="oi", id="m2", silenced={"reason": "humano", "understand": True}) == 1
    assert p.names() == ["understand"]


def test_wake_event_start_reaching_a_talk_step_cost_speak_only():
    flow = {"id": "f", "name": "F", "on": [{"event": "x"}], "steps": [{"id": "p", "prompt": "Fale."}]}
    agent, p, _ = make_agent([flow], fields={}, events={"x": {}}, speak=[{"message": "a"}, {"message": "b"}])
    assert calls(agent, event="x", key="k") == 1
    assert calls(agent, start={"flow": "f", "key": "k2"}) == 1
    assert p.names() == ["speak", "speak"]


def test_code_only_turns_cost_nothing():
    flow = {"id": "f", "name": "F", "steps": [{"id": "a", "say": "oi"}, {"id": "w", "wait": "1d"}]}
    agent, p, _ = make_agent([flow], fields={})
    assert calls(agent, start={"flow": "f", "key": "k"}) == 0


def test_floor_holder_alone_with_nothing_to_judge_costs_speak_only():
    stay = dict(BARE, onEnd="stay")
    agent, p, _ = make_agent([stay], fields={}, speak=[{"message": "a"}, {"message": "b"}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert agent.turn(session_id="s1", message="e aí", id="m2", session=r.session).llm_calls == 1


def test_tool_rounds_add_one_call_each_up_to_max_plus_one():
    tool = {"id": "t", "parameters": {"type": "object", "properties": {}}, "handler": lambda a, c: {"value": 1}}
    loop = {"message": "", "toolCalls": [{"toolName": "t", "arguments": {}}]}
    agent, p, _ = make_agent([BARE], fields={}, tools=[tool], max_tool_loops=2,
                             speak=[loop, loop, {"message": "fim"}])
    assert calls(agent, message="oi", id="m1") == 3
    assert [c.input.tools is not None for c in p.calls] == [True, True, False]


def test_triage_first_message_with_later_fields_pays_for_understand():
    agent, p, _ = make_agent([triage_flow()], understand=[{"fields": {}}],
                             speak=[{"message": "Oi", "nome": None, "empresa": None}])
    assert calls(agent, message="oi", id="m1") == 2
