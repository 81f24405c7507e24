"""The toolkit and the Agent constructor (authoring note §1, §6.4, §9.4 constructor checks)."""

from __future__ import annotations

import asyncio
import logging
import sys
import types
from datetime import UTC, datetime, timedelta, timezone

import pytest

from falai_django.engine.agent import Action, Agent, CompactionOptions, Event, Idle, Tool
from falai_django.engine.errors import FlowConfigurationError
from falai_django.engine.fields import FieldDef
from falai_django.engine.flows import Flow
from falai_django.engine.predicates import Condition
from falai_django.engine.toolkit import Toolkit, falai

FIELDS = {
    "nome": {"type": "string", "ask": "Pergunte o nome da pessoa, sem tom de formulário."},
    "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
    "tamanho": {"type": "string", "enum": ["1-10", "11-50", "51-200", "200+"], "ask": "Pergunte o porte."},
    "confirmado": {"type": "boolean", "ask": "Resuma e pergunte se está tudo certo."},
}
PROVIDER = object()

f = falai().fields(FIELDS)

TRIAGEM = f.flow({
    "id": "triagem",
    "name": "Triagem",
    "on": [{"message": []}],
    "steps": [
        {"id": "quem", "prompt": "Descubra quem é e de onde fala.", "collect": ["nome", "empresa"]},
        {"id": "porte", "collect": ["tamanho"], "maxAsks": 2},
        {"id": "confirma", "collect": ["confirmado"]},
        {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "quem", "clear": ["confirmado"]}},
        {"id": "tchau", "prompt": "Agradeça e diga que um vendedor continua daqui."},
    ],
})


def build(**options):
    options.setdefault("name", "Ana")
    options.setdefault("provider", PROVIDER)
    return f.agent(**options)


def error_of(**options) -> str:
    with pytest.raises(FlowConfigurationError) as err:
        build(**options)
    return str(err.value)


# --------------------------------------------------------------------------- toolkit


def test_toolkit_binds_fields_and_builds_plain_values():
    root = falai()
    assert isinstance(root, Toolkit) and dict(root.fields) == {}
    assert dict(f.fields) == FIELDS
    assert f.fields["nome"]["type"] == "string"
    run = lambda params, ctx: {"ok": True}  # noqa: E731
    notify = f.action(parameters={"message": {"type": "string"}}, run=run, description="Avisa")
    assert isinstance(notify, Action)
    assert notify.run is run and notify.parameters == {"message": {"type": "string"}} and notify.description == "Avisa"
    assert f.action({"parameters": {}, "run": run}).parameters == {}
    assert f.event() == Event(direction=None)
    assert f.event(direction="outbound").direction == "outbound"
    assert f.event({"direction": "inbound"}).direction == "inbound"
    check = lambda ctx, arg: True  # noqa: E731
    assert f.condition(check) == Condition(check=check)
    tool = f.tool(id="buscar", handler=lambda args, ctx: {"value": 1}, parameters={"type": "object", "properties": {}})
    assert isinstance(tool, Tool) and tool.id == "buscar"


def test_flow_takes_a_dict_or_keywords():
    assert f.flow({"id": "x", "name": "X", "steps": []}) == {"id": "x", "name": "X", "steps": []}
    assert f.flow(id="x", name="X", steps=[]) == {"id": "x", "name": "X", "steps": []}
    assert f.flow({"id": "x"}, name="Y", steps=[]) == {"id": "x", "name": "Y", "steps": []}
    flow = f.flow(id="x", name="X", while_={"known": ["nome"]}, steps=[{"id": "a", "if_": {"known": ["nome"]}, "else_": "end"}])
    agent = build(flows=[flow])
    assert agent.flows[0].while_ == {"known": ["nome"]}
    assert agent.flows[0].steps[0].kind == "if"


def test_agent_fields_come_from_the_toolkit():
    with pytest.raises(TypeError):
        f.agent(name="Ana", provider=PROVIDER, fields={})


# --------------------------------------------------------------------------- the agent's attributes


