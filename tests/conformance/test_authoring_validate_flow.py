"""validate_flow (authoring note §9.4, README rulings 3, 4, 10), written from the spec alone.

Tests match on the `<where>: <what>` part of `[FlowConfigurationError] <where>: <what>. <fix>.`
"""

from __future__ import annotations

import pytest

from falai_django import FlowConfigurationError, falai, validate_flow
from falai_django.testing import mock_provider

f = falai().fields({
    "nome": {"type": "string", "ask": "Pergunte o nome."},
    "plain": {"type": "string"},
    "outro": {"type": "string"},
    "tamanho": {"type": "string", "enum": ["1-10", "11-50"]},
    "idade": {"type": "integer"},
    "valor": {"type": "number"},
    "ok": {"type": "boolean"},
    "aberto": {"type": "boolean", "extract": "anywhere"},
})

NOTIFY = f.action(
    parameters={
        "message": {"type": "string"},
        "level": {"type": "string", "enum": ["low", "high"], "optional": True},
        "n": {"type": "integer", "optional": True},
        "x": {"type": "number", "optional": True},
        "flag": {"type": "boolean", "optional": True},
        "tags": {"type": "array", "items": {"type": "string"}, "optional": True},
    },
    run=lambda params, ctx: {"ok": True},
)
PING = f.action(parameters={}, run=lambda params, ctx: {"ok": True})

REG = {
    "fields": dict(f.fields),
    "actions": {"notify": NOTIFY, "ping": PING},
    "events": {"paid": f.event(), "stage": f.event(direction="inbound")},
    "conditions": {"vip": f.condition(lambda ctx, arg: True)},
    "tools": [{"id": "lookup", "handler": lambda args, ctx: {}, "parameters": {"type": "object", "properties": {}}}],
}


def flow(**kw):
    base = {"id": "f", "name": "F", "steps": [{"id": "a", "say": "oi"}]}
    base.update(kw)
    return base


def err(fl, reg=REG) -> str:
    with pytest.raises(FlowConfigurationError) as exc:
        validate_flow(fl, reg)
    msg = str(exc.value)
    assert msg.startswith("[FlowConfigurationError] "), msg
    return msg


def where_what(fl, reg=REG) -> str:
    return err(fl, reg)[len("[FlowConfigurationError] "):]


def warnings(fl, reg=REG) -> list[str]:
    return validate_flow(fl, reg).warnings


# ----------------------------------------------------------------------------- basics

def test_valid_flow_returns_object_with_empty_warnings():
    r = validate_flow(flow(), REG)
    assert r.warnings == []
    assert isinstance(r.warnings, list)


def test_accepts_agent_as_registries():
    agent = f.agent(name="Ana", provider=mock_provider(), flows=[flow()],
                    actions={"notify": NOTIFY})
    assert validate_flow(flow(steps=[{"id": "a", "do": "notify", "with": {"message": "x"}}]), agent).warnings == []
    assert 'unknown action "ping"' in err(flow(steps=[{"id": "a", "do": "ping"}]), agent)


def test_error_format_has_fix_sentence():
    msg = err(flow(clearOnStart=["zz"]))
    assert msg.startswith('[FlowConfigurationError] flow "f": unknown field "zz" in clearOnStart. ')
    assert msg.rstrip().endswith(".")


# ----------------------------------------------------------------------------- 1-3

@pytest.mark.parametrize("fl", [{"name": "x", "steps": []}, {"id": "", "name": "x", "steps": []}])
def test_flow_without_id(fl):
    assert where_what(fl).startswith("flow: has no id")


def test_steps_not_a_list():
    assert where_what({"id": "f", "name": "F"}).startswith('flow "f": has no steps list')


def test_step_without_id_uses_position():
    msg = where_what(flow(steps=[{"id": "a", "say": "x"}, {"say": "y"}]))
    assert msg.startswith('flow "f", step #2: has no id')
    msg = where_what(flow(steps=[{"id": "", "say": "y"}]))
    assert msg.startswith('flow "f", step #1: has no id')


def test_reserved_end_id():
    assert 'uses the reserved id "end"' in err(flow(steps=[{"id": "end", "say": "x"}]))


