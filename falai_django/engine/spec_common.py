"""FlowSpec's shared parts: the spec's word lists, the error builder and its wording helpers,
and the registries (`registries_of`) every check reads names from (authoring note §9)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import FlowConfigurationError
from .fields import FieldDef, field_defs, is_number, js_json

STEP_KINDS = ("prompt", "collect", "say", "do", "wait", "waitEvent", "if")
BUILT_INS = ("equals", "known", "silenced")
ON_END = ("end", "stay", "reset")
INSTRUCTION_KINDS = ("must", "never", "should")

_DURATION_FIX = 'Write a number followed by one unit, such as "30s", "5m", "24h" or "3d".'
_FIELD_FIX = "Declare the field in the agent's fields, or correct the slug."
_TARGET_FIX = 'Point it at a step of this flow or at "end".'


def _problem(at: str, what: str, fix: str) -> FlowConfigurationError:
    return FlowConfigurationError(f"[FlowConfigurationError] {at}: {what}. {fix}")


def _show(value: Any) -> str:
    """A value as JSON text, the way messages quote it (`"x"`, `5`, `null`)."""
    try:
        return js_json(value)
    except (TypeError, ValueError):
        return repr(value)


def _shape_value(value: Any) -> str:
    """A value as a shape error names it: `an object`, `a list`, else its JSON (`"x"`, `5`, `null`)."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    if callable(value):
        return "a function"
    return _show(value)


def _quoted(values: Iterable[Any]) -> str:
    return ", ".join(_show(v) for v in values)


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _describe(value: Any) -> str:
    """JS `typeof`-style name of a value (lists are "list")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if callable(value):
        return "function"
    return "object"


# --------------------------------------------------------------------------- registries

@dataclass
class Registries:
    """What a flow's names resolve against (resolved from an Agent or a dict)."""

    fields: dict[str, FieldDef] = field(default_factory=dict)
    actions: Mapping[str, Any] = field(default_factory=dict)
    events: Mapping[str, Any] = field(default_factory=dict)
    conditions: Mapping[str, Any] = field(default_factory=dict)
    tool_ids: set[str] = field(default_factory=set)
    flow_ids: set[str] | None = None


def _tool_id(tool: Any) -> Any:
    return tool.get("id") if isinstance(tool, Mapping) else getattr(tool, "id", None)


def action_parameters(action: Any) -> Mapping[str, Any]:
    """The parameter map of an action given as an `Action`, a dict, or anything with `.parameters`."""
    params = action.get("parameters") if isinstance(action, Mapping) else getattr(action, "parameters", None)
    return params or {}


def registries_of(source: Any) -> Registries:
    """Resolve an Agent, a `Registries`, or a dict of agent options into `Registries`."""
    if isinstance(source, Registries):
        return source
    if source is None:
        source = {}
    get = source.get if isinstance(source, Mapping) else (lambda key, default=None: getattr(source, key, default))
    flows = get("flows", None)
    flow_ids: set[str] | None = None
    if flows is not None:
        flow_ids = set()
        for f in flows.values() if isinstance(flows, Mapping) else flows:
            fid = f.get("id") if isinstance(f, Mapping) else getattr(f, "id", None)
            if isinstance(fid, str):
                flow_ids.add(fid)
    return Registries(
        fields=field_defs(get("fields", None) or {}),
        actions=get("actions", None) or {},
        events=get("events", None) or {},
        conditions=get("conditions", None) or {},
        tool_ids={tid for tid in (_tool_id(t) for t in (get("tools", None) or [])) if isinstance(tid, str)},
        flow_ids=flow_ids,
    )
