"""validate_flow (authoring note §9.4 and the README rulings 3 and 4): every error family,
every warning, message texts `[FlowConfigurationError] <where>: <what>. <fix>.`"""

from __future__ import annotations

import pytest

from falai_django.engine.errors import FlowConfigurationError
from falai_django.engine.flows import Flow
from falai_django.engine.spec import validate_flow

FIELDS = {
    "nome": {"type": "string", "ask": "Pergunte o nome da pessoa, sem tom de formulário."},
    "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
    "tamanho": {
        "type": "string",
        "enum": ["1-10", "11-50", "51-200", "200+"],
        "ask": "Pergunte quantas pessoas trabalham lá e ofereça as faixas.",
    },
    "confirmado": {"type": "boolean", "ask": "Resuma em uma frase o que anotou e pergunte se está tudo certo."},
    "orcamento": {"type": "number"},
    "qtd": {"type": "integer"},
    "etapa": {"type": "string", "enum": ["novo", "quente"]},
    "aceite": {"type": "boolean"},
}


def _ok(params, ctx):
    return {"ok": True}


REGISTRIES = {
    "fields": FIELDS,
    "actions": {
        "notify": {"parameters": {"recipient": {"type": "string"}, "message": {"type": "string"}}, "run": _ok},
        "add_tags": {"parameters": {"tags": {"type": "array", "items": {"type": "string"}}}, "run": _ok},
        "stage": {
            "parameters": {
                "stage": {"type": "string", "enum": ["a", "b"]},
                "score": {"type": "integer", "optional": True},
                "nivel": {"type": "number", "enum": [1, 2], "optional": True},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "optional": True},
            },
            "run": _ok,
        },
        "ping": {"parameters": {}, "run": _ok},
    },
    "events": {"pago": {"direction": "inbound"}, "visita": {}},
    "conditions": {"vip": {"check": lambda ctx, arg: True}},
    "tools": [{"id": "buscar", "handler": lambda args, ctx: None}],
    "flows": [{"id": "triagem"}, {"id": "vendas"}],
}

TRIAGEM = {
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
}


def flow(*steps, **extra):
    out = {"id": "f", "name": "F", "steps": list(steps) if steps else [{"id": "a", "prompt": "Oi"}]}
    out.update(extra)
    return out


def message_of(f, registries=REGISTRIES) -> str:
    with pytest.raises(FlowConfigurationError) as err:
        validate_flow(f, registries)
    return str(err.value)


def assert_error(f, where_what: str, registries=REGISTRIES) -> None:
    text = message_of(f, registries)
    prefix = f"[FlowConfigurationError] {where_what}. "
    assert text.startswith(prefix), text
    fix = text[len(prefix):]
    assert fix and fix.endswith("."), text


# --------------------------------------------------------------------------- the seed flow


def test_triagem_validates_without_warnings():
    assert validate_flow(TRIAGEM, REGISTRIES).warnings == []


def test_a_typo_in_a_field_names_flow_step_and_field():
    bad = {**TRIAGEM, "steps": [{**TRIAGEM["steps"][0], "collect": ["nomee", "empresa"]}, *TRIAGEM["steps"][1:]]}
    assert_error(bad, 'flow "triagem", step "quem": unknown field "nomee" in collect')


def test_registries_may_be_an_agent_like_object_and_flows_optional():
    class Reg:
        fields = FIELDS
        actions = REGISTRIES["actions"]
        events = REGISTRIES["events"]
        conditions = REGISTRIES["conditions"]
        tools = REGISTRIES["tools"]

    assert validate_flow(TRIAGEM, Reg()).warnings == []
    assert validate_flow(Flow.from_dict(TRIAGEM), {"fields": FIELDS}).warnings == []


# --------------------------------------------------------------------------- ids and steps