def test_triagem_agent_builds_with_normalized_attributes():
    notify = f.action(parameters={"message": {"type": "string"}}, run=lambda p, c: {"ok": True})
    agent = build(
        flows=[TRIAGEM],
        actions={"notify": notify},
        events={"pago": f.event(direction="inbound")},
        conditions={"vip": f.condition(lambda ctx, arg: True)},
        tools=[{"id": "buscar", "handler": lambda a, c: None, "isReadOnly": lambda i: True}],
        instructions=[{"prompt": "Fale português", "kind": "must"}],
        knowledge_base={"preço": "R$ 10"},
        persona="Simpática",
        goal="Qualificar leads",
        idle={"prompt": "Responda dúvidas", "tools": ["buscar"]},
    )
    assert agent.name == "Ana" and agent.provider is PROVIDER
    assert agent.warnings == []
    assert [fl.id for fl in agent.flows] == ["triagem"]
    assert isinstance(agent.flow("triagem"), Flow) and agent.flow("nada") is None
    assert list(agent.flows_by_id) == ["triagem"]
    assert isinstance(agent.fields["tamanho"], FieldDef)
    assert agent.fields["confirmado"].extract == "asked"
    assert agent.actions["notify"] is notify
    assert agent.events["pago"].direction == "inbound"
    assert callable(agent.conditions["vip"].check)
    assert agent.tools_by_id["buscar"].is_read_only("x") is True
    assert agent.instructions[0].kind == "must" and agent.instructions[0].prompt == "Fale português"
    assert agent.idle == Idle(prompt="Responda dúvidas", tools=("buscar",), instructions=())
    assert agent.max_tool_loops == 5
    assert agent.compaction is None
    assert agent.knowledge_base == {"preço": "R$ 10"}
    assert agent.persona == "Simpática" and agent.goal == "Qualificar leads"
    assert agent.registries["flows"] == [{"id": "triagem"}]


def test_flows_in_any_form_become_flow_objects():
    spec = {"id": "s", "name": "S", "description": None, "steps": [{"id": "a", "kind": "say", "say": "oi", "once": None}]}
    agent = build(flows=[TRIAGEM, spec, Flow.from_dict({"id": "t", "name": "T", "steps": []})])
    assert [fl.id for fl in agent.flows] == ["triagem", "s", "t"]
    assert agent.flow("s").steps[0].kind == "say"


def test_clock_defaults_to_aware_utc_and_accepts_objects():
    agent = build()
    now = agent.now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)

    class FakeClock:
        def now(self):
            return datetime(2026, 9, 20, 7, 0, tzinfo=timezone(timedelta(hours=-3)))

    agent = build(clock=FakeClock())
    assert agent.clock() == datetime(2026, 9, 20, 10, 0, tzinfo=UTC)
    assert agent.clock().tzinfo == UTC
    agent = build(clock=lambda: datetime(2026, 9, 20, 10, 0))  # naive = UTC
    assert agent.now() == datetime(2026, 9, 20, 10, 0, tzinfo=UTC)


def test_business_hours_hook_is_called_both_ways():
    at = datetime(2026, 9, 20, 22, 0, tzinfo=UTC)
    assert build().snap_business_hours(at) == at
    seen = []

    def keyword(at, context=None):
        seen.append(context)
        return at + timedelta(hours=11)

    def upstream(at, opts):
        seen.append(opts)
        return at + timedelta(hours=1)

    assert build(business_hours=keyword).snap_business_hours(at, {"tz": "BR"}) == at + timedelta(hours=11)
    assert build(businessHours=upstream).snap_business_hours(at, "c") == at + timedelta(hours=1)
    assert seen == [{"tz": "BR"}, {"context": "c"}]


def test_camel_case_options_and_compaction():
    agent = build(maxToolLoops=0, knowledgeBase={"a": 1}, compaction={"maxTokens": 8000, "preserveRecentCount": 6})
    assert agent.max_tool_loops == 0
    assert agent.knowledge_base == {"a": 1}
    assert agent.compaction == CompactionOptions(max_tokens=8000, preserve_recent_count=6)
    agent = build(compaction={"max_tokens": 100, "compaction_threshold": 0.5, "enabled": False})
    assert agent.compaction.compaction_threshold == 0.5 and agent.compaction.enabled is False


