"""Flows with every kind of authoring error are refused, naming the flow and the step.

One broken flow per error family of engine-authoring.md §9.4 (source checks, the [late]
shape families, and the constructor-only checks). Each is refused three ways with the same
message: `validate_flow(flow, registries)`, the agent constructor (`f.agent(flows=[...])`), and
`from_spec` + the constructor for the FlowSpec (JSON) form where the family exists there.
The message is `[FlowConfigurationError] flow "<id>"[, step "<sid>" | , step #<n> | , trigger #<n>]: …`.
"""

from __future__ import annotations

import copy

import pytest

from falai_django import FlowConfigurationError, falai, from_spec, validate_flow
from falai_django.testing import mock_provider


def _ok(params, ctx):
    return {"ok": True}


FIELDS = {
    "nome": {"type": "string", "ask": "Pergunte o nome."},
    "tamanho": {"type": "string", "enum": ["1-10", "11-50"], "ask": "Pergunte o porte."},
    "confirmado": {"type": "boolean", "ask": "Confirme."},
    "qtd": {"type": "integer"},
}
ACTIONS = {
    "notify": {"parameters": {"message": {"type": "string"}}, "run": _ok},
    "stage": {"parameters": {"stage": {"type": "string", "enum": ["a", "b"]},
                             "score": {"type": "integer", "optional": True}}, "run": _ok},
}
EVENTS = {"pago": {"direction": "inbound"}}
CONDITIONS = {"vip": {"check": lambda ctx, arg: True}}
TOOLS = [{"id": "buscar", "description": "Busca.", "parameters": {"type": "object", "properties": {}},
          "handler": lambda args, ctx: {"ok": True}}]
REGISTRIES = {"fields": FIELDS, "actions": ACTIONS, "events": EVENTS, "conditions": CONDITIONS, "tools": TOOLS,
              "flows": [{"id": "vendas"}, {"id": "f"}]}

GOOD_STEPS = [
    {"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"]},
    {"id": "avisa", "do": "notify", "with": {"message": "Oi {{data.nome}}"}},
    {"id": "fim", "say": "Tchau."},
]


def flow_with(step=None, *, at: int = 1, **flow_keys):
    """The good flow `f` with step #`at` replaced by `step` (or only flow keys changed)."""
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": copy.deepcopy(GOOD_STEPS)}
    if step is not None:
        flow["steps"][at] = step
    flow.update(flow_keys)
    return flow


F = 'flow "f"'
S = 'flow "f", step "x"'