@pytest.mark.parametrize(
    ("f", "where_what"),
    [
        (None, "flow: is null, not an object"),
        ({"name": "x", "steps": []}, "flow: has no id"),
        ({"id": "", "steps": []}, "flow: has no id"),
        ({"id": "f", "name": "F"}, 'flow "f": has no steps list'),
        ({"id": "f", "steps": "a"}, 'flow "f": has no steps list'),
        (flow({"id": "a", "prompt": "x"}, {"prompt": "y"}), 'flow "f", step #2: has no id'),
        (flow({"id": "a", "prompt": "x"}, {"id": "", "prompt": "y"}), 'flow "f", step #2: has no id'),
        (flow({"id": "end", "prompt": "x"}), 'flow "f", step "end": uses the reserved id "end"'),
        (flow({"id": "a", "prompt": "x"}, {"id": "a", "say": "y"}), 'flow "f", step "a": duplicates an earlier step id'),
        (flow({"id": "a", "prompt": "x"}, 5), 'flow "f": steps[1] is 5, not an object'),
        ({"id": "f", "name": "F", "on": [{"message": []}], "steps": []}, 'flow "f": has triggers but no steps'),
    ],
)
def test_ids_and_steps(f, where_what):
    assert_error(f, where_what)


def test_null_step_entry_is_reported_not_stripped():
    spec = flow({"id": "a", "prompt": "x"}, None)
    assert_error(spec, 'flow "f": steps[1] is null, not an object')


def test_empty_steps_without_triggers_is_fine():
    assert validate_flow({"id": "manual", "name": "M", "steps": []}, REGISTRIES).warnings == []


# --------------------------------------------------------------------------- flow level names


@pytest.mark.parametrize(
    ("extra", "where_what"),
    [
        ({"clearOnStart": ["nome", "x"]}, 'flow "f": unknown field "x" in clearOnStart'),
        ({"clear_on_start": ["y"]}, 'flow "f": unknown field "y" in clearOnStart'),
        ({"collect": ["nome", "zz"]}, 'flow "f": unknown field "zz" in collect'),
        ({"tools": ["buscar", "nada"]}, 'flow "f": unknown tool "nada"'),
        ({"instructions": [{"prompt": "x", "if": {"vipp": True}}]}, 'flow "f": unknown condition "vipp" in instructions[0].if'),
        ({"while": {"nope": 1}}, 'flow "f": unknown condition "nope" in while'),
    ],
)
def test_flow_level_names(extra, where_what):
    assert_error(flow(**extra), where_what)


# --------------------------------------------------------------------------- predicates


@pytest.mark.parametrize(
    ("pred", "what"),
    [
        ({"equals": ["nome"]}, "while.equals is not an object"),
        ({"equals": {"nomee": "x"}}, 'unknown field "nomee" in while.equals'),
        ({"equals": {"orcamento": "100"}}, 'while.equals gives "orcamento" a string, but the field is a number'),
        ({"equals": {"confirmado": 1}}, 'while.equals gives "confirmado" a number, but the field is a boolean'),
        ({"equals": {"qtd": 2.5}}, 'while.equals gives "qtd" a number, but the field is an integer'),
        ({"equals": {"nome": True}}, 'while.equals gives "nome" a boolean, but the field is a string'),
        ({"equals": {"nome": ["a"]}}, 'while.equals gives "nome" a list, but the field is a string'),
        ({"equals": {"etapa": "frio"}}, 'while.equals gives "etapa" "frio", which is not one of "novo", "quente"'),
        ({"known": "nome"}, "while.known is not a list"),
        ({"known": ["nome", "x"]}, 'unknown field "x" in while.known'),
        ({"silenced": "yes"}, "while.silenced is not a boolean"),
        ({"vip": True, "gold": 1}, 'unknown condition "gold" in while'),
        (5, "while is 5, not a condition"),
    ],
)
def test_predicate_checks(pred, what):
    assert_error(flow(**{"while": pred}), f'flow "f": {what}')


def test_predicates_that_pass():
    good = {
        "equals": {"qtd": 3.0, "etapa": "{{context.etapa}}", "confirmado": False, "orcamento": 10.5},
        "known": ["nome"],
        "silenced": False,
        "vip": {"any": "argument"},
    }
    assert validate_flow(flow(**{"while": good}), REGISTRIES).warnings == []
    # functions are not inspected
    assert validate_flow(flow(**{"while": lambda ctx: True}), REGISTRIES).warnings == []


