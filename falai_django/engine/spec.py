"""FlowSpec: flows as JSON (authoring note §9). `from_spec` and `to_spec` live here; the other
parts in `spec_common` (registries, wording), `spec_shape` (the shape pass), `spec_validate`
(`validate_flow`) and `spec_schema` (`flow_spec_schema`), all re-exported from this module.

* `from_spec(spec)` — a stored/generated FlowSpec → a flow dict (nulls stripped, `kind`
  dropped, shape checked; names are not checked).
* `to_spec(flow)` — a flow dict (or `Flow`) → FlowSpec (kind derived, nothing null; a
  function predicate cannot be stored and raises).
* `validate_flow(flow, registries)` — raises FlowConfigurationError on the first problem,
  else returns `ValidationResult(warnings=[...])`.
* `flow_spec_schema(registries)` — the closed JSON schema of a FlowSpec for one agent.
* `flow_authoring_schema(registries)` — the same as people write it (`spec_authoring`): keys
  optional, `kind` read from the body; what editors complete and lint with.

`registries` is an `Agent` or a dict with `fields`, `actions`, `events`, `conditions`, `tools`
and optionally `flows` (a list of {"id": ...} or of flows).

Every error reads `[FlowConfigurationError] <where>: <what>. <how to fix>.` where `<where>` is
`flow`, `flow "<id>"`, `flow "<id>", trigger #<n>`, `flow "<id>", step #<n>` or
`flow "<id>", step "<sid>"`; the `<what>` fragments are the ones the spec lists.

Check order: first the shape pass (`check_flow_shape`, also run by `from_spec`): the flow is
an object, its id, its steps list, each step's object/id/reserved/duplicate, then the [late]
shape families (not a list / not text / not one of / repeat / maxAsks / wait has no event /
bad target / with not an object / mixes / kind vs body / question without collect). Then the
name pass in the order of authoring note §9.4 items 4–10, where each step starts with "does
nothing" (item 10). `from_spec` rejects a step that does nothing in its shape pass.

Open questions settled here (authoring note §12 and the README rulings):
* a literal `{flow}` target the registries' `flows` lack is a warning naming `flow-gone`;
* a `when` branch on a timer wait is a warning;
* an off-enum `equals` value has its own "which is not one of" message;
* `flow_spec_schema` has the flow-level `collect` and the collect step's `question`; a
  nullable property with an `enum` is written `anyOf: [{...enum}, {type: null}]` so strict
  validators accept null while the enum stays pure strings (`to_wire_schema` itself keeps
  upstream's `type: [t, "null"]` + enum for the model envelopes);
* unknown conditions in agent/idle instructions are rejected by the Agent constructor;
* `{flow, input}`'s `input` is never rendered; `collect: []` is a collect step in a spec
  and a prompt at run time.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .flows import canonical_flow
from .spec_authoring import flow_authoring_schema
from .spec_common import STEP_KINDS, Registries, _problem, action_parameters, registries_of
from .spec_schema import flow_spec_schema
from .spec_shape import _as_flow_dict, _question_without_collect, check_flow_shape
from .spec_validate import ValidationResult, check_predicate, validate_flow

__all__ = [
    "STEP_KINDS", "Registries", "ValidationResult", "action_parameters", "check_flow_shape", "check_predicate",
    "flow_authoring_schema", "flow_spec_schema", "from_spec", "registries_of", "to_spec", "validate_flow",
]


# --------------------------------------------------------------------------- from/to spec

def from_spec(spec: Any) -> dict[str, Any]:
    """A FlowSpec as a flow dict: nulls stripped at any depth, `kind` dropped from each step,
    shapes checked. Names are not checked here (the agent's `validate_flow` does that)."""
    clean = canonical_flow(spec)
    if isinstance(clean, Mapping) and not isinstance(clean.get("steps"), (list, tuple)):
        raise _problem(f'flow "{clean.get("id")}"', "has no steps list", "Write steps as a list; an empty list is allowed.")
    check_flow_shape(clean)
    out = dict(clean)
    out["steps"] = [{k: v for k, v in step.items() if k != "kind"} for step in clean["steps"]]
    return out


def _compact(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _json_pred(pred: Any, at: str) -> Any:
    if pred is not None and callable(pred) and not isinstance(pred, Mapping):
        raise _problem(
            at, "is a function, which cannot be stored as JSON",
            "Express it as a condition object (equals, known, silenced or a named condition) to store the flow.",
        )
    return pred


def _instruction_to_spec(ins: Mapping[str, Any], at: str) -> dict[str, Any]:
    return _compact({**ins, "if": _json_pred(ins.get("if"), at)})


def _branches_to_spec(branches: Any, at: str) -> Any:
    if branches is None:
        return None
    return [
        _compact({**b, "if": _json_pred(b["if"], f"{at} branches[{j}].if")}) if "if" in b else dict(b)
        for j, b in enumerate(branches)
    ]


def _step_to_spec(step: Mapping[str, Any], at: str) -> dict[str, Any]:
    if "question" in step and not step.get("collect"):
        raise _question_without_collect(at)  # what validate_flow says of the same step
    base = {"id": step.get("id"), "label": step.get("label"), "then": step.get("then"), "ui": step.get("ui")}
    if "say" in step:
        return _compact({**base, "kind": "say", "say": step["say"], "media": step.get("media"), "once": step.get("once")})
    if "do" in step:
        return _compact({**base, "kind": "do", "do": step["do"], "with": step.get("with"), "onFail": step.get("onFail")})
    if "wait" in step:
        if isinstance(step["wait"], str):
            return _compact({
                **base, "kind": "wait", "wait": step["wait"], "businessHours": step.get("businessHours"),
                "else": step.get("else"), "branches": _branches_to_spec(step.get("branches"), at),
            })
        return _compact({**base, "kind": "waitEvent", "wait": step["wait"], "else": step.get("else")})
    if "if" in step:
        return _compact({**base, "kind": "if", "if": _json_pred(step["if"], f"{at} if"), "else": step.get("else")})
    instructions = step.get("instructions")
    talk = {
        "ask": step.get("ask"),
        "maxAsks": step.get("maxAsks"),
        "branches": _branches_to_spec(step.get("branches"), at),
        "tools": step.get("tools"),
        "instructions": None if instructions is None else [
            _instruction_to_spec(ins, f"{at} instructions[{j}].if") for j, ins in enumerate(instructions)
        ],
    }
    if "collect" in step:
        return _compact({
            **base, "kind": "collect", "collect": step["collect"], "prompt": step.get("prompt"),
            "question": step.get("question"), **talk,
        })
    if "prompt" not in step:
        raise _problem(at, "has neither prompt nor collect", "A talk step needs a guideline, fields to collect, or both.")
    return _compact({**base, "kind": "prompt", "prompt": step["prompt"], **talk})


def to_spec(flow: Any) -> dict[str, Any]:
    """A flow (dict or `Flow`) as a FlowSpec: each step gets its `kind`, nothing is null, and a
    function predicate raises FlowConfigurationError (it cannot be stored as JSON)."""
    d = _as_flow_dict(flow)
    flow_at = f'flow "{d.get("id")}"'
    on = d.get("on")
    instructions = d.get("instructions")
    out = _compact({
        "id": d.get("id"),
        "name": d.get("name"),
        "description": d.get("description"),
        "on": None if on is None else [
            _compact({**t, "if": _json_pred(t.get("if"), f"{flow_at}, trigger #{i + 1} if")}) for i, t in enumerate(on)
        ],
        "anchor": d.get("anchor"),
        "while": _json_pred(d.get("while"), f"{flow_at}, while"),
        "collect": d.get("collect"),
        "clearOnStart": d.get("clearOnStart"),
        "steps": [_step_to_spec(s, f'{flow_at}, step "{s.get("id")}"') for s in d.get("steps") or ()],
        "onEnd": d.get("onEnd"),
        "instructions": None if instructions is None else [
            _instruction_to_spec(ins, f"{flow_at}, instructions[{i}].if") for i, ins in enumerate(instructions)
        ],
        "tools": d.get("tools"),
    })
    return copy.deepcopy(out)