# (id, flow, where, what-fragment)
CASES = [
    # ---- flow level
    ("flow-no-id", {"name": "F", "steps": []}, "flow", "has no id"),
    ("flow-no-steps-list", {"id": "f", "name": "F", "steps": "quem"}, F, "steps"),
    ("triggers-but-no-steps", {"id": "f", "name": "F", "on": [{"message": []}], "steps": []}, F,
     "has triggers but no steps"),
    ("clear-on-start-unknown", flow_with(clearOnStart=["nomee"]), F, 'unknown field "nomee" in clearOnStart'),
    ("while-unknown-field", flow_with(**{"while": {"equals": {"nomee": "x"}}}), F, 'unknown field "nomee"'),
    ("while-unknown-condition", flow_with(**{"while": {"gold": True}}), F, 'unknown condition "gold"'),
    ("flow-tools-unknown", flow_with(tools=["pesquisar"]), F, 'unknown tool "pesquisar"'),
    ("flow-instruction-if", flow_with(instructions=[{"prompt": "x", "if": {"known": "nome"}}]), F, "known"),
    ("on-end-bad", flow_with(onEnd="loop"), F, "onEnd"),
    ("on-not-list", flow_with(on={"message": []}), F, "not a list"),
    # ---- triggers
    ("trigger-no-kind", flow_with(on=[{"kind": "message", "when": "oi"}]), 'flow "f", trigger #1',
     "names no trigger kind"),
    ("trigger-unknown-event", flow_with(on=[{"message": []}, {"event": "cancelado"}]), 'flow "f", trigger #2',
     'unknown event "cancelado"'),
    ("trigger-silence-duration", flow_with(on=[{"silence": "1 week"}]), 'flow "f", trigger #1', "silence"),
    ("trigger-after-duration", flow_with(on=[{"event": "pago", "after": "soon"}]), 'flow "f", trigger #1', "after"),
    ("trigger-cooldown-duration", flow_with(on=[{"message": ["preço"], "repeat": {"cooldown": "1w"}}]),
     'flow "f", trigger #1', "cooldown"),
    ("trigger-repeat-bad", flow_with(on=[{"message": ["preço"], "repeat": "twice"}]), 'flow "f", trigger #1',
     "repeat"),
    ("trigger-all-exclusions", flow_with(on=[{"message": ["!preço", "!prazo"]}]), 'flow "f", trigger #1', "!"),
    ("trigger-if-bad", flow_with(on=[{"message": [], "if": {"silenced": "yes"}}]), 'flow "f", trigger #1',
     "silenced"),
    # ---- step ids
    ("step-no-id", flow_with({"say": "oi"}), 'flow "f", step #2', "has no id"),
    ("step-end-id", flow_with({"id": "end", "say": "oi"}), 'flow "f", step "end"', 'reserved id "end"'),
    ("step-duplicate-id", flow_with({"id": "quem", "say": "oi"}), 'flow "f", step', "duplicates"),
    ("step-not-object", flow_with(None, steps=[GOOD_STEPS[0], None]), F, "steps[1] is null"),
    # ---- step bodies
    ("step-does-nothing", flow_with({"id": "x", "label": "nada"}), S, "does nothing"),
    ("step-mixes-kinds", flow_with({"id": "x", "say": "oi", "do": "notify", "with": {"message": "m"}}), S, "mixes"),
    ("then-missing-step", flow_with({"id": "x", "say": "oi", "then": "sumiu"}), S, 'step "sumiu"'),
    ("then-bad-shape", flow_with({"id": "x", "say": "oi", "then": 7}), S, "then"),
    ("then-clear-unknown", flow_with({"id": "x", "say": "oi", "then": {"step": "quem", "clear": ["nomee"]}}), S,
     'unknown field "nomee" in then.clear'),
    ("collect-unknown-field", flow_with({"id": "x", "collect": ["nomee"]}), S, 'unknown field "nomee" in collect'),
    ("collect-not-list", flow_with({"id": "x", "collect": "nome"}), S, "not a list"),
    ("ask-unknown-field", flow_with({"id": "x", "collect": ["nome"], "ask": {"nomee": "?"}}), S,
     'unknown field "nomee" in ask'),
    ("max-asks-zero", flow_with({"id": "x", "collect": ["nome"], "maxAsks": 0}), S, "maxAsks"),
    ("prompt-not-text", flow_with({"id": "x", "prompt": ["a"]}), S, "prompt"),
    ("question-without-collect", flow_with({"id": "x", "prompt": "p", "question": "Qual?"}), S, "question"),
    ("branch-neither", flow_with({"id": "x", "prompt": "p", "branches": [{"then": "fim"}]}), S,
     "branches[0] has neither when nor if"),
    ("branch-if-bad", flow_with({"id": "x", "prompt": "p", "branches": [{"if": {"equals": {"qtd": "3"}},
                                                                        "then": "fim"}]}), S, "branches[0].if"),
    ("branch-then-missing", flow_with({"id": "x", "prompt": "p", "branches": [{"when": "quer sair",
                                                                              "then": "sumiu"}]}), S, "sumiu"),
    ("step-tools-unknown", flow_with({"id": "x", "prompt": "p", "tools": ["pesquisar"]}), S,
     'unknown tool "pesquisar"'),
    ("step-instruction-if", flow_with({"id": "x", "prompt": "p", "instructions": [{"prompt": "i",
                                                                                  "if": {"vipp": 1}}]}), S,
     'unknown condition "vipp"'),
    ("do-unknown-action", flow_with({"id": "x", "do": "nofity"}), S, 'unknown action "nofity"'),
    ("do-missing-param", flow_with({"id": "x", "do": "notify"}), S, 'needs parameter "message"'),
    ("do-wrong-type", flow_with({"id": "x", "do": "notify", "with": {"message": 3}}), S, 'parameter "message"'),
    ("do-off-enum", flow_with({"id": "x", "do": "stage", "with": {"stage": "c"}}), S, 'one of "a", "b"'),
    ("do-fraction-int", flow_with({"id": "x", "do": "stage", "with": {"stage": "a", "score": 2.5}}), S,
     'parameter "score"'),
    ("do-extra-param", flow_with({"id": "x", "do": "notify", "with": {"message": "m", "to": "x"}}), S,
     'has no parameter "to"'),
    ("do-with-not-object", flow_with({"id": "x", "do": "notify", "with": "m"}), S, "with"),
    ("do-onfail-missing", flow_with({"id": "x", "do": "notify", "with": {"message": "m"}, "onFail": "sumiu"}), S,
     "sumiu"),
    ("wait-bad-duration", flow_with({"id": "x", "wait": "5 min"}), S, "5 min"),
    ("wait-when-branch", flow_with({"id": "x", "wait": "1h", "else": "fim",
                                    "branches": [{"if": {"known": ["nomee"]}, "then": "fim"}]}), S, "nomee"),
    ("wait-else-missing", flow_with({"id": "x", "wait": "1h", "else": "sumiu"}), S, "sumiu"),
    ("wait-event-unknown", flow_with({"id": "x", "wait": {"event": "cancelado"}}), S, 'unknown event "cancelado"'),
    ("wait-event-no-event", flow_with({"id": "x", "wait": {"upTo": "1d"}}), S, "event"),
    ("wait-event-upto", flow_with({"id": "x", "wait": {"event": "pago", "upTo": "1 mês"}}), S, "upTo"),
    ("if-unknown-field", flow_with({"id": "x", "if": {"equals": {"nomee": "x"}}}), S, 'unknown field "nomee"'),
    ("if-wrong-type", flow_with({"id": "x", "if": {"equals": {"confirmado": "sim"}}}), S, "confirmado"),
    ("if-off-enum", flow_with({"id": "x", "if": {"equals": {"tamanho": "9000"}}}), S, "tamanho"),
    ("if-known-not-list", flow_with({"id": "x", "if": {"known": "nome"}}), S, "known"),
    ("if-equals-not-object", flow_with({"id": "x", "if": {"equals": ["nome"]}}), S, "equals"),
    # found by tests/fuzz/test_inputs_fuzz.py: a step `if` that is not a condition crashed with AttributeError
    ("if-not-a-condition-list", flow_with({"id": "x", "if": []}), S, "if is a list, not a condition"),
    ("if-not-a-condition-text", flow_with({"id": "x", "if": "vip"}), S, 'if is "vip", not a condition'),
    ("if-not-a-condition-bool", flow_with({"id": "x", "if": True}), S, "if is true, not a condition"),
    ("if-backward-no-else", flow_with({"id": "x", "if": {"known": ["nome"]}, "then": "quem"}), S,
     'jumps back to "quem"'),
    ("if-else-missing", flow_with({"id": "x", "if": {"known": ["nome"]}, "else": "sumiu"}), S, "sumiu"),
    ("say-not-text", flow_with({"id": "x", "say": {"text": "oi"}}), S, "say"),
]