def test_equals_template_still_needs_the_right_type():
    assert_error(
        flow(**{"while": {"equals": {"qtd": "{{context.qtd}}"}}}),
        'flow "f": while.equals gives "qtd" a string, but the field is an integer',
    )


# --------------------------------------------------------------------------- triggers


@pytest.mark.parametrize(
    ("trigger", "what"),
    [
        ({"kind": "message", "when": ["oi"]}, "names no trigger kind"),
        ({"repeat": "always"}, "names no trigger kind"),
        ({"event": "pagou"}, 'unknown event "pagou"'),
        ({"silence": "tomorrow"}, 'silence has duration "tomorrow", which does not parse'),
        ({"event": "pago", "after": "5 min"}, 'after has duration "5 min", which does not parse'),
        ({"message": ["oi"], "repeat": {"cooldown": "1w"}}, 'repeat.cooldown has duration "1w", which does not parse'),
        ({"message": ["oi"], "if": {"gold": 1}}, 'unknown condition "gold" in if'),
        ({"message": ["!spam", " ", "!"]}, 'every message phrase starts with "!", so nothing can ever match it'),
        ({"mention": ["!preço"]}, 'every mention phrase starts with "!", so nothing can ever match it'),
    ],
)
def test_trigger_checks(trigger, what):
    assert_error(flow(on=[{"message": ["oi"]}, trigger]), f'flow "f", trigger #2: {what}')


def test_catch_all_message_exclusion_fix_mentions_empty_list():
    text = message_of(flow(on=[{"message": ["!spam"]}]))
    assert "empty list" in text
    text = message_of(flow(on=[{"mention": ["!spam"]}]))
    assert "empty list" not in text


def test_valid_triggers():
    on = [
        {"message": []},
        {"message": ["quero comprar", "!só olhando"], "repeat": {"cooldown": "24h"}},
        {"mention": ["concorrente"], "extract": {"trecho": {"type": "string"}}},
        {"mention": [], "if": {"vip": True}},
        {"silence": "1.5h", "businessHours": True, "if": {"known": ["nome"]}},
        {"event": "pago", "after": "10m", "repeat": "once"},
    ]
    assert validate_flow(flow(on=on), REGISTRIES).warnings == []


# --------------------------------------------------------------------------- steps