@pytest.mark.parametrize(
    "compaction",
    [
        {"maxTokens": 1000, "compactionThreshold": 0.4},
        {"maxTokens": 1000, "compactionThreshold": 0.96},
        {"maxTokens": 1000, "preserveRecentCount": 1},
        {"maxTokens": 1000, "maxToolResultChars": 0},
        {"compactionThreshold": 0.8},
        {"maxTokens": 1000, "bogus": 1},
    ],
)
def test_compaction_out_of_range_is_a_plain_error(compaction):
    with pytest.raises(ValueError):
        build(compaction=compaction)


def test_warnings_are_kept_and_logged(caplog):
    flow = f.flow({"id": "x", "name": "X", "steps": [{"id": "a", "prompt": "p", "then": "a"}]})
    with caplog.at_level(logging.WARNING, logger="falai_django.agent"):
        agent = build(flows=[flow])
    assert agent.warnings[0].startswith('flow "x", step "a": then jumps back to "a" without clear')
    assert any(r.getMessage().startswith('[Agent] flow "x", step "a": then jumps back') for r in caplog.records)


def test_chain_to_a_missing_flow_warns_but_builds():
    flow = f.flow({"id": "x", "name": "X", "steps": [{"id": "a", "prompt": "p", "then": {"flow": "humano"}}]})
    agent = build(flows=[flow])
    assert len(agent.warnings) == 1 and "flow-gone" in agent.warnings[0]
    other = f.flow({"id": "humano", "name": "H", "steps": []})
    assert build(flows=[flow, other]).warnings == []


# --------------------------------------------------------------------------- constructor errors


def test_every_flow_is_validated():
    bad = f.flow({**TRIAGEM, "steps": [{"id": "quem", "collect": ["nomee"]}]})
    assert error_of(flows=[bad]).startswith(
        '[FlowConfigurationError] flow "triagem", step "quem": unknown field "nomee" in collect. '
    )


def test_duplicate_flow_ids():
    text = error_of(flows=[TRIAGEM, TRIAGEM])
    assert text.startswith('[FlowConfigurationError] flow "triagem" is declared twice: flow ids must be unique.')