def _refusal(call) -> str:
    with pytest.raises(FlowConfigurationError) as caught:
        call()
    return str(caught.value)


def _check(message: str, where: str, what: str) -> None:
    assert message.startswith(f"[FlowConfigurationError] {where}"), message
    assert what in message, message
    head = message.split(": ", 1)
    assert len(head) == 2 and head[1], f"no '<where>: <what>' structure: {message}"


def make_agent(flows):
    f = falai().fields(FIELDS)
    return f.agent(name="Ana", provider=mock_provider(), flows=flows, actions=ACTIONS, events=EVENTS,
                   conditions=CONDITIONS, tools=TOOLS)


def test_the_good_flow_is_accepted():
    assert validate_flow(flow_with(), REGISTRIES).warnings == []
    make_agent([flow_with()])


@pytest.mark.parametrize(("flow", "where", "what"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate_flow_refuses_naming_flow_and_step(flow, where, what):
    _check(_refusal(lambda: validate_flow(flow, REGISTRIES)), where, what)


@pytest.mark.parametrize(("flow", "where", "what"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_agent_constructor_refuses_with_the_same_words(flow, where, what):
    message = _refusal(lambda: make_agent([flow]))
    _check(message, where, what)


def test_the_constructor_refuses_a_duplicate_flow_id():
    message = _refusal(lambda: make_agent([flow_with(), flow_with()]))
    assert 'flow "f"' in message


def test_the_constructor_refuses_a_condition_shadowing_a_builtin():
    f = falai().fields(FIELDS)
    message = _refusal(lambda: f.agent(name="Ana", provider=mock_provider(), flows=[flow_with()],
                                       actions=ACTIONS, conditions={"known": {"check": lambda c, a: True}}))
    assert "known" in message


def _as_spec(flow):
    """The FlowSpec form: each step with its `kind` (derived the way to_spec does)."""
    spec = copy.deepcopy(flow)
    for step in spec.get("steps") or []:
        if not isinstance(step, dict):
            continue
        if "say" in step:
            step["kind"] = "say"
        elif "do" in step:
            step["kind"] = "do"
        elif "wait" in step:
            step["kind"] = "waitEvent" if isinstance(step["wait"], dict) else "wait"
        elif "if" in step:
            step["kind"] = "if"
        elif "collect" in step:
            step["kind"] = "collect"
        elif "prompt" in step:
            step["kind"] = "prompt"
    return spec


SPEC_CASES = [c for c in CASES if isinstance(c[1].get("steps"), list)]


@pytest.mark.parametrize(("flow", "where", "what"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_a_flowspec_with_the_error_is_refused_by_from_spec_or_the_constructor(flow, where, what):
    def build():
        make_agent([from_spec(_as_spec(flow))])

    _check(_refusal(build), where, what)


def test_a_flowspec_whose_kind_disagrees_with_its_body_names_the_step():
    spec = _as_spec(flow_with())
    spec["steps"][2]["kind"] = "do"
    message = _refusal(lambda: validate_flow(spec, REGISTRIES))
    assert message.startswith('[FlowConfigurationError] flow "f", step "fim"'), message