@pytest.mark.parametrize(
    ("step", "what"),
    [
        ({"id": "s", "label": "nada"}, "does nothing"),
        ({"id": "s", "say": "oi", "do": "ping"}, 'mixes "say" and "do"'),
        ({"id": "s", "prompt": "oi", "wait": "5m"}, 'mixes "prompt" and "wait"'),
        ({"id": "s", "collect": ["nome"], "if": {"known": ["nome"]}}, 'mixes "collect" and "if"'),
        ({"id": "s", "kind": "do", "say": "oi"}, 'has kind "do", but its body is a "say" step'),
        ({"id": "s", "kind": "prompt", "prompt": "x", "collect": ["nome"]}, 'has kind "prompt", but its body is a "collect" step'),
        ({"id": "s", "kind": "wait", "wait": {"event": "pago"}}, 'has kind "wait", but its body is a "waitEvent" step'),
        ({"id": "s", "kind": "talk", "prompt": "x"}, 'kind is "talk", which is not one of "prompt", "collect", "say", "do", "wait", "waitEvent", "if"'),
        ({"id": "s", "prompt": "x", "then": "zz"}, 'then points at step "zz", which does not exist'),
        ({"id": "s", "wait": "5m", "else": {"step": "zz"}}, 'else points at step "zz", which does not exist'),
        ({"id": "s", "wait": "5m", "else": {"step": "a", "clear": ["nome", "x"]}}, 'unknown field "x" in else.clear'),
        ({"id": "s", "collect": ["nome"], "ask": {"nomee": "?"}}, 'unknown field "nomee" in ask'),
        ({"id": "s", "prompt": "x", "branches": [{"then": "a"}]}, "branches[0] has neither when nor if"),
        ({"id": "s", "prompt": "x", "branches": [{"when": "w", "then": "a"}, {"if": {"gold": 1}, "then": "a"}]}, 'unknown condition "gold" in branches[1].if'),
        ({"id": "s", "prompt": "x", "branches": [{"when": "w", "then": "zz"}]}, 'branches[0].then points at step "zz", which does not exist'),
        ({"id": "s", "prompt": "x", "instructions": [{"prompt": "p", "if": {"gold": 1}}]}, 'unknown condition "gold" in instructions[0].if'),
        ({"id": "s", "prompt": "x", "tools": ["nada"]}, 'unknown tool "nada"'),
        ({"id": "s", "do": "send_email"}, 'unknown action "send_email"'),
        ({"id": "s", "do": "notify", "with": {"recipient": "owner"}}, 'action "notify" needs parameter "message"'),
        ({"id": "s", "do": "notify", "with": {"recipient": "o", "message": 5}}, 'parameter "message" of action "notify" must be a string, got number'),
        ({"id": "s", "do": "add_tags", "with": {"tags": "vip"}}, 'parameter "tags" of action "add_tags" must be a list of strings, got string'),
        ({"id": "s", "do": "add_tags", "with": {"tags": ["a", 1]}}, 'parameter "tags" of action "add_tags" must be a list of strings, got list'),
        ({"id": "s", "do": "stage", "with": {"stage": "c"}}, 'parameter "stage" of action "stage" must be one of "a", "b", got "c"'),
        ({"id": "s", "do": "stage", "with": {"stage": "a", "tags": ["x", "z"]}}, 'parameter "tags" of action "stage" must be one of "x", "y", got "z"'),
        ({"id": "s", "do": "stage", "with": {"stage": "a", "score": 3.5}}, 'parameter "score" of action "stage" must be an integer, got number'),
        ({"id": "s", "do": "stage", "with": {"stage": "a", "score": "3"}}, 'parameter "score" of action "stage" must be an integer, got string'),
        ({"id": "s", "do": "stage", "with": {"stage": "a", "score": "{{data.qtd}}"}}, 'parameter "score" of action "stage" must be an integer, got string'),
        ({"id": "s", "do": "stage", "with": {"stage": "a", "nivel": True}}, 'parameter "nivel" of action "stage" must be a number, got boolean'),
        ({"id": "s", "do": "stage", "with": {"stage": "a", "nivel": 3}}, 'parameter "nivel" of action "stage" must be one of 1, 2, got 3'),
        ({"id": "s", "do": "stage", "with": {"stage": {"a": 1}}}, 'parameter "stage" of action "stage" must be a string, got object'),
        ({"id": "s", "do": "notify", "with": {"recipient": "o", "message": "m", "to": "x"}}, 'action "notify" has no parameter "to"'),
        ({"id": "s", "do": "ping", "with": {"x": 1}}, 'action "ping" has no parameter "x"'),
        ({"id": "s", "do": "ping", "onFail": "zz"}, 'onFail points at step "zz", which does not exist'),
        ({"id": "s", "wait": "5 min"}, 'wait has duration "5 min", which does not parse'),
        ({"id": "s", "wait": {"event": "pagou"}}, 'unknown event "pagou" in wait'),
        ({"id": "s", "wait": {"event": "pago", "upTo": "1w"}}, 'wait.upTo has duration "1w", which does not parse'),
        ({"id": "s", "if": {"gold": True}}, 'unknown condition "gold" in if'),
        ({"id": "s", "if": {"known": ["nome"]}, "then": "a"}, '"if" jumps back to "a" with no else'),
        ({"id": "s", "if": {"known": ["nome"]}, "then": "s"}, '"if" jumps back to "s" with no else'),
    ],
)
def test_step_checks(step, what):
    assert_error(flow({"id": "a", "prompt": "Oi"}, step), f'flow "f", step "s": {what}')


def test_with_checks_that_pass():
    steps = [
        {"id": "a", "do": "notify", "with": {"recipient": "owner", "message": "{{data.nome}} chegou"}},
        {"id": "b", "do": "stage", "with": {"stage": "{{context.stage}}", "score": 3.0, "nivel": 2, "tags": []}},
        {"id": "c", "do": "ping"},
        {"id": "d", "do": "add_tags", "with": {"tags": ["vip", "{{data.etapa}}"]}, "onFail": "end"},
    ]
    assert validate_flow(flow(*steps), REGISTRIES).warnings == []


