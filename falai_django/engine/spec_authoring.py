"""FlowSpec as a person writes it: `flow_authoring_schema`, the schema an editor completes and
lints with (issue 55).

`flow_spec_schema` is the strict form a model answers in: closed objects, every key present,
null for "not set", `kind` on every step. People write the README's form instead: keys left out,
`kind` left for the body to say (`{"id": "nome", "collect": ["nome"]}`), snake_case spellings
(`max_asks`), and keys the strict form leaves to code (a step's `tools`, `ask`, `instructions`,
`ui`; a mention's `extract`; a `{flow}` target's `input`). `from_spec` and `validate_flow` accept
all of that, so an editor checking against the strict form calls saved, running flows invalid.

This schema is the strict one loosened by the same rules the server reads with, and never
stricter than the server: every key optional except what the shape pass requires (a step's
`id` and the key that says what it does, a trigger's kind key, a branch's `then`, a target's
`step`/`flow`, a wait's `event`, the flow's `steps`), every value may be null (nulls are
stripped before anything reads them), objects whose unknown keys the server ignores are open
(they carry `x-falai-known-keys` so an editor can hint at a typo without calling it an error),
and the objects whose keys are the agent's own names (`equals`, a condition, an action's `with`)
stay closed, as the server refuses an unknown name there. The agent's names stay enums, so
completion offers them. A snake_case alias is a property with `x-falai-alias` naming its
camelCase key (editors complete the camelCase one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .flows import KEY_ALIASES
from .spec_common import registries_of
from .spec_schema import _or_null, flow_spec_schema

__all__ = ["flow_authoring_schema"]

_ANY_OBJECT: dict[str, Any] = {"type": "object"}
_BODY_KEY = {"prompt": "prompt", "collect": "collect", "say": "say", "do": "do", "wait": "wait",
             "waitEvent": "wait", "if": "if"}
_TRIGGER_KEYS = ("message", "mention", "silence", "event")
_ALIASES_OF: dict[str, list[str]] = {}
for _alias, _key in KEY_ALIASES.items():
    _ALIASES_OF.setdefault(_key, []).append(_alias)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return schema if _admits_null(schema) else _or_null(schema)


def _admits_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in schema or None in schema["enum"]
    return any(_admits_null(branch) for branch in schema.get("anyOf", ()))


def _variant_of(props: Mapping[str, Any]) -> str:
    """Which object of a FlowSpec these strict properties describe."""
    kind = props.get("kind")
    if isinstance(kind, Mapping) and len(kind.get("enum", ())) == 1 and kind["enum"][0] in _BODY_KEY:
        return "step"
    if "steps" in props and "on" in props:
        return "flow"
    if "repeat" in props and any(k in props for k in _TRIGGER_KEYS):
        return "trigger"
    if "then" in props and ("when" in props or "if" in props) and "id" not in props:
        return "branch"
    if set(props) <= {"step", "clear"} and "step" in props:
        return "target-step"
    if set(props) == {"flow"}:
        return "target-flow"
    if set(props) == {"event", "upTo"}:
        return "wait"
    if "prompt" in props and "when" in props and "kind" in props:
        return "instruction"
    if set(props) == {"slug"}:
        return "media"
    return "closed"  # a condition, equals, an action's `with`: the agent's names, closed


def _required(variant: str, props: Mapping[str, Any]) -> list[str]:
    if variant == "step":
        return ["id", _BODY_KEY[props["kind"]["enum"][0]]]
    if variant == "trigger":
        return [next(k for k in _TRIGGER_KEYS if k in props)]
    if variant == "branch":
        return ["then", "when" if "when" in props else "if"]
    if variant == "target-step":
        return ["step"]
    if variant == "target-flow":
        return ["flow"]
    if variant == "wait":
        return ["event"]
    if variant == "flow":
        return ["steps"]
    return []


def _extra_keys(variant: str, tool_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Keys people write that the strict form leaves to code."""
    tools = {"type": "array", "items": {"type": "string", "enum": tool_ids} if tool_ids else {"type": "string"},
             "description": "Tools the AI may call here"}
    instructions = {"type": "array", "items": _ANY_OBJECT, "description": "Rules that apply only here"}
    if variant == "flow":
        return {"tools": tools, "ui": {"description": "Left to the host's screens"}}
    if variant == "step":
        return {"tools": tools, "instructions": instructions, "ui": {"description": "Left to the host's screens"},
                "ask": {"type": "object", "description": "A question per field, sent word for word"}}
    if variant == "trigger":
        return {"extract": {"type": "object", "description": "Fields read from the mention"}}
    if variant == "target-flow":
        return {"input": {"description": "What the next flow starts with"}}
    if variant == "instruction":
        return {"id": {"type": "string"}}
    return {}


def _loosen(schema: Any, tool_ids: list[str]) -> Any:
    if isinstance(schema, list):
        return [_loosen(item, tool_ids) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _loosen(value, tool_ids) for key, value in schema.items() if key not in ("properties", "required")}
    if out.get("items") == {"type": "string"}:  # phrases: the server reads whatever is listed
        out["items"] = {}
    props = schema.get("properties")
    if "object" not in (schema.get("type") or ()) or not isinstance(props, dict):
        return out
    variant = _variant_of(props)
    loose = {name: _nullable(_loosen(sub, tool_ids)) for name, sub in props.items()}
    if variant != "closed":
        for name, sub in loose.items():
            if sub.get("type") == ["boolean", "null"]:  # the server reads any value as true or false
                loose[name] = {"x-falai-expect": "boolean", **{k: v for k, v in sub.items() if k != "type"}}
    if variant == "step":  # kind is optional: the body says it
        loose["kind"] = _nullable(props["kind"])
    if variant == "closed" and "silenced" in props:  # a condition: its own argument is the agent's business
        for name, sub in props.items():
            if name not in ("equals", "known", "silenced"):
                loose[name] = {"description": sub.get("description", f'Argument passed to the condition "{name}"')}
    if variant == "instruction":  # one situation may be written as text
        loose["when"] = {"anyOf": [{"type": "string"}, loose["when"]], "description": props["when"].get(
            "description") or "Situations where the rule applies, judged by the AI"}
    if variant != "closed":
        for name, sub in _extra_keys(variant, tool_ids).items():
            loose.setdefault(name, _nullable(sub))
        for name in list(loose):
            for alias in _ALIASES_OF.get(name, ()):
                loose[alias] = {**loose[name], "x-falai-alias": name}
        out["additionalProperties"] = True
        out["x-falai-known-keys"] = True
    out["properties"] = loose
    # a required key may be written in its snake_case spelling (`if_`): one form per spelling
    spellings: list[list[str]] = [[]]
    for key in _required(variant, props):
        spellings = [[*done, name] for done in spellings for name in (key, *_ALIASES_OF.get(key, ()))]
    if len(spellings) == 1:
        return {**out, "required": spellings[0]}
    return {"anyOf": [{**out, "required": names} for names in spellings]}


def flow_authoring_schema(registries: Any) -> dict[str, Any]:
    """The JSON schema of a FlowSpec as people write it, for one agent (see the module's text).
    Every spec `from_spec` + `validate_flow` accept is valid under it; what it refuses, the
    server refuses too (with its own message, which an editor should show)."""
    reg = registries_of(registries)
    strict = flow_spec_schema(reg)
    loose: dict[str, Any] = _loosen(strict, sorted(reg.tool_ids))  # builds new objects: `strict` is left as it is
    loose["description"] = "A flow as JSON: keys may be left out, kind is read from the step's body"
    return loose