def test_duplicate_step_id():
    msg = where_what(flow(steps=[{"id": "a", "say": "x"}, {"id": "a", "say": "y"}]))
    assert msg.startswith('flow "f", step "a": duplicates an earlier step id')


# ----------------------------------------------------------------------------- 4-8

def test_triggers_but_no_steps():
    assert where_what(flow(on=[{"message": ["x"]}], steps=[])).startswith('flow "f": has triggers but no steps')


def test_no_triggers_and_no_steps_is_fine():
    assert validate_flow(flow(steps=[]), REG).warnings == []


def test_clear_on_start_unknown_field():
    assert where_what(flow(clearOnStart=["nome", "zz"])).startswith('flow "f": unknown field "zz" in clearOnStart')


def test_flow_collect_unknown_field():
    assert where_what(flow(collect=["zz"])).startswith('flow "f": unknown field "zz" in collect')


@pytest.mark.parametrize(("pred", "what"), [
    ({"equals": ["nome"]}, "while.equals is not an object"),
    ({"equals": {"zz": "x"}}, 'unknown field "zz" in while.equals'),
    ({"equals": {"idade": "3"}}, 'while.equals gives "idade" a string, but the field is an integer'),
    ({"equals": {"valor": True}}, 'while.equals gives "valor" a boolean, but the field is a number'),
    ({"equals": {"ok": 1}}, 'while.equals gives "ok" a number, but the field is a boolean'),
    ({"equals": {"nome": 5}}, 'while.equals gives "nome" a number, but the field is a string'),
    ({"equals": {"tamanho": "x"}}, 'while.equals gives "tamanho" "x", which is not one of "1-10", "11-50"'),
    ({"known": "nome"}, "while.known is not a list"),
    ({"known": ["zz"]}, 'unknown field "zz" in while.known'),
    ({"silenced": "yes"}, "while.silenced is not a boolean"),
    ({"nope": 1}, 'unknown condition "nope" in while'),
])
def test_while_predicate_checks(pred, what):
    assert where_what(flow(**{"while": pred})).startswith(f'flow "f": {what}')


@pytest.mark.parametrize("pred", [
    {"equals": {"idade": 3}}, {"equals": {"idade": 3.0}}, {"equals": {"valor": 1.5}},
    {"equals": {"tamanho": "1-10"}}, {"equals": {"tamanho": "{{context.t}}"}}, {"known": ["nome"]},
    {"silenced": False}, {"vip": {"any": "thing"}}, {},
    {"equals": {"ok": True}, "known": ["nome"], "vip": 1},
])
def test_while_predicates_that_pass(pred):
    assert validate_flow(flow(**{"while": pred}), REG).warnings == []


def test_function_predicates_are_not_inspected():
    assert validate_flow(flow(**{"while": lambda ctx: True}), REG).warnings == []


def test_flow_tools_unknown():
    assert where_what(flow(tools=["lookup", "zz"])).startswith('flow "f": unknown tool "zz"')


def test_flow_instruction_if():
    fl = flow(instructions=[{"prompt": "x"}, {"prompt": "y", "if": {"zz": True}}])
    assert where_what(fl).startswith('flow "f": unknown condition "zz" in instructions[1].if')


# ----------------------------------------------------------------------------- 9 triggers

@pytest.mark.parametrize("trigger", [{}, {"kind": "message", "when": "x"}, {"repeat": "once"}])
def test_trigger_names_no_kind(trigger):
    fl = flow(on=[{"message": ["a"]}, trigger])
    assert where_what(fl).startswith('flow "f", trigger #2: names no trigger kind')


def test_trigger_unknown_event():
    assert where_what(flow(on=[{"event": "zz"}])).startswith('flow "f", trigger #1: unknown event "zz"')


@pytest.mark.parametrize(("trigger", "what"), [
    ({"silence": "tomorrow"}, 'silence has duration "tomorrow", which does not parse'),
    ({"event": "paid", "after": "5 min"}, 'after has duration "5 min", which does not parse'),
    ({"message": ["x"], "repeat": {"cooldown": "1w"}}, 'cooldown has duration "1w", which does not parse'),
])
def test_trigger_durations(trigger, what):
    msg = where_what(flow(on=[trigger]))
    assert msg.startswith('flow "f", trigger #1: ')
    assert what in msg


