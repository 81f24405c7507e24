"""FlowSpec (authoring note §9.1–§9.3, §9.5): from_spec, to_spec, flow_spec_schema."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from falai_django.engine.errors import FlowConfigurationError
from falai_django.engine.spec import flow_spec_schema, from_spec, to_spec, validate_flow
from falai_django.engine.toolkit import falai

f = falai().fields({
    "nome": {"type": "string", "ask": "Pergunte o nome da pessoa, sem tom de formulário."},
    "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
    "tamanho": {
        "type": "string",
        "enum": ["1-10", "11-50", "51-200", "200+"],
        "ask": "Pergunte quantas pessoas trabalham lá e ofereça as faixas.",
    },
    "confirmado": {"type": "boolean", "ask": "Resuma em uma frase o que anotou e pergunte se está tudo certo."},
})

REGISTRIES = {
    "fields": f.fields,
    "actions": {
        "notify": f.action(
            parameters={"recipient": {"type": "string"}, "message": {"type": "string", "description": "Texto"}},
            run=lambda params, ctx: {"ok": True},
        ),
        "add_tags": f.action(
            parameters={
                "tags": {"type": "array", "items": {"type": "string"}},
                "prioridade": {"type": "integer", "enum": [1, 2, 3], "optional": True},
            },
            run=lambda params, ctx: {"ok": True},
        ),
        "ping": f.action(parameters={}, run=lambda params, ctx: {"ok": True}),
    },
    "events": {"pago": f.event(direction="inbound"), "visita": f.event()},
    "conditions": {"vip": f.condition(lambda ctx, arg: True)},
}

# The seed flow of the user's page as a FlowSpec: every property present, null for "not set".
TRIAGEM_SPEC = {
    "id": "triagem",
    "name": "Triagem",
    "description": None,
    "on": [{"message": [], "if": None, "repeat": None}],
    "anchor": None,
    "while": None,
    "collect": None,
    "clearOnStart": None,
    "steps": [
        {"id": "quem", "label": None, "then": None, "kind": "collect", "collect": ["nome", "empresa"],
         "prompt": "Descubra quem é e de onde fala.", "question": None, "maxAsks": None, "branches": None},
        {"id": "porte", "label": None, "then": None, "kind": "collect", "collect": ["tamanho"],
         "prompt": None, "question": None, "maxAsks": 2, "branches": None},
        {"id": "confirma", "label": None, "then": None, "kind": "collect", "collect": ["confirmado"],
         "prompt": None, "question": None, "maxAsks": None, "branches": None},
        {"id": "ok", "label": None, "then": None, "kind": "if",
         "if": {"equals": {"nome": None, "empresa": None, "tamanho": None, "confirmado": True},
                "known": None, "silenced": None, "vip": None},
         "else": {"step": "quem", "clear": ["confirmado"]}},
        {"id": "tchau", "label": None, "then": None, "kind": "prompt",
         "prompt": "Agradeça e diga que um vendedor continua daqui.", "branches": None},
    ],
    "onEnd": None,
    "instructions": None,
}


def strip_nulls(value):
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


# --------------------------------------------------------------------------- from_spec / to_spec


def test_from_spec_strips_nulls_and_kind():
    flow = from_spec(TRIAGEM_SPEC)
    assert flow["on"] == [{"message": []}]
    assert flow["steps"][0] == {
        "id": "quem", "collect": ["nome", "empresa"], "prompt": "Descubra quem é e de onde fala.",
    }
    assert flow["steps"][3] == {
        "id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "quem", "clear": ["confirmado"]},
    }
    assert "description" not in flow and "onEnd" not in flow
    assert TRIAGEM_SPEC["steps"][0]["kind"] == "collect"  # the input is not mutated


def test_round_trip_is_the_spec_minus_its_nulls():
    assert to_spec(from_spec(TRIAGEM_SPEC)) == strip_nulls(TRIAGEM_SPEC)
    plain = strip_nulls(TRIAGEM_SPEC)
    assert to_spec(from_spec(plain)) == plain


def test_round_trip_of_every_step_kind():
    spec = {
        "id": "tudo", "name": "Tudo", "description": "Quando o lead pede tudo", "anchor": "lead",
        "on": [
            {"message": ["quero tudo"], "if": {"vip": True}, "repeat": {"cooldown": "24h"}},
            {"mention": ["concorrente"], "extract": {"trecho": {"type": "string"}}},
            {"silence": "2h", "businessHours": True},
            {"event": "pago", "after": "5m"},
        ],
        "while": {"known": ["nome"]}, "collect": ["nome", "confirmado"], "clearOnStart": ["confirmado"],
        "steps": [
            {"id": "p", "kind": "prompt", "prompt": "Oi", "label": "Abertura", "ui": {"x": 1, "y": 2},
             "branches": [{"when": "quer falar com humano", "then": {"flow": "humano", "input": {"a": 1}}}],
             "tools": [], "instructions": [{"kind": "must", "prompt": "Seja breve", "if": {"silenced": False}}]},
            {"id": "c", "kind": "collect", "collect": ["nome"], "question": "Qual seu nome?", "ask": {"nome": "?"},
             "maxAsks": 2},
            {"id": "s", "kind": "say", "say": "Até já", "media": {"slug": "logo"}, "once": True},
            {"id": "d", "kind": "do", "do": "notify", "with": {"recipient": "owner", "message": "{{data.nome}}"},
             "onFail": "end"},
            {"id": "w", "kind": "wait", "wait": "1d", "businessHours": True, "else": "p",
             "branches": [{"if": {"equals": {"confirmado": False}}, "then": "end"}]},
            {"id": "e", "kind": "waitEvent", "wait": {"event": "pago", "upTo": "7d"}, "else": "end"},
            {"id": "i", "kind": "if", "if": {"equals": {"confirmado": True}}, "else": {"step": "c", "clear": ["nome"]}},
        ],
        "onEnd": "stay", "instructions": [{"prompt": "Fale português", "when": ["sempre"]}], "tools": ["x"],
    }
    assert to_spec(from_spec(spec)) == spec


def test_to_spec_accepts_typed_flows_with_snake_case_keys():
    flow = f.flow(
        id="x", name="X", on_end="reset", clear_on_start=["nome"],
        steps=[{"id": "a", "collect": ["nome"], "max_asks": 2}, {"id": "b", "do": "ping", "on_fail": "a"}],
    )
    assert to_spec(flow) == {
        "id": "x", "name": "X", "clearOnStart": ["nome"], "onEnd": "reset",
        "steps": [
            {"id": "a", "kind": "collect", "collect": ["nome"], "maxAsks": 2},
            {"id": "b", "kind": "do", "do": "ping", "onFail": "a"},
        ],
    }


def test_to_spec_empty_collect_is_a_collect_step():
    assert to_spec({"id": "x", "name": "X", "steps": [{"id": "a", "collect": [], "prompt": "p"}]})["steps"] == [
        {"id": "a", "kind": "collect", "collect": [], "prompt": "p"}
    ]


def _fn(ctx):
    return True


@pytest.mark.parametrize(
    ("flow", "where"),
    [
        ({"id": "x", "name": "X", "while": _fn, "steps": []}, 'flow "x", while'),
        ({"id": "x", "name": "X", "on": [{"message": []}, {"message": ["a"], "if": _fn}], "steps": [{"id": "a", "prompt": "p"}]},
         'flow "x", trigger #2 if'),
        ({"id": "x", "name": "X", "instructions": [{"prompt": "p", "if": _fn}], "steps": []}, 'flow "x", instructions[0].if'),
        ({"id": "x", "name": "X", "steps": [{"id": "s", "if": _fn}]}, 'flow "x", step "s" if'),
        ({"id": "x", "name": "X", "steps": [{"id": "s", "prompt": "p", "branches": [{"when": "w", "then": "s"}, {"if": _fn, "then": "s"}]}]},
         'flow "x", step "s" branches[1].if'),
        ({"id": "x", "name": "X", "steps": [{"id": "s", "prompt": "p", "instructions": [{"prompt": "i", "if": _fn}]}]},
         'flow "x", step "s" instructions[0].if'),
    ],
)
def test_to_spec_rejects_function_predicates(flow, where):
    with pytest.raises(FlowConfigurationError) as err:
        to_spec(flow)
    assert str(err.value).startswith(
        f"[FlowConfigurationError] {where}: is a function, which cannot be stored as JSON. "
    )


def test_to_spec_talk_step_without_prompt_or_collect():
    with pytest.raises(FlowConfigurationError) as err:
        to_spec({"id": "x", "name": "X", "steps": [{"id": "y", "ask": {"nome": "?"}}]})
    assert str(err.value).startswith(
        '[FlowConfigurationError] flow "x", step "y": has neither prompt nor collect. '
    )


@pytest.mark.parametrize("step", [
    {"id": "a", "prompt": "Cumprimente.", "question": "Qual é o seu nome?"},
    {"id": "a", "collect": [], "question": "Qual é o seu nome?"},
    {"id": "a", "question": "Qual é o seu nome?"},
])
def test_to_spec_refuses_a_question_that_collects_nothing_as_validate_flow_does(step):
    flow = {"id": "x", "name": "X", "steps": [step]}
    with pytest.raises(FlowConfigurationError) as by_validate:
        validate_flow(flow, REGISTRIES)
    with pytest.raises(FlowConfigurationError) as by_to_spec:
        to_spec(flow)
    assert str(by_to_spec.value).startswith(
        '[FlowConfigurationError] flow "x", step "a": has a question but collects nothing. '
    )
    assert str(by_to_spec.value) == str(by_validate.value)


def test_to_spec_keeps_a_question_that_collects_something():
    step = {"id": "a", "collect": ["nome"], "question": "Qual é o seu nome?"}
    assert to_spec({"id": "x", "name": "X", "steps": [step]})["steps"] == [{**step, "kind": "collect"}]


def test_from_spec_requires_a_steps_list():
    with pytest.raises(FlowConfigurationError) as err:
        from_spec({"id": "x", "name": "X", "steps": None})
    assert str(err.value).startswith('[FlowConfigurationError] flow "x": has no steps list. ')


def test_from_spec_runs_shape_checks_but_not_names():
    with pytest.raises(FlowConfigurationError) as err:
        from_spec({"id": "x", "name": "X", "steps": [{"id": "a", "kind": "do", "say": "oi"}]})
    assert 'flow "x", step "a": has kind "do", but its body is a "say" step. ' in str(err.value)
    with pytest.raises(FlowConfigurationError) as err:
        from_spec({"id": "x", "name": "X", "steps": [{"id": "a", "kind": "say", "say": "oi", "do": "x"}]})
    assert 'flow "x", step "a": mixes "say" and "do". ' in str(err.value)
    # unknown names pass here; validate_flow reports them
    flow = from_spec({"id": "x", "name": "X", "steps": [{"id": "a", "kind": "do", "do": "nada"}]})
    assert flow["steps"] == [{"id": "a", "do": "nada"}]


def test_toolkit_from_spec_is_the_same_function():
    assert f.from_spec(TRIAGEM_SPEC) == from_spec(TRIAGEM_SPEC)


# --------------------------------------------------------------------------- flow_spec_schema


def test_schema_is_a_valid_json_schema():
    schema = flow_spec_schema(REGISTRIES)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft7Validator.check_schema(schema)
    json.dumps(schema)  # plain JSON


def test_triagem_spec_validates_against_the_schema_and_the_validator():
    schema = flow_spec_schema(REGISTRIES)
    jsonschema.Draft202012Validator(schema).validate(TRIAGEM_SPEC)
    assert validate_flow(TRIAGEM_SPEC, REGISTRIES).warnings == []


def test_schema_is_closed_and_everything_is_required():
    schema = flow_spec_schema(REGISTRIES)

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" or node.get("type") == ["object", "null"]:
                assert node["additionalProperties"] is False
                assert node["required"] == list(node["properties"])
            assert "oneOf" not in node
            assert "pattern" not in node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert list(schema["properties"]) == [
        "id", "name", "description", "on", "anchor", "while", "collect", "clearOnStart", "steps", "onEnd", "instructions",
    ]
    assert schema["properties"]["collect"]["type"] == ["array", "null"]


def test_schema_rejects_what_a_model_must_not_write():
    validator = jsonschema.Draft202012Validator(flow_spec_schema(REGISTRIES))
    bad_missing_null = copy.deepcopy(TRIAGEM_SPEC)
    del bad_missing_null["anchor"]
    assert not validator.is_valid(bad_missing_null)
    bad_field = copy.deepcopy(TRIAGEM_SPEC)
    bad_field["steps"][0]["collect"] = ["nomee"]
    assert not validator.is_valid(bad_field)
    bad_kind = copy.deepcopy(TRIAGEM_SPEC)
    bad_kind["steps"][4]["kind"] = "talk"
    assert not validator.is_valid(bad_kind)
    extra = copy.deepcopy(TRIAGEM_SPEC)
    extra["steps"][4]["ui"] = {}
    assert not validator.is_valid(extra)


def _wait_step(branch):
    return {"id": "w", "kind": "wait", "label": None, "then": None, "wait": "1h", "businessHours": None,
            "else": None, "branches": [branch]}


def test_schema_wait_branches_take_if_and_then_only():
    validator = jsonschema.Draft202012Validator(flow_spec_schema(REGISTRIES))
    spec = copy.deepcopy(TRIAGEM_SPEC)
    if_branch = {"if": {"equals": None, "known": ["nome"], "silenced": None, "vip": None}, "then": "end"}
    spec["steps"] = [_wait_step(if_branch)]
    validator.validate(spec)
    spec["steps"] = [_wait_step({"when": "o cliente disse não", "then": "end"})]
    assert not validator.is_valid(spec)
    spec["steps"] = [_wait_step({**if_branch, "when": "o cliente disse não"})]
    assert not validator.is_valid(spec)
    # a talk step still takes a `when` branch
    talk = {"id": "p", "kind": "prompt", "label": None, "then": None, "prompt": "Oi",
            "branches": [{"when": "o cliente disse não", "then": "end"}]}
    spec["steps"] = [talk]
    validator.validate(spec)


def _variants(schema):
    return schema["properties"]["steps"]["items"]["anyOf"]


def test_one_do_variant_per_action_with_its_parameters():
    schema = flow_spec_schema(REGISTRIES)
    dos = [v for v in _variants(schema) if v["properties"]["kind"]["enum"] == ["do"]]
    assert [v["properties"]["do"]["enum"] for v in dos] == [["notify"], ["add_tags"], ["ping"]]
    notify, add_tags, ping = dos
    assert notify["properties"]["with"] == {
        "type": "object",
        "properties": {"recipient": {"type": "string"}, "message": {"type": "string", "description": "Texto"}},
        "required": ["recipient", "message"],
        "additionalProperties": False,
    }
    # optional parameters stay required but accept null
    assert add_tags["properties"]["with"]["required"] == ["tags", "prioridade"]
    assert add_tags["properties"]["with"]["properties"]["prioridade"] == {
        "anyOf": [{"type": "integer", "enum": [1, 2, 3]}, {"type": "null"}]
    }
    assert "with" not in ping["properties"]  # no parameters: no with at all
    assert notify["required"] == ["id", "label", "then", "kind", "do", "with", "onFail"]

    validator = jsonschema.Draft202012Validator(schema)
    step = {"id": "a", "label": None, "then": None, "kind": "do", "do": "add_tags",
            "with": {"tags": ["vip"], "prioridade": None}, "onFail": None}
    assert validator.is_valid({**TRIAGEM_SPEC, "steps": [step]})
    wrong = {**step, "do": "notify"}
    assert not validator.is_valid({**TRIAGEM_SPEC, "steps": [wrong]})


def test_nullable_enums_admit_null_but_keep_the_list_pure():
    schema = flow_spec_schema(REGISTRIES)
    validator = jsonschema.Draft202012Validator(schema)
    assert schema["properties"]["onEnd"]["anyOf"][0]["enum"] == ["end", "stay", "reset"]
    equals = _variants(schema)[-1]["properties"]["if"]["properties"]["equals"]
    assert equals["properties"]["tamanho"] == {
        "anyOf": [{"type": "string", "enum": ["1-10", "11-50", "51-200", "200+"]}, {"type": "null"}]
    }
    assert equals["properties"]["nome"] == {"type": ["string", "null"]}
    assert validator.is_valid({**TRIAGEM_SPEC, "onEnd": "stay"})
    assert not validator.is_valid({**TRIAGEM_SPEC, "onEnd": "restart"})
    step = copy.deepcopy(TRIAGEM_SPEC["steps"][3])
    step["if"]["equals"]["tamanho"] = "1000+"
    assert not validator.is_valid({**TRIAGEM_SPEC, "steps": [step]})


def test_variants_follow_the_registries():
    schema = flow_spec_schema(REGISTRIES)
    kinds = [v["properties"]["kind"]["enum"][0] for v in _variants(schema)]
    assert kinds == ["prompt", "collect", "say", "do", "do", "do", "wait", "waitEvent", "if"]
    collect = _variants(schema)[1]
    assert collect["properties"]["question"]["type"] == ["string", "null"]
    triggers = schema["properties"]["on"]["items"]["anyOf"]
    assert [next(iter(t["properties"])) for t in triggers] == ["message", "mention", "silence", "event"]
    assert triggers[3]["properties"]["event"]["enum"] == ["pago", "visita"]
    condition = _variants(schema)[-1]["properties"]["if"]
    assert list(condition["properties"]) == ["equals", "known", "silenced", "vip"]

    bare = flow_spec_schema({"fields": {}})
    jsonschema.Draft202012Validator.check_schema(bare)
    kinds = [v["properties"]["kind"]["enum"][0] for v in _variants(bare)]
    assert kinds == ["prompt", "say", "wait", "if"]
    assert "collect" not in bare["properties"] and "clearOnStart" not in bare["properties"]
    bare_condition = _variants(bare)[-1]["properties"]["if"]
    assert list(bare_condition["properties"]) == ["silenced"]
    bare_triggers = bare["properties"]["on"]["items"]["anyOf"]
    assert len(bare_triggers) == 3


def test_schema_from_an_agent_equals_schema_from_its_options():
    agent = f.agent(name="Ana", provider=object(), **{k: v for k, v in REGISTRIES.items() if k != "fields"})
    assert flow_spec_schema(agent) == flow_spec_schema(REGISTRIES)
