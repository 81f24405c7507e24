"""FlowSpec, `flow_spec_schema` (authoring note §9.6): the closed JSON schema of a FlowSpec
for one agent's registries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .fields import to_wire_schema
from .spec_common import INSTRUCTION_KINDS, ON_END, action_parameters, registries_of

# --------------------------------------------------------------------------- flow_spec_schema

_STRING: dict[str, Any] = {"type": "string"}
_NUMBER: dict[str, Any] = {"type": "number"}
_INTEGER: dict[str, Any] = {"type": "integer"}
_BOOLEAN: dict[str, Any] = {"type": "boolean"}
_NULL: dict[str, Any] = {"type": "null"}


def _with_description(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    return {**schema, "description": description} if description else dict(schema)


def _enum_of(values: Iterable[str], description: str | None = None) -> dict[str, Any]:
    return _with_description({"type": "string", "enum": list(values)}, description)


def _list_of(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return _with_description({"type": "array", "items": items}, description)


def _closed(properties: Mapping[str, dict[str, Any] | None]) -> dict[str, Any]:
    present = {name: schema for name, schema in properties.items() if schema is not None}
    return {"type": "object", "properties": present, "required": list(present), "additionalProperties": False}


def _union(branches: Iterable[dict[str, Any] | None], nullable: bool = False, description: str | None = None) -> dict[str, Any]:
    any_of = [b for b in branches if b is not None]
    return _with_description({"anyOf": [*any_of, _NULL] if nullable else any_of}, description)


def _nullable_enum(schema: dict[str, Any]) -> dict[str, Any]:
    # `type: [t, "null"]` beside an enum without null rejects null in strict validators
    # (authoring note §12 q6); an anyOf keeps the enum pure strings and still admits null.
    inner = {k: v for k, v in schema.items() if k != "description"}
    return _with_description({"anyOf": [inner, _NULL]}, schema.get("description"))


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    if "enum" in schema:
        return _nullable_enum(schema)
    if isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    return {"anyOf": [schema, _NULL]}


def _params_schema(params: Mapping[str, Any]) -> dict[str, Any]:
    wire = to_wire_schema(params)
    properties = wire["properties"]
    for name, defn in params.items():
        if defn.get("optional"):
            properties[name] = _or_null(properties[name])
    return {**wire, "properties": properties, "required": list(params)}


def flow_spec_schema(registries: Any) -> dict[str, Any]:
    """The JSON schema of a FlowSpec for one agent: closed objects, every property required,
    null for "not set", `anyOf` unions, the agent's slugs/events/actions/conditions as enums,
    one `do` variant per action. Use it as the response schema of a "write a flow" call and
    still run `validate_flow` on what comes back."""
    reg = registries_of(registries)
    slugs = list(reg.fields)
    event_names = list(reg.events)

    slug_list = _list_of(_enum_of(slugs)) if slugs else None
    duration = {"type": "string", "description": "A number and one unit (s, m, h, d), e.g. 30s, 5m, 24h, 3d"}

    equals = None
    if slugs:
        wire = to_wire_schema(reg.fields, nullable=True)
        for slug, prop in wire["properties"].items():
            if "enum" in prop:  # null means "not compared": keep it valid for strict validators
                wire["properties"][slug] = _nullable_enum({**prop, "type": prop["type"][0]})
        equals = _or_null(_with_description(wire, "Field values that must all hold"))
    condition = _closed({
        "equals": equals,
        "known": _or_null(_with_description(slug_list, "Fields that must already be known")) if slug_list else None,
        "silenced": _or_null(_with_description(_BOOLEAN, "True: holds while the host has silenced the agent")),
        **{
            name: _union([_STRING, _NUMBER, _BOOLEAN, _list_of(_STRING)], nullable=True,
                         description=f'Argument passed to the condition "{name}"')
            for name in reg.conditions
        },
    })
    next_branches = [
        {"type": "string", "description": 'A step id of this flow, or "end"'},
        _closed({
            "step": _STRING,
            "clear": _or_null(_with_description(slug_list, "Fields to forget before the jump")) if slug_list else None,
        }),
        _closed({"flow": {"type": "string", "description": "Id of another flow to start; this run ends"}}),
    ]
    next_ = _union(next_branches)
    next_or_null = _union(next_branches, nullable=True)
    repeat = _union(
        [_enum_of(["once", "always"]), _closed({"cooldown": duration})], nullable=True,
        description="How often a run may start: once, always, or again after a cooldown",
    )
    trigger_base = {"if": _or_null(condition), "repeat": repeat}
    trigger = _union([
        _closed({"message": _list_of(_STRING, "What the customer asks for, one phrase each; [] = catch-all"), **trigger_base}),
        _closed({"mention": _list_of(_STRING, "What the customer mentions, one phrase each"), **trigger_base}),
        _closed({
            "silence": {**duration, "description": "How long the customer has been quiet"},
            "businessHours": _or_null(_BOOLEAN), **trigger_base,
        }),
        _closed({
            "event": _enum_of(event_names), "after": _or_null(duration), "businessHours": _or_null(_BOOLEAN), **trigger_base,
        }) if event_names else None,
    ])
    branches = _or_null(_list_of(
        _union([_closed({"when": _STRING, "then": next_}), _closed({"if": condition, "then": next_})]),
        "Early exits judged while the step is asking",
    ))
    # a wait is judged by code, never by a model call: its branches have no `when`
    wait_branches = _or_null(_list_of(
        _closed({"if": condition, "then": next_}), "Early exits judged by code while the step waits",
    ))
    base = {"id": _STRING, "label": _or_null(_STRING), "then": next_or_null}
    do_variants = [
        _closed({
            **base, "kind": _enum_of(["do"]), "do": _enum_of([name]),
            "with": _params_schema(action_parameters(action)) if action_parameters(action) else None,
            "onFail": next_or_null,
        })
        for name, action in reg.actions.items()
    ]
    step = _union([
        _closed({**base, "kind": _enum_of(["prompt"]),
                 "prompt": {"type": "string", "description": "Guideline for the next AI message"}, "branches": branches}),
        _closed({
            **base, "kind": _enum_of(["collect"]),
            "collect": _with_description(slug_list, "Fields to ask for until they are known"),
            "prompt": _or_null(_STRING),
            "question": _or_null(_with_description(_STRING, "Fixed first question, sent word for word")),
            "maxAsks": _or_null(_with_description(_INTEGER, "Asks per field before it is skipped; default 3")),
            "branches": branches,
        }) if slug_list else None,
        _closed({**base, "kind": _enum_of(["say"]), "say": {"type": "string", "description": "Text sent word for word"},
                 "media": _or_null(_closed({"slug": _STRING})), "once": _or_null(_BOOLEAN)}),
        *do_variants,
        _closed({
            **base, "kind": _enum_of(["wait"]),
            "wait": {**duration, "description": "How long to wait; then = no reply in time, else = the customer replied"},
            "businessHours": _or_null(_BOOLEAN), "else": next_or_null, "branches": wait_branches,
        }),
        _closed({
            **base, "kind": _enum_of(["waitEvent"]),
            "wait": _closed({
                "event": _enum_of(event_names),
                "upTo": _or_null({**duration, "description": "Give up after this long; default 30d"}),
            }),
            "else": next_or_null,
        }) if event_names else None,
        _closed({**base, "kind": _enum_of(["if"]), "if": condition, "else": next_or_null}),
    ])
    instruction = _closed({
        "kind": _or_null(_enum_of(INSTRUCTION_KINDS)),
        "when": _or_null(_list_of(_STRING, "Situations where the rule applies, judged by the AI")),
        "if": _or_null(condition),
        "prompt": _STRING,
    })
    return _closed({
        "id": {"type": "string", "description": "Short slug, unique in the workspace"},
        "name": _STRING,
        "description": _or_null({"type": "string", "description": "When this flow should run; read when routing"}),
        "on": _or_null(_list_of(trigger, "What starts a run; null = started by the host only")),
        "anchor": _or_null({"type": "string", "description": "'session' (default) or a host anchor name such as 'lead'"}),
        "while": _or_null(_with_description(condition, "The run ends as soon as this stops holding")),
        "collect": _or_null(_with_description(slug_list, "Every field this flow needs")) if slug_list else None,
        "clearOnStart": _or_null(_with_description(slug_list, "Fields to forget when a run starts")) if slug_list else None,
        "steps": _list_of(step, "In order; a run moves to the next step unless then says otherwise"),
        "onEnd": _or_null(_enum_of(ON_END, "After the last step: end, stay on the last talk step, or reset to the first")),
        "instructions": _or_null(_list_of(instruction, "Rules that apply only inside this flow")),
    })