def test_trigger_if_predicate():
    msg = where_what(flow(on=[{"message": ["x"], "if": {"zz": 1}}]))
    assert msg.startswith('flow "f", trigger #1: unknown condition "zz" in if')


@pytest.mark.parametrize("kind", ["message", "mention"])
def test_trigger_all_exclusions(kind):
    msg = where_what(flow(on=[{kind: ["!preço", " ", "!"]}]))
    assert msg.startswith(f'flow "f", trigger #1: every {kind} phrase starts with "!", so nothing can ever match it')


def test_trigger_mixed_phrases_and_catch_all_ok():
    assert validate_flow(flow(on=[{"message": ["preço", "!frete"]}, {"message": []}, {"mention": ["x!"]}]), REG).warnings == []


def test_message_exclusion_fix_suggests_empty_list():
    msg = err(flow(on=[{"message": ["!x"]}]))
    assert "[]" in msg or "empty list" in msg


# ----------------------------------------------------------------------------- 10 steps

def test_step_does_nothing():
    assert where_what(flow(steps=[{"id": "a", "label": "x"}])).startswith('flow "f", step "a": does nothing')


@pytest.mark.parametrize("key", ["then", "else"])
def test_dangling_then_else(key):
    step = {"id": "a", "wait": "1h", key: "zz"}
    assert where_what(flow(steps=[step])).startswith(f'flow "f", step "a": {key} points at step "zz", which does not exist')


def test_dangling_step_target_and_clear():
    fl = flow(steps=[{"id": "a", "say": "x", "then": {"step": "zz"}}])
    assert 'then points at step "zz", which does not exist' in err(fl)
    fl = flow(steps=[{"id": "a", "say": "x", "then": {"step": "b", "clear": ["zz"]}}, {"id": "b", "say": "y"}])
    assert where_what(fl).startswith('flow "f", step "a": unknown field "zz" in then.clear')


def test_end_target_is_fine():
    assert validate_flow(flow(steps=[{"id": "a", "say": "x", "then": "end"}]), REG).warnings == []


def test_collect_and_ask_unknown():
    assert 'step "a": unknown field "zz" in collect' in err(flow(steps=[{"id": "a", "collect": ["nome", "zz"]}]))
    fl = flow(steps=[{"id": "a", "collect": ["nome"], "ask": {"zz": "x"}}])
    assert 'step "a": unknown field "zz" in ask' in err(fl)


def test_branch_checks():
    base = {"id": "a", "prompt": "p"}
    fl = flow(steps=[{**base, "branches": [{"then": "end"}]}])
    assert where_what(fl).startswith('flow "f", step "a": branches[0] has neither when nor if')
    fl = flow(steps=[{**base, "branches": [{"when": "x", "then": "end"}, {"if": {"known": ["zz"]}, "then": "end"}]}])
    assert 'unknown field "zz" in branches[1].if.known' in err(fl)
    fl = flow(steps=[{**base, "branches": [{"when": "x", "then": "zz"}]}])
    assert 'branches[0].then points at step "zz", which does not exist' in err(fl)


def test_step_instructions_and_tools():
    fl = flow(steps=[{"id": "a", "prompt": "p", "instructions": [{"prompt": "x", "if": {"zz": 1}}]}])
    assert 'step "a": unknown condition "zz" in instructions[0].if' in err(fl)
    fl = flow(steps=[{"id": "a", "prompt": "p", "tools": ["zz"]}])
    assert where_what(fl).startswith('flow "f", step "a": unknown tool "zz"')
    assert validate_flow(flow(steps=[{"id": "a", "prompt": "p", "tools": ["lookup"]}]), REG).warnings == []


def test_do_unknown_action():
    assert where_what(flow(steps=[{"id": "a", "do": "zz"}])).startswith('flow "f", step "a": unknown action "zz"')


def test_do_on_fail_target():
    fl = flow(steps=[{"id": "a", "do": "ping", "onFail": "zz"}])
    assert 'onFail points at step "zz", which does not exist' in err(fl)