def test_if_step_going_back_with_else_is_fine():
    steps = [
        {"id": "a", "collect": ["nome"]},
        {"id": "b", "if": {"known": ["nome"]}, "then": {"step": "a", "clear": ["nome"]}, "else": "end"},
    ]
    assert validate_flow(flow(*steps), REGISTRIES).warnings == []


def test_a_step_without_id_is_named_by_position():
    assert_error(flow({"id": "a", "prompt": "x"}, {"say": "oi"}, {"id": "c", "say": "z"}), 'flow "f", step #2: has no id')


def test_first_problem_wins():
    # clearOnStart (check 5) is reported before the step problem (check 10)
    f = flow({"id": "a", "collect": ["nomee"]}, clearOnStart=["x"])
    assert_error(f, 'flow "f": unknown field "x" in clearOnStart')


# --------------------------------------------------------------------------- shape families ([late])


@pytest.mark.parametrize(
    ("f", "where_what"),
    [
        (flow(on={"message": []}), 'flow "f": on is an object, not a list'),
        (flow(collect="nome"), 'flow "f": collect is "nome", not a list'),
        (flow(clearOnStart="nome"), 'flow "f": clearOnStart is "nome", not a list'),
        (flow(tools="buscar"), 'flow "f": tools is "buscar", not a list'),
        (flow(instructions={"prompt": "x"}), 'flow "f": instructions is an object, not a list'),
        (flow(description=42), 'flow "f": description is 42, not text'),
        (flow(anchor=["lead"]), 'flow "f": anchor is a list, not text'),
        (flow(onEnd="restart"), 'flow "f": onEnd is "restart", which is not one of "end", "stay", "reset"'),
        (flow(instructions=[{"prompt": "x", "kind": "may"}]), 'flow "f": instructions[0].kind is "may", which is not one of "must", "never", "should"'),
        (flow(on=[{"message": "oi"}]), 'flow "f", trigger #1: message is "oi", not a list'),
        (flow(on=[{"mention": "oi"}]), 'flow "f", trigger #1: mention is "oi", not a list'),
        (flow(on=[{"message": [], "repeat": "never"}]), 'flow "f", trigger #1: repeat is "never"'),
        (flow(on=[{"mention": ["x"], "extract": ["trecho"]}]), 'flow "f", trigger #1: extract is a list, not an object'),
        (flow({"id": "s", "say": 42}), 'flow "f", step "s": say is 42, not text'),
        (flow({"id": "s", "prompt": ["x"]}), 'flow "f", step "s": prompt is a list, not text'),
        (flow({"id": "s", "collect": ["nome"], "question": 1}), 'flow "f", step "s": question is 1, not text'),
        (flow({"id": "s", "collect": "nome"}), 'flow "f", step "s": collect is "nome", not a list'),
        (flow({"id": "s", "prompt": "x", "branches": {"when": "w"}}), 'flow "f", step "s": branches is an object, not a list'),
        (flow({"id": "s", "prompt": "x", "tools": "buscar"}), 'flow "f", step "s": tools is "buscar", not a list'),
        (flow({"id": "s", "collect": ["nome"], "maxAsks": "3"}), 'flow "f", step "s": maxAsks is "3", not a whole number of 1 or more'),
        (flow({"id": "s", "collect": ["nome"], "maxAsks": 0}), 'flow "f", step "s": maxAsks is 0, not a whole number of 1 or more'),
        (flow({"id": "s", "collect": ["nome"], "maxAsks": 1.5}), 'flow "f", step "s": maxAsks is 1.5, not a whole number of 1 or more'),
        (flow({"id": "s", "wait": {"upTo": "1d"}}), 'flow "f", step "s": wait has no event'),
        (flow({"id": "s", "prompt": "x", "then": 5}), 'flow "f", step "s": then is 5, not a step id or a target'),
        (flow({"id": "s", "if": {}, "else": {"x": 1}}), 'flow "f", step "s": else is an object, not a step id or a target'),
        (flow({"id": "s", "prompt": "x", "then": {"step": "s", "clear": "nome"}}), 'flow "f", step "s": then.clear is "nome", not a list'),
        (flow({"id": "s", "do": "ping", "with": "x"}), 'flow "f", step "s": with is "x", not an object'),
        (flow({"id": "s", "prompt": "x", "question": "Qual?"}), 'flow "f", step "s": has a question but collects nothing'),
        (flow({"id": "s", "collect": [], "prompt": "x", "question": "Qual?"}), 'flow "f", step "s": has a question but collects nothing'),
    ],
)
def test_shape_families(f, where_what):
    assert_error(f, where_what)