def test_tool_parameters_must_be_a_json_schema_object():
    text = error_of(tools=[{"id": "buscar", "handler": lambda a, c: None, "parameters": {"q": {"type": "string"}}}])
    assert text.startswith('[FlowConfigurationError] tool "buscar": parameters must be a JSON Schema object. ')
    ok = build(tools=[{"id": "buscar", "handler": lambda a, c: None,
                       "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}])
    assert ok.tools[0].parameters["type"] == "object"


def test_tools_need_an_id_and_a_handler():
    assert error_of(tools=[{"handler": lambda a, c: None}]).startswith("[FlowConfigurationError] tools[0]: has no id. ")
    assert error_of(tools=[{"id": "x"}]).startswith('[FlowConfigurationError] tool "x": has no handler. ')


def test_idle_tools_must_be_registered():
    text = error_of(idle={"prompt": "oi", "tools": ["nada"]})
    assert text.startswith('[FlowConfigurationError] idle: unknown tool "nada". ')
    assert build(idle="silent").idle.silent is True


@pytest.mark.parametrize("name", ["equals", "known", "silenced"])
def test_conditions_may_not_shadow_built_ins(name):
    text = error_of(conditions={name: f.condition(lambda ctx, arg: True)})
    assert text.startswith(f'[FlowConfigurationError] condition "{name}" shadows a built-in')


def test_unknown_condition_in_agent_and_idle_instructions():
    text = error_of(instructions=[{"prompt": "ok"}, {"prompt": "x", "if": {"vip": True}}])
    assert text.startswith('[FlowConfigurationError] agent: unknown condition "vip" in instructions[1].if. ')
    text = error_of(idle={"prompt": "p", "instructions": [{"prompt": "x", "if": {"gold": 1}}]})
    assert text.startswith('[FlowConfigurationError] idle: unknown condition "gold" in instructions[0].if. ')
    agent = build(conditions={"vip": f.condition(lambda c, a: True)}, instructions=[{"prompt": "x", "if": {"vip": True}}])
    assert agent.instructions[0].if_ == {"vip": True}


def test_name_and_provider_are_required():
    with pytest.raises(FlowConfigurationError, match=r"^\[FlowConfigurationError\] agent: has no name\. "):
        Agent(provider=PROVIDER)
    with pytest.raises(FlowConfigurationError, match=r"^\[FlowConfigurationError\] agent: has no provider\. "):
        Agent(name="Ana")


def test_bad_field_definitions():
    with pytest.raises(FlowConfigurationError, match=r'field "x": type "text" is not one of'):
        Agent(name="Ana", provider=PROVIDER, fields={"x": {"type": "text"}})
    with pytest.raises(FlowConfigurationError, match=r'field "x": extract "sometimes"'):
        Agent(name="Ana", provider=PROVIDER, fields={"x": {"type": "string", "extract": "sometimes"}})


def test_actions_need_run_and_events_a_known_direction():
    assert error_of(actions={"a": {"parameters": {}}}).startswith('[FlowConfigurationError] action "a": has no run function. ')
    assert error_of(events={"e": {"direction": "sideways"}}).startswith(
        '[FlowConfigurationError] event "e": direction "sideways" is not "inbound" or "outbound". '
    )


def test_unknown_and_removed_options_are_type_errors():
    with pytest.raises(TypeError, match="unexpected option 'flowz'"):
        build(flowz=[])
    with pytest.raises(TypeError, match="removed in v4"):
        build(hooks={})
    with pytest.raises(ValueError):
        build(max_tool_loops=-1)


def test_plain_agent_constructor_takes_fields():
    agent = Agent(name="Ana", provider=PROVIDER, fields=FIELDS, flows=[TRIAGEM])
    assert list(agent.fields) == ["nome", "empresa", "tamanho", "confirmado"]


# --------------------------------------------------------------------------- delegation to engine/turn.py


def test_turn_methods_delegate_to_the_turn_module(monkeypatch):
    calls = []
    fake = types.ModuleType("falai_django.engine.turn")

    def turn(agent, **kw):
        calls.append(("turn", agent, kw))
        return "r"

    async def aturn(agent, **kw):
        calls.append(("aturn", agent, kw))
        return "ar"

    def turn_stream(agent, **kw):
        calls.append(("turn_stream", agent, kw))
        yield {"done": True, "result": "r"}

    async def aturn_stream(agent, **kw):
        calls.append(("aturn_stream", agent, kw))
        yield {"done": True, "result": "ar"}

    def pending_wakes(agent, **kw):
        calls.append(("pending_wakes", agent, kw))
        return []

    for fn in (turn, aturn, turn_stream, aturn_stream, pending_wakes):
        setattr(fake, fn.__name__, fn)
    monkeypatch.setitem(sys.modules, "falai_django.engine.turn", fake)

    agent = build()
    assert agent.turn(session_id="s", message="oi") == "r"
    assert asyncio.run(agent.aturn(session_id="s", wake="k")) == "ar"
    assert list(agent.turn_stream(session_id="s", message="oi")) == [{"done": True, "result": "r"}]

    async def collect():
        return [chunk async for chunk in agent.aturn_stream(session_id="s", message="oi")]

    assert asyncio.run(collect()) == [{"done": True, "result": "ar"}]
    assert agent.pending_wakes(session=None, context=None) == []
    assert [(name, a is agent, kw) for name, a, kw in calls] == [
        ("turn", True, {"session_id": "s", "message": "oi"}),
        ("aturn", True, {"session_id": "s", "wake": "k"}),
        ("turn_stream", True, {"session_id": "s", "message": "oi"}),
        ("aturn_stream", True, {"session_id": "s", "message": "oi"}),
        ("pending_wakes", True, {"session": None, "context": None}),
    ]