def test_timer_wait_duration():
    msg = where_what(flow(steps=[{"id": "a", "wait": "5 min"}]))
    assert msg.startswith('flow "f", step "a": wait has duration "5 min", which does not parse')


def test_event_wait_checks():
    assert 'step "a": unknown event "zz" in wait' in err(flow(steps=[{"id": "a", "wait": {"event": "zz"}}]))
    msg = err(flow(steps=[{"id": "a", "wait": {"event": "paid", "upTo": "soon"}}]))
    assert 'wait.upTo has duration "soon", which does not parse' in msg


def test_if_step_checks():
    assert 'step "a": unknown condition "zz" in if' in err(flow(steps=[{"id": "a", "if": {"zz": 1}}]))
    fl = flow(steps=[{"id": "q", "collect": ["nome"]}, {"id": "a", "if": {"known": ["nome"]}, "then": "q"}])
    assert where_what(fl).startswith('flow "f", step "a": "if" jumps back to "q" with no else')
    fl = flow(steps=[{"id": "a", "if": {"known": ["nome"]}, "then": "a"}])
    assert '"if" jumps back to "a" with no else' in err(fl)
    fl = flow(steps=[{"id": "q", "collect": ["nome"]}, {"id": "a", "if": {"known": ["nome"]}, "then": "q", "else": "end"}])
    validate_flow(fl, REG)


# ----------------------------------------------------------------------------- with

def do(with_=None, action="notify"):
    step = {"id": "a", "do": action}
    if with_ is not None:
        step["with"] = with_
    return flow(steps=[step])


@pytest.mark.parametrize(("with_", "what"), [
    (None, 'action "notify" needs parameter "message"'),
    ({}, 'action "notify" needs parameter "message"'),
    ({"message": None}, 'action "notify" needs parameter "message"'),
    ({"message": 5}, 'parameter "message" of action "notify" must be a string, got number'),
    ({"message": True}, 'parameter "message" of action "notify" must be a string, got boolean'),
    ({"message": {"a": 1}}, 'parameter "message" of action "notify" must be a string, got object'),
    ({"message": ["a"]}, 'parameter "message" of action "notify" must be a string, got list'),
    ({"message": "x", "n": 3.5}, 'parameter "n" of action "notify" must be an integer, got number'),
    ({"message": "x", "n": "3"}, 'parameter "n" of action "notify" must be an integer, got string'),
    ({"message": "x", "n": "{{data.idade}}"}, 'parameter "n" of action "notify" must be an integer, got string'),
    ({"message": "x", "x": "1.5"}, 'parameter "x" of action "notify" must be a number, got string'),
    ({"message": "x", "x": True}, 'parameter "x" of action "notify" must be a number, got boolean'),
    ({"message": "x", "flag": 1}, 'parameter "flag" of action "notify" must be a boolean, got number'),
    ({"message": "x", "level": "mid"}, 'parameter "level" of action "notify" must be one of "low", "high", got "mid"'),
    ({"message": "x", "tags": "a"}, 'parameter "tags" of action "notify" must be a list of strings, got string'),
    ({"message": "x", "zz": 1}, 'action "notify" has no parameter "zz"'),
])
def test_with_checks(with_, what):
    assert where_what(do(with_)).startswith(f'flow "f", step "a": {what}')


@pytest.mark.parametrize("with_", [
    {"message": "x"},
    {"message": "{{data.nome}}", "level": "{{context.lvl}}"},
    {"message": "x", "n": 3, "x": 2, "flag": False, "level": "high", "tags": ["a", "b"]},
    {"message": "x", "n": 3.0},
    {"message": "x", "tags": []},
])
def test_with_that_passes(with_):
    assert validate_flow(do(with_), REG).warnings == []


def test_with_item_type_checked():
    msg = err(do({"message": "x", "tags": ["a", 1]}))
    assert 'parameter "tags" of action "notify" must be a list of strings' in msg


def test_with_checks_in_declaration_order_then_extras():
    msg = err(do({"zz": 1, "n": "bad"}))
    assert 'needs parameter "message"' in msg
    msg = err(do({"message": "x", "zz": 1, "n": "bad"}))
    assert 'parameter "n" of action "notify" must be an integer' in msg