OBJ = {"a": {"b": 1}}


@pytest.mark.parametrize(
    ("f", "where_what"),
    [
        (flow(on=OBJ), 'flow "f": on is an object, not a list'),
        (flow(collect=OBJ), 'flow "f": collect is an object, not a list'),
        (flow(name=OBJ), 'flow "f": name is an object, not text'),
        (flow(description=["x"]), 'flow "f": description is a list, not text'),
        (flow(onEnd=OBJ), 'flow "f": onEnd is an object, which is not one of "end", "stay", "reset"'),
        (flow(onEnd=["end"]), 'flow "f": onEnd is a list, which is not one of "end", "stay", "reset"'),
        (flow(onEnd="restart"), 'flow "f": onEnd is "restart", which is not one of "end", "stay", "reset"'),
        (flow(instructions=[["x"]]), 'flow "f": instructions[0] is a list, not an object'),
        (flow(instructions=[{"prompt": OBJ}]), 'flow "f": instructions[0].prompt is an object, not text'),
        (flow(instructions=[{"prompt": "x", "kind": OBJ}]),
         'flow "f": instructions[0].kind is an object, which is not one of "must", "never", "should"'),
        (flow(steps=[["x"]]), 'flow "f": steps[0] is a list, not an object'),
        (flow(on=[["message"]]), 'flow "f", trigger #1: is a list, not an object'),
        (flow(on=[{"message": OBJ}]), 'flow "f", trigger #1: message is an object, not a list'),
        (flow(on=[{"message": [], "repeat": {"cooldown": "1h", "x": 1}}]), 'flow "f", trigger #1: repeat is an object'),
        (flow(on=[{"message": [], "repeat": ["once"]}]), 'flow "f", trigger #1: repeat is a list'),
        (flow({"id": "s", "say": OBJ}), 'flow "f", step "s": say is an object, not text'),
        (flow({"id": "s", "collect": ["nome"], "question": OBJ}), 'flow "f", step "s": question is an object, not text'),
        (flow({"id": "s", "collect": OBJ}), 'flow "f", step "s": collect is an object, not a list'),
        (flow({"id": "s", "prompt": "x", "maxAsks": OBJ}), 'flow "f", step "s": maxAsks is an object, not a whole number of 1 or more'),
        (flow({"id": "s", "prompt": "x", "maxAsks": [3]}), 'flow "f", step "s": maxAsks is a list, not a whole number of 1 or more'),
        (flow({"id": "s", "prompt": "x", "then": ["end"]}), 'flow "f", step "s": then is a list, not a step id or a target'),
        (flow({"id": "s", "prompt": "x", "then": {"step": "s", "clear": OBJ}}), 'flow "f", step "s": then.clear is an object, not a list'),
        (flow({"id": "s", "do": "ping", "with": ["x"]}), 'flow "f", step "s": with is a list, not an object'),
        (flow({"id": "s", "prompt": "x", "branches": [["x"]]}), 'flow "f", step "s": branches[0] is a list, not an object'),
        (flow({"id": "s", "prompt": "x", "branches": [{"when": OBJ, "then": "end"}]}),
         'flow "f", step "s": branches[0].when is an object, not text'),
        (flow({"id": "s", "if": ["vip"]}), 'flow "f", step "s": if is a list, not a condition'),
    ],
)
def test_shape_errors_name_objects_and_lists_instead_of_printing_them(f, where_what):
    assert_error(f, where_what)
    text = message_of(f)
    assert '{"' not in text.split(". ")[0] and '"b"' not in text


def test_a_list_fix_quotes_a_scalar_example_but_never_an_object():
    assert message_of(flow(collect="nome")).endswith('Write collect as a list, such as ["nome"].')
    assert message_of(flow(on=OBJ)).endswith("Write on as a list.")


