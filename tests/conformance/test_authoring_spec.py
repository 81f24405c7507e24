"""FlowSpec: from_spec / to_spec (§9.2, §9.3) and flow_spec_schema (§9.5, ruling 5).
Written from the spec alone."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from falai_django import FlowConfigurationError, falai, flow_spec_schema, from_spec, to_spec, validate_flow

f = falai().fields({
    "nome": {"type": "string", "ask": "Pergunte o nome."},
    "tamanho": {"type": "string", "enum": ["1-10", "11-50"]},
    "idade": {"type": "integer"},
})

SPEC = {
    "id": "triagem",
    "name": "Triagem",
    "description": "Qualifica o lead",
    "on": [{"message": ["quero comprar", "!suporte"], "repeat": {"cooldown": "1d"}, "if": {"known": ["nome"]}},
           {"event": "paid", "after": "5m"}],
    "anchor": "lead",
    "while": {"equals": {"tamanho": "1-10"}},
    "collect": ["nome"],
    "clearOnStart": ["idade"],
    "steps": [
        {"id": "quem", "kind": "collect", "collect": ["nome"], "question": "Qual seu nome?", "maxAsks": 2,
         "branches": [{"when": "pediu humano", "then": {"flow": "humano"}}], "ui": {"x": 1}, "label": "Quem"},
        {"id": "p", "kind": "prompt", "prompt": "Explique", "tools": [], "instructions": [{"kind": "must", "prompt": "x",
                                                                                         "if": {"silenced": False}}]},
        {"id": "s", "kind": "say", "say": "Oi {{data.nome}}", "media": {"slug": "logo"}, "once": True},
        {"id": "d", "kind": "do", "do": "notify", "with": {"message": "{{data.nome}}"}, "onFail": "end"},
        {"id": "w", "kind": "wait", "wait": "1h", "businessHours": True, "else": {"step": "quem", "clear": ["nome"]},
         "branches": [{"if": {"known": ["idade"]}, "then": "end"}]},
        {"id": "e", "kind": "waitEvent", "wait": {"event": "paid", "upTo": "3d"}, "else": "end"},
        {"id": "i", "kind": "if", "if": {"known": ["nome"]}, "else": "end", "then": "end"},
    ],
    "onEnd": "stay",
    "instructions": [{"id": "r1", "kind": "never", "when": ["x"], "prompt": "nunca"}],
    "tools": ["lookup"],
}


# ----------------------------------------------------------------------------- from_spec

def test_from_spec_drops_kind_and_nothing_else():
    flow = from_spec(SPEC)
    assert all("kind" not in s for s in flow["steps"])
    expected = copy.deepcopy(SPEC)
    for s in expected["steps"]:
        del s["kind"]
    assert flow == expected


def test_from_spec_strips_nulls_at_any_depth():
    spec = {"id": "f", "name": "F", "description": None, "on": None, "steps": [
        {"id": "a", "kind": "say", "say": "x", "then": None, "media": None, "ui": {"k": None, "j": 1}},
        {"id": "b", "kind": "do", "do": "notify", "with": {"message": "m", "level": None}},
    ]}
    flow = from_spec(spec)
    assert flow == {"id": "f", "name": "F", "steps": [
        {"id": "a", "say": "x", "ui": {"j": 1}}, {"id": "b", "do": "notify", "with": {"message": "m"}}]}
    assert spec["description"] is None  # input not mutated
    assert spec["steps"][0]["kind"] == "say"


def test_from_spec_requires_steps_list():
    with pytest.raises(FlowConfigurationError) as exc:
        from_spec({"id": "x", "name": "X"})
    assert 'flow "x": has no steps list' in str(exc.value)
    with pytest.raises(FlowConfigurationError):
        from_spec({"id": "x", "name": "X", "steps": None})


def test_from_spec_runs_shape_checks_but_not_names():
    flow = from_spec({"id": "x", "name": "X", "steps": [{"id": "a", "kind": "do", "do": "nonexistent"}]})
    assert flow["steps"][0]["do"] == "nonexistent"
    with pytest.raises(FlowConfigurationError) as exc:
        from_spec({"id": "x", "name": "X", "steps": [{"id": "a", "kind": "do", "say": "x"}]})
    assert 'has kind "do", but its body is a "say" step' in str(exc.value)
    with pytest.raises(FlowConfigurationError) as exc:
        from_spec({"id": "x", "name": "X", "steps": [{"id": "a", "say": "x", "do": "y"}]})
    assert 'mixes "say" and "do"' in str(exc.value)
    with pytest.raises(FlowConfigurationError) as exc:
        from_spec({"id": "x", "name": "X", "clearOnStart": ["unknown"], "steps": [{"id": "a", "label": "l"}]})
    assert 'step "a": does nothing' in str(exc.value)
    with pytest.raises(FlowConfigurationError) as exc:
        from_spec({"id": "x", "name": "X", "steps": "nope"})
    assert "steps" in str(exc.value)


def test_toolkit_from_spec():
    assert f.from_spec(SPEC) == from_spec(SPEC)


# ----------------------------------------------------------------------------- to_spec

def test_round_trip_equals_spec():
    assert to_spec(from_spec(SPEC)) == SPEC


def test_round_trip_minus_nulls():
    spec = {"id": "f", "name": "F", "anchor": None, "steps": [{"id": "a", "kind": "say", "say": "x", "once": None}]}
    assert to_spec(from_spec(spec)) == {"id": "f", "name": "F", "steps": [{"id": "a", "kind": "say", "say": "x"}]}


def test_to_spec_never_writes_none():
    out = to_spec({"id": "f", "name": "F", "steps": [{"id": "a", "say": "x"}]})
    assert out == {"id": "f", "name": "F", "steps": [{"id": "a", "kind": "say", "say": "x"}]}
    assert "null" not in json.dumps(out)


@pytest.mark.parametrize(("step", "kind"), [
    ({"id": "a", "say": "x"}, "say"),
    ({"id": "a", "do": "n"}, "do"),
    ({"id": "a", "wait": "1h"}, "wait"),
    ({"id": "a", "wait": {"event": "paid"}}, "waitEvent"),
    ({"id": "a", "if": {"known": ["nome"]}}, "if"),
    ({"id": "a", "collect": []}, "collect"),
    ({"id": "a", "collect": ["nome"], "prompt": "p"}, "collect"),
    ({"id": "a", "prompt": "p"}, "prompt"),
])
def test_to_spec_kind(step, kind):
    out = to_spec({"id": "f", "name": "F", "steps": [step]})
    assert out["steps"][0]["kind"] == kind
    assert {k: v for k, v in out["steps"][0].items() if k != "kind"} == step


def test_to_spec_talk_without_prompt_or_collect():
    with pytest.raises(FlowConfigurationError) as exc:
        to_spec({"id": "x", "name": "X", "steps": [{"id": "y", "ask": {"nome": "q"}}]})
    assert str(exc.value).startswith('[FlowConfigurationError] flow "x", step "y": has neither prompt nor collect. ')


def test_to_spec_accepts_snake_case_keys():
    out = to_spec({"id": "f", "name": "F", "clear_on_start": ["nome"], "on_end": "reset",
                   "steps": [{"id": "a", "do": "n", "on_fail": "end"}]})
    assert out["clearOnStart"] == ["nome"] and out["onEnd"] == "reset"
    assert out["steps"][0]["onFail"] == "end"


def fn(ctx):
    return True


@pytest.mark.parametrize(("flow", "where"), [
    ({"while": fn}, 'flow "x", while'),
    ({"on": [{"message": []}, {"message": ["a"], "if": fn}]}, 'flow "x", trigger #2 if'),
    ({"instructions": [{"prompt": "p", "if": fn}]}, 'flow "x", instructions[0].if'),
    ({"steps": [{"id": "s", "if": fn}]}, 'flow "x", step "s" if'),
    ({"steps": [{"id": "s", "prompt": "p", "branches": [{"when": "a", "then": "end"}, {"if": fn, "then": "end"}]}]},
     'flow "x", step "s" branches[1].if'),
    ({"steps": [{"id": "s", "prompt": "p", "instructions": [{"prompt": "p", "if": fn}]}]},
     'flow "x", step "s" instructions[0].if'),
])
def test_to_spec_rejects_functions(flow, where):
    base = {"id": "x", "name": "X", "steps": [{"id": "a", "say": "x"}]}
    base.update(flow)
    with pytest.raises(FlowConfigurationError) as exc:
        to_spec(base)
    assert str(exc.value).startswith(f"[FlowConfigurationError] {where}: is a function, which cannot be stored as JSON. ")


# ----------------------------------------------------------------------------- flow_spec_schema

def _notify_run(params, ctx):
    return {"ok": True}


REG = {
    "fields": dict(f.fields),
    "actions": {
        "notify": f.action(parameters={"message": {"type": "string", "description": "Texto"},
                                       "level": {"type": "string", "enum": ["low", "high"], "optional": True},
                                       "tags": {"type": "array", "items": {"type": "string"}, "optional": True}},
                           run=_notify_run),
        "ping": f.action(parameters={}, run=_notify_run),
    },
    "events": {"paid": f.event()},
    "conditions": {"vip": f.condition(lambda ctx, arg: True)},
    "tools": [{"id": "lookup", "handler": lambda a, c: {}}],
}


def walk(schema, path="$"):
    yield path, schema
    if isinstance(schema, dict):
        for k, v in schema.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            yield from walk(v, f"{path}[{i}]")


def variants(schema):
    return schema["properties"]["steps"]["items"]["anyOf"]


def kinds(schema):
    return [v["properties"]["kind"]["enum"][0] for v in variants(schema)]


def test_schema_is_json_serialisable_and_a_valid_schema():
    s = flow_spec_schema(REG)
    json.dumps(s)
    jsonschema.Draft202012Validator.check_schema(s)


def test_every_object_closed_and_all_required():
    s = flow_spec_schema(REG)
    n = 0
    for path, node in walk(s):
        if isinstance(node, dict) and "properties" in node and isinstance(node["properties"], dict) \
                and not path.endswith(".properties"):
            n += 1
            assert node.get("additionalProperties") is False, path
            assert sorted(node["required"]) == sorted(node["properties"]), path
    assert n > 10


def test_no_one_of_no_pattern():
    text = json.dumps(flow_spec_schema(REG))
    assert '"oneOf"' not in text
    assert '"pattern"' not in text


def test_root_properties():
    s = flow_spec_schema(REG)
    assert set(s["properties"]) == {"id", "name", "description", "on", "anchor", "while", "collect", "clearOnStart",
                                    "steps", "onEnd", "instructions"}
    assert s["type"] == "object"


def test_root_without_fields_drops_slug_lists():
    s = flow_spec_schema({"actions": {}, "events": {}})
    assert "collect" not in s["properties"] and "clearOnStart" not in s["properties"]
    assert "collect" not in kinds(s)
    assert "do" not in kinds(s) and "waitEvent" not in kinds(s)
    assert sorted(kinds(s)) == sorted(["prompt", "say", "wait", "if"])


def test_one_do_variant_per_action():
    s = flow_spec_schema(REG)
    dos = [v for v in variants(s) if v["properties"]["kind"]["enum"] == ["do"]]
    assert len(dos) == 2
    names = [v["properties"]["do"]["enum"] for v in dos]
    assert names == [["notify"], ["ping"]]
    ping = dos[1]
    assert "with" not in ping["properties"]
    notify = dos[0]["properties"]["with"]
    assert notify["additionalProperties"] is False
    assert notify["required"] == ["message", "level", "tags"]
    v = jsonschema.Draft202012Validator(notify)
    assert v.is_valid({"message": "x", "level": None, "tags": None})
    assert v.is_valid({"message": "x", "level": "low", "tags": ["a"]})
    assert not v.is_valid({"message": None, "level": None, "tags": None})
    assert not v.is_valid({"message": "x", "level": "mid", "tags": None})
    assert not v.is_valid({"message": "x"})


def test_ruling_5_collect_and_question():
    s = flow_spec_schema(REG)
    root = jsonschema.Draft202012Validator({**s["properties"]["collect"]})
    assert root.is_valid(None) and root.is_valid(["nome"]) and not root.is_valid(["zz"])
    collect = [v for v in variants(s) if v["properties"]["kind"]["enum"] == ["collect"]][0]
    q = collect["properties"]["question"]
    assert q["type"] == ["string", "null"]
    assert "question" in collect["required"]


def test_left_out_on_purpose():
    s = flow_spec_schema(REG)
    for v in variants(s):
        for key in ("ui", "tools", "instructions", "ask"):
            assert key not in v["properties"]
    assert "tools" not in s["properties"]
    trig = s["properties"]["on"]
    text = json.dumps(trig)
    assert '"extract"' not in text
    ins = json.dumps(s["properties"]["instructions"])
    assert '"id"' not in ins


def test_event_trigger_only_with_events():
    with_events = json.dumps(flow_spec_schema(REG)["properties"]["on"])
    without = json.dumps(flow_spec_schema({**REG, "events": {}})["properties"]["on"])
    assert '"event"' in with_events and '"event"' not in without


def test_full_spec_validates_against_schema():
    s = flow_spec_schema(REG)
    v = jsonschema.Draft202012Validator(s)
    cond_null = {"equals": None, "known": None, "silenced": None, "vip": None}
    spec = {
        "id": "t", "name": "T", "description": None, "anchor": None, "while": None, "collect": None,
        "clearOnStart": None, "onEnd": None, "instructions": None,
        "on": [
            {"message": ["x"], "if": None, "repeat": None},
            {"mention": ["y"], "if": {**cond_null, "known": ["nome"]}, "repeat": "once"},
            {"silence": "1h", "businessHours": None, "if": None, "repeat": {"cooldown": "1d"}},
            {"event": "paid", "after": None, "businessHours": True, "if": None, "repeat": None},
        ],
        "steps": [
            {"id": "a", "label": None, "then": None, "kind": "prompt", "prompt": "p", "branches": None},
            {"id": "b", "label": None, "then": "end", "kind": "collect", "collect": ["nome"], "prompt": None,
             "question": None, "maxAsks": None, "branches": [{"when": "x", "then": {"flow": "h"}}]},
            {"id": "c", "label": None, "then": {"step": "a", "clear": None}, "kind": "say", "say": "s",
             "media": None, "once": None},
            {"id": "d", "label": None, "then": None, "kind": "do", "do": "ping", "onFail": None},
            {"id": "e", "label": None, "then": None, "kind": "do", "do": "notify",
             "with": {"message": "m", "level": None, "tags": None}, "onFail": "a"},
            {"id": "f", "label": None, "then": None, "kind": "wait", "wait": "1h", "businessHours": None,
             "else": None, "branches": [{"if": {**cond_null, "vip": "gold"}, "then": "end"}]},
            {"id": "g", "label": None, "then": None, "kind": "waitEvent", "wait": {"event": "paid", "upTo": None},
             "else": None},
            {"id": "h", "label": None, "then": None, "kind": "if",
             "if": {**cond_null, "equals": {"nome": "x", "tamanho": None, "idade": None}}, "else": "end"},
        ],
    }
    errors = sorted(v.iter_errors(spec), key=str)
    assert not errors, errors[0].message if errors else ""
    validate_flow(from_spec(spec), REG)
    bad = copy.deepcopy(spec)
    bad["steps"][3]["do"] = "zz"
    assert not v.is_valid(bad)
    bad = copy.deepcopy(spec)
    bad["steps"][0]["extra"] = 1
    assert not v.is_valid(bad)
    bad = copy.deepcopy(spec)
    del bad["description"]
    assert not v.is_valid(bad)


def test_condition_argument_loosely_typed():
    s = flow_spec_schema(REG)
    cond = s["properties"]["while"]
    v = jsonschema.Draft202012Validator(cond)
    base = {"equals": None, "known": None, "silenced": None}
    for arg in ("gold", 3, True, ["a"], None):
        assert v.is_valid({**base, "vip": arg})
    assert not v.is_valid({**base, "vip": {"k": 1}})
    assert v.is_valid(None)


def test_durations_described():
    s = flow_spec_schema(REG)
    wait = [v for v in variants(s) if v["properties"]["kind"]["enum"] == ["wait"]][0]["properties"]["wait"]
    assert wait["type"] == "string"
    assert "description" in wait