def test_action_without_parameters_takes_nothing():
    validate_flow(do(None, "ping"), REG)
    assert 'action "ping" has no parameter "a"' in err(do({"a": 1}, "ping"))


def test_boolean_never_satisfies_numeric_enum():
    reg = {**REG, "actions": {"n": f.action(parameters={"k": {"type": "number", "enum": [1, 2]}}, run=lambda p, c: {"ok": True})}}
    msg = err(flow(steps=[{"id": "a", "do": "n", "with": {"k": True}}]), reg)
    assert 'parameter "k" of action "n" must be' in msg
    validate_flow(flow(steps=[{"id": "a", "do": "n", "with": {"k": 1.0}}]), reg)


# ----------------------------------------------------------------------------- order

@pytest.mark.parametrize(("fl", "expected"), [
    ({"name": "x"}, "flow: has no id"),
    ({"id": "f", "steps": [{"say": "x"}], "clearOnStart": ["zz"]}, 'flow "f", step #1: has no id'),
    ({"id": "f", "on": [{}], "steps": [], "clearOnStart": ["zz"]}, 'flow "f": has triggers but no steps'),
    (flow(clearOnStart=["zz"], **{"while": {"zz2": 1}}), 'unknown field "zz" in clearOnStart'),
    (flow(tools=["zz"], **{"while": {"zz2": 1}}), 'unknown condition "zz2" in while'),
    (flow(tools=["zz"], instructions=[{"prompt": "x", "if": {"c": 1}}]), 'unknown tool "zz"'),
    (flow(on=[{}], instructions=[{"prompt": "x", "if": {"c": 1}}]), 'unknown condition "c" in instructions[0].if'),
    (flow(on=[{}], steps=[{"id": "a", "say": "x", "then": "zz"}]), "trigger #1: names no trigger kind"),
    (flow(on=[{"event": "zz", "silence": "bad"}]), 'unknown event "zz"'),
    (flow(steps=[{"id": "a", "say": "x", "then": "zz"}, {"id": "b", "do": "zz"}]), 'then points at step "zz"'),
    (flow(steps=[{"id": "a", "wait": "1h", "then": "z1", "else": "z2"}]), 'then points at step "z1"'),
    (flow(steps=[{"id": "a", "collect": ["z1"], "ask": {"z2": "x"}, "then": "z3"}]), 'then points at step "z3"'),
    (flow(steps=[{"id": "a", "collect": ["z1"], "ask": {"z2": "x"}}]), 'unknown field "z1" in collect'),
    (flow(steps=[{"id": "a", "do": "notify", "with": {}, "onFail": "zz"}]), 'needs parameter "message"'),
    (flow(steps=[{"id": "a", "do": "zz", "onFail": "zz"}]), 'unknown action "zz"'),
    (flow(clearOnStart=["zz"], steps=[{"id": "a"}]), 'unknown field "zz" in clearOnStart'),
    (flow(on=[{}], steps=[{"id": "a"}]), "trigger #1: names no trigger kind"),
    (flow(steps=[{"id": "a", "then": "zz"}]), 'step "a": does nothing'),
    (flow(steps=[{"id": "a", "say": "x", "then": "zz"}, {"id": "b"}]), 'then points at step "zz"'),
    (flow(steps=[{"id": "a", "kind": "say"}]), 'step "a": does nothing'),
])
def test_check_order(fl, expected):
    assert expected in err(fl)


# ----------------------------------------------------------------------------- late shapes