# --------------------------------------------------------------------------- warnings


def test_backward_jump_without_clear_warns():
    steps = [
        {"id": "a", "collect": ["nome"]},
        {"id": "b", "prompt": "x", "then": "a"},
        {"id": "c", "wait": "1h", "else": {"step": "c"}, "branches": [{"if": {"known": ["nome"]}, "then": "b"}]},
        {"id": "d", "do": "ping", "onFail": {"step": "a", "clear": []}, "then": {"step": "a", "clear": ["nome"]}},
    ]
    warnings = validate_flow(flow(*steps), REGISTRIES).warnings
    assert [w.split(";")[0] for w in warnings] == [
        'flow "f", step "b": then jumps back to "a" without clear',
        'flow "f", step "c": else jumps back to "c" without clear',
        'flow "f", step "c": branches[0].then jumps back to "b" without clear',
        'flow "f", step "d": onFail jumps back to "a" without clear',
    ]


def test_collect_with_nothing_to_go_on_warns():
    steps = [
        {"id": "a", "collect": ["orcamento", "qtd"]},
        {"id": "b", "collect": ["orcamento"], "prompt": "Pergunte o orçamento."},
        {"id": "c", "collect": ["orcamento"], "ask": {"orcamento": "Quanto?"}},
        {"id": "d", "collect": ["orcamento", "nome"]},  # nome has its own ask
        {"id": "e", "collect": ["qtd"], "question": "Quantos?"},
    ]
    warnings = validate_flow(flow(*steps), REGISTRIES).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith('flow "f", step "a": collects "orcamento", "qtd" with no prompt and no ask;')


def test_flow_collect_of_an_asked_field_no_step_collects_warns():
    f = flow({"id": "a", "collect": ["nome", "aceite"]}, collect=["nome", "confirmado", "aceite"])
    warnings = validate_flow(f, REGISTRIES).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith('flow "f": collect lists "confirmado"')


def test_chain_to_a_missing_flow_is_a_flow_gone_warning():
    steps = [
        {"id": "a", "prompt": "x", "then": {"flow": "humano"}},
        {"id": "b", "prompt": "y", "then": {"flow": "vendas"}},
        {"id": "c", "prompt": "z", "then": {"flow": "{{context.proximo}}"}},
    ]
    warnings = validate_flow(flow(*steps), REGISTRIES).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith('flow "f", step "a": then names flow "humano", which this agent does not have')
    assert "flow-gone" in warnings[0]
    # without registries.flows nothing is said
    no_flows = {k: v for k, v in REGISTRIES.items() if k != "flows"}
    assert validate_flow(flow(*steps), no_flows).warnings == []


def test_when_branch_on_a_timer_wait_is_a_warning():
    step = {"id": "w", "wait": "1d", "else": "end", "branches": [{"if": {"known": ["nome"]}, "then": "end"}, {"when": "disse não", "then": "end"}]}
    warnings = validate_flow(flow(step), REGISTRIES).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith('flow "f", step "w": branches[1] is a "when" branch, but a wait step is judged by code only')


# --------------------------------------------------------------------------- input forms


def test_accepts_flow_specs_with_nulls_and_kind():
    spec = {
        "id": "f", "name": "F", "description": None, "on": [{"message": [], "if": None, "repeat": None}],
        "anchor": None, "while": None, "collect": None, "clearOnStart": None, "onEnd": None, "instructions": None,
        "steps": [
            {"id": "a", "kind": "collect", "collect": ["nome"], "prompt": None, "question": None, "maxAsks": None,
             "branches": None, "label": None, "then": None},
            {"id": "b", "kind": "if", "if": {"equals": {"nome": "Ana", "etapa": None}, "known": None, "silenced": None},
             "else": None, "label": None, "then": None},
        ],
    }
    assert validate_flow(spec, REGISTRIES).warnings == []


def test_accepts_snake_case_keys():
    f = flow(
        {"id": "a", "collect": ["nome"], "max_asks": 2},
        {"id": "b", "do": "ping", "on_fail": "zz"},
        on_end="stay",
    )
    assert_error(f, 'flow "f", step "b": onFail points at step "zz", which does not exist')