@pytest.mark.parametrize(("fl", "expected"), [
    (None, "flow: is null, not an object"),
    (flow(steps=["x"]), 'steps[0] is "x", not an object'),
    (flow(steps=[{"id": "a", "do": "ping", "with": "x"}]), 'with is "x", not an object'),
    (flow(steps=[{"id": "a", "collect": "nome"}]), 'collect is "nome", not a list'),
    (flow(on={"message": []}), "on is"),
    (flow(clearOnStart="nome"), 'clearOnStart is "nome", not a list'),
    (flow(tools="lookup"), 'tools is "lookup", not a list'),
    (flow(on=[{"message": "preço"}]), 'message is "preço", not a list'),
    (flow(steps=[{"id": "a", "say": 42}]), "say is 42, not text"),
    (flow(steps=[{"id": "a", "prompt": 1}]), "prompt is 1, not text"),
    (flow(description=5), "description is 5, not text"),
    (flow(anchor=5), "anchor is 5, not text"),
    (flow(onEnd="restart"), 'onEnd is "restart", which is not one of "end", "stay", "reset"'),
    (flow(instructions=[{"kind": "may", "prompt": "x"}]), 'instructions[0].kind is "may", which is not one of'),
    (flow(on=[{"message": [], "repeat": "never"}]), 'repeat is "never"'),
    (flow(steps=[{"id": "a", "collect": ["nome"], "maxAsks": "3"}]), 'maxAsks is "3", not a whole number of 1 or more'),
    (flow(steps=[{"id": "a", "collect": ["nome"], "maxAsks": 0}]), "maxAsks is 0, not a whole number of 1 or more"),
    (flow(steps=[{"id": "a", "collect": ["nome"], "maxAsks": 1.5}]), "not a whole number of 1 or more"),
    (flow(steps=[{"id": "a", "wait": {"upTo": "1d"}}]), "wait has no event"),
    (flow(steps=[{"id": "a", "say": "x", "then": 5}]), "then is 5, not a step id or a target"),
    (flow(steps=[{"id": "a", "say": "x", "do": "ping"}]), 'mixes "say" and "do"'),
    (flow(steps=[{"id": "a", "kind": "do", "say": "x"}]), 'has kind "do", but its body is a "say" step'),
    (flow(steps=[{"id": "a", "prompt": "x", "question": "Nome?"}]), "has a question but collects nothing"),
])
def test_late_shape_families(fl, expected):
    assert expected in err(fl)


def test_shape_where_is_the_step():
    assert where_what(flow(steps=[{"id": "a", "say": 42}])).startswith('flow "f", step "a": say is 42, not text')
    assert where_what(flow(onEnd="x")).startswith('flow "f": onEnd is "x"')
    assert where_what(flow(on=[{"message": [], "repeat": "x"}])).startswith('flow "f", trigger #1: repeat is "x"')


def test_prompt_and_collect_together_is_one_talk_step():
    validate_flow(flow(steps=[{"id": "a", "prompt": "p", "collect": ["nome"]}]), REG)


def test_nulls_are_stripped_first():
    fl = flow(description=None, onEnd=None, steps=[{"id": "a", "kind": "say", "say": "x", "then": None, "once": None}])
    assert validate_flow(fl, REG).warnings == []


def test_spec_kinds_accepted():
    fl = flow(steps=[
        {"id": "p", "kind": "prompt", "prompt": "x"},
        {"id": "c", "kind": "collect", "collect": ["nome"]},
        {"id": "w", "kind": "wait", "wait": "1h"},
        {"id": "e", "kind": "waitEvent", "wait": {"event": "paid", "upTo": "3d"}},
        {"id": "i", "kind": "if", "if": {"known": ["nome"]}},
        {"id": "d", "kind": "do", "do": "ping"},
    ])
    assert validate_flow(fl, REG).warnings == []


# ----------------------------------------------------------------------------- warnings

def test_backward_jump_without_clear_warns():
    fl = flow(steps=[{"id": "q", "collect": ["nome"]}, {"id": "b", "say": "x", "then": "q"}])
    ws = warnings(fl)
    assert len(ws) == 1
    assert 'step "b"' in ws[0]
    assert 'jumps back to "q" without clear' in ws[0]


def test_backward_jump_with_clear_or_forward_no_warning():
    fl = flow(steps=[{"id": "q", "collect": ["nome"]}, {"id": "b", "say": "x", "then": {"step": "q", "clear": ["nome"]}}])
    assert warnings(fl) == []
    fl = flow(steps=[{"id": "q", "say": "x", "then": "b"}, {"id": "b", "say": "x"}])
    assert warnings(fl) == []


def test_backward_with_empty_clear_and_self_jump_warn():
    fl = flow(steps=[{"id": "q", "collect": ["nome"]}, {"id": "b", "say": "x", "then": {"step": "q", "clear": []}}])
    assert len(warnings(fl)) == 1
    fl = flow(steps=[{"id": "w", "wait": "1h", "else": "w"}])
    ws = warnings(fl)
    assert len(ws) == 1 and 'jumps back to "w" without clear' in ws[0] and "else" in ws[0]


def test_backward_branch_and_on_fail_warn():
    fl = flow(steps=[{"id": "q", "collect": ["nome"], "branches": [{"when": "x", "then": "q"}]}])
    assert any("branches[0].then" in w and 'jumps back to "q"' in w for w in warnings(fl))
    fl = flow(steps=[{"id": "q", "say": "x"}, {"id": "d", "do": "ping", "onFail": "q"}])
    assert any("onFail" in w for w in warnings(fl))


def test_collect_without_guidance_warns():
    fl = flow(steps=[{"id": "a", "collect": ["plain", "outro"]}])
    ws = warnings(fl)
    assert len(ws) == 1
    assert 'step "a"' in ws[0] and 'collects "plain", "outro" with no prompt and no ask' in ws[0]


@pytest.mark.parametrize("step", [
    {"id": "a", "collect": ["plain"], "prompt": "p"},
    {"id": "a", "collect": ["plain"], "question": "Qual?"},
    {"id": "a", "collect": ["plain"], "ask": {"plain": "x"}},
    {"id": "a", "collect": ["plain", "nome"]},
    {"id": "a", "collect": []},
])
def test_collect_with_some_guidance_does_not_warn(step):
    assert warnings(flow(steps=[step])) == []


def test_flow_collect_asked_field_not_collected_by_a_step_warns():
    ws = warnings(flow(collect=["ok", "nome", "aberto"]))
    assert len(ws) == 1 and '"ok"' in ws[0] and 'flow "f"' in ws[0]
    assert warnings(flow(collect=["ok"], steps=[{"id": "a", "collect": ["ok"], "prompt": "p"}])) == []


def test_ruling_3_flow_target_missing_is_warning():
    reg = {**REG, "flows": [{"id": "f"}, {"id": "vendas"}]}
    fl = flow(steps=[{"id": "a", "say": "x", "then": {"flow": "humano"}}])
    ws = validate_flow(fl, reg).warnings
    assert len(ws) == 1
    w = ws[0]
    assert 'flow "f"' in w and 'step "a"' in w and '"humano"' in w and "flow-gone" in w
    fl = flow(steps=[{"id": "a", "say": "x", "then": {"flow": "vendas"}}])
    assert validate_flow(fl, reg).warnings == []
    fl = flow(steps=[{"id": "a", "say": "x", "then": {"flow": "{{data.nome}}"}}])
    assert validate_flow(fl, reg).warnings == []
    fl = flow(steps=[{"id": "a", "say": "x", "then": {"flow": "humano"}}])
    assert validate_flow(fl, REG).warnings == []  # no flows registry: not checked


def test_ruling_3_agent_still_builds():
    fl = flow(steps=[{"id": "a", "say": "x", "then": {"flow": "humano"}}])
    agent = f.agent(name="Ana", provider=mock_provider(), flows=[fl])
    assert any("flow-gone" in w for w in agent.warnings)


def test_ruling_4_when_branch_on_timer_wait_is_warning():
    fl = flow(steps=[{"id": "w", "wait": "1h", "else": "end", "branches": [{"if": {"known": ["nome"]}, "then": "end"},
                                                                       {"when": "pediu preço", "then": "end"}]}])
    ws = warnings(fl)
    assert len(ws) == 1
    assert 'flow "f"' in ws[0] and 'step "w"' in ws[0] and "branches[1]" in ws[0]


def test_warnings_accumulate_in_order():
    fl = flow(steps=[{"id": "a", "collect": ["plain"]}, {"id": "b", "say": "x", "then": "a"}])
    ws = warnings(fl)
    assert len(ws) == 2
    assert "collects" in ws[0] and "jumps back" in ws[1]
