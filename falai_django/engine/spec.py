"""FlowSpec: flows as JSON (authoring note §9).

* `from_spec(spec)` — a stored/generated FlowSpec → a flow dict (nulls stripped, `kind`
  dropped, shape checked; names are not checked).
* `to_spec(flow)` — a flow dict (or `Flow`) → FlowSpec (kind derived, nothing null; a
  function predicate cannot be stored and raises).
* `validate_flow(flow, registries)` — raises FlowConfigurationError on the first problem,
  else returns `ValidationResult(warnings=[...])`.
* `flow_spec_schema(registries)` — the closed JSON schema of a FlowSpec for one agent.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .durations import is_duration
from .errors import FlowConfigurationError
from .fields import FieldDef, field_defs, is_number, js_json, strict_equal, to_wire_schema
from .flows import STEP_KIND_KEYS, TRIGGER_KINDS, Flow, canonical_flow, split_phrases
from .templates import has_template

__all__ = [
    "STEP_KINDS", "Registries", "ValidationResult", "action_parameters", "check_flow_shape", "check_predicate", "flow_spec_schema", "from_spec",
    "registries_of", "to_spec", "validate_flow",
]

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


# --------------------------------------------------------------------------- shape checks

def _body_kind(step: Mapping[str, Any]) -> str | None:
    """The FlowSpec kind a step's body describes (None when it does nothing)."""
    if "say" in step:
        return "say"
    if "do" in step:
        return "do"
    if "wait" in step:
        return "waitEvent" if isinstance(step["wait"], Mapping) else "wait"
    if "if" in step:
        return "if"
    if "collect" in step:
        return "collect"
    if "prompt" in step:
        return "prompt"
    return None


def _kinds_present(step: Mapping[str, Any]) -> list[str]:
    """The kind keys a step carries, talk counted once (as "prompt" or "collect")."""
    found: list[str] = []
    for key in STEP_KIND_KEYS:
        if key not in step:
            continue
        if key == "collect" and "prompt" in step:
            continue  # prompt + collect is one talk step
        found.append(key)
    return found


def _text(value: Any, at: str, key: str) -> None:
    if value is not None and not isinstance(value, str):
        raise _problem(at, f"{key} is {_shape_value(value)}, not text", f"Write {key} as a string.")


def _list(value: Any, at: str, key: str) -> None:
    if value is not None and not isinstance(value, (list, tuple)):
        example = f", such as [{_show(value)}]" if _shape_value(value) == _show(value) else ""
        raise _problem(at, f"{key} is {_shape_value(value)}, not a list", f"Write {key} as a list{example}.")


def _object(value: Any, at: str, key: str) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise _problem(at, f"{key} is {_shape_value(value)}, not an object", f"Write {key} as an object of names to values.")


def _one_of(value: Any, options: tuple[str, ...], at: str, key: str) -> None:
    if value is not None and value not in options:
        raise _problem(
            at, f"{key} is {_shape_value(value)}, which is not one of {_quoted(options)}", "Pick one of the listed values."
        )


def _pred_shape(value: Any, at: str, where: str) -> None:
    if value is not None and not callable(value) and not isinstance(value, Mapping):
        raise _problem(
            at, f"{where} is {_shape_value(value)}, not a condition",
            "Write a condition object ({ equals }, { known }, { silenced } or a named condition) or a function.",
        )


def _target_shape(value: Any, at: str, where: str) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, Mapping):
        if isinstance(value.get("step"), str) and "flow" not in value:
            _list(value.get("clear"), at, f"{where}.clear")
            return
        if isinstance(value.get("flow"), str) and "step" not in value:
            return
    raise _problem(
        at, f"{where} is {_shape_value(value)}, not a step id or a target",
        'Write a step id, "end", {"step": "<id>", "clear": [...]} or {"flow": "<id>"}.',
    )


def _instructions_shape(value: Any, at: str, prefix: str = "") -> None:
    _list(value, at, f"{prefix}instructions")
    for i, ins in enumerate(value or ()):
        key = f"{prefix}instructions[{i}]"
        if not isinstance(ins, Mapping):
            raise _problem(at, f"{key} is {_shape_value(ins)}, not an object", "Write each instruction as an object with a prompt.")
        _one_of(ins.get("kind"), INSTRUCTION_KINDS, at, f"{key}.kind")
        _text(ins.get("prompt"), at, f"{key}.prompt")
        _pred_shape(ins.get("if"), at, f"{key}.if")


def _step_at(flow_at: str, step: Mapping[str, Any]) -> str:
    return f'{flow_at}, step "{step["id"]}"'


def _does_nothing(at: str) -> FlowConfigurationError:
    return _problem(at, "does nothing", "Give it one job: talk (prompt/collect), say, do, wait or if.")


def _question_without_collect(at: str) -> FlowConfigurationError:
    return _problem(
        at, "has a question but collects nothing",
        "List the fields the question asks for in collect, or send the text with a say step.",
    )


def check_flow_shape(flow: Any, *, empty_steps: bool = True) -> None:
    """The structural checks `from_spec` and `validate_flow` run first (no registry needed).
    `flow` must already be canonical (see `flows.canonical_flow`). With `empty_steps=False` a
    step that does nothing is left for `validate_flow`'s step pass (§9.4 item 10)."""
    if not isinstance(flow, Mapping):
        raise _problem("flow", f"is {_shape_value(flow)}, not an object", 'Pass the flow itself, such as {"id", "name", "steps"}.')
    if not isinstance(flow.get("id"), str) or flow["id"] == "":
        raise _problem("flow", "has no id", "Give the flow a short id that is unique in the agent.")
    flow_at = f'flow "{flow["id"]}"'
    steps = flow.get("steps")
    if not isinstance(steps, (list, tuple)):
        raise _problem(flow_at, "has no steps list", "Write steps as a list; an empty list is allowed.")
    seen: set[str] = set()
    for i, step in enumerate(steps):
        if not isinstance(step, Mapping):
            raise _problem(flow_at, f"steps[{i}] is {_shape_value(step)}, not an object", "Write each step as an object with an id.")
        sid = step.get("id")
        if not isinstance(sid, str) or sid == "":
            raise _problem(f"{flow_at}, step #{i + 1}", "has no id", "Give every step an id of its own.")
        if sid == "end":
            raise _problem(f'{flow_at}, step "end"', 'uses the reserved id "end"', '"end" already means finishing the run; rename the step.')
        if sid in seen:
            raise _problem(f'{flow_at}, step "{sid}"', "duplicates an earlier step id", "Rename one of the two steps.")
        seen.add(sid)

    for key in ("name", "description", "anchor"):
        _text(flow.get(key), flow_at, key)
    for key in ("on", "collect", "clearOnStart", "tools"):
        _list(flow.get(key), flow_at, key)
    _one_of(flow.get("onEnd"), ON_END, flow_at, "onEnd")
    _pred_shape(flow.get("while"), flow_at, "while")
    _instructions_shape(flow.get("instructions"), flow_at)

    for i, trigger in enumerate(flow.get("on") or ()):
        at = f"{flow_at}, trigger #{i + 1}"
        if not isinstance(trigger, Mapping):
            raise _problem(at, f"is {_shape_value(trigger)}, not an object", 'Write the trigger as an object such as {"message": [...]}.')
        for key in ("message", "mention"):
            _list(trigger.get(key), at, key)
        _object(trigger.get("extract"), at, "extract")
        repeat = trigger.get("repeat")
        if repeat is not None and repeat not in ("once", "always") and not (
            isinstance(repeat, Mapping) and set(repeat) == {"cooldown"}
        ):
            raise _problem(at, f"repeat is {_shape_value(repeat)}", 'Use "once", "always" or {"cooldown": "24h"}.')
        _pred_shape(trigger.get("if"), at, "if")

    for step in steps:
        at = _step_at(flow_at, step)
        kinds = _kinds_present(step)
        if not kinds and empty_steps:
            raise _does_nothing(at)
        if len(kinds) > 1:
            raise _problem(at, f'mixes "{kinds[0]}" and "{kinds[1]}"', "Split it into one step per job.")
        body = _body_kind(step)
        if "kind" in step and body is not None:
            _one_of(step["kind"], STEP_KINDS, at, "kind")
            if step["kind"] != body:
                raise _problem(
                    at, f'has kind "{step["kind"]}", but its body is a "{body}" step',
                    f'Set kind to "{body}", or rewrite the body to match the kind.',
                )
        for key in ("say", "prompt", "question", "label"):
            _text(step.get(key), at, key)
        for key in ("collect", "tools", "branches"):
            _list(step.get(key), at, key)
        _object(step.get("ask"), at, "ask")
        _object(step.get("with"), at, "with")
        _instructions_shape(step.get("instructions"), at)
        if "maxAsks" in step:
            value = step["maxAsks"]
            whole = is_number(value) and float(value).is_integer() and value >= 1
            if not whole:
                raise _problem(at, f"maxAsks is {_shape_value(value)}, not a whole number of 1 or more", "Write a whole number such as 3.")
        wait = step.get("wait")
        if isinstance(wait, Mapping) and not isinstance(wait.get("event"), str):
            raise _problem(at, "wait has no event", 'Write {"event": "<name>"} to wait for an event, or a duration such as "1h".')
        for key in ("then", "else", "onFail"):
            _target_shape(step.get(key), at, key)
        _pred_shape(step.get("if"), at, "if")
        if "question" in step and not step.get("collect"):
            raise _question_without_collect(at)
        for j, branch in enumerate(step.get("branches") or ()):
            key = f"branches[{j}]"
            if not isinstance(branch, Mapping):
                raise _problem(at, f"{key} is {_shape_value(branch)}, not an object", 'Write the branch as {"when" or "if", "then"}.')
            _text(branch.get("when"), at, f"{key}.when")
            _pred_shape(branch.get("if"), at, f"{key}.if")
            if "then" not in branch:
                raise _problem(at, f"{key} has no then", "Say where the branch goes with then.")
            _target_shape(branch["then"], at, f"{key}.then")


def _as_flow_dict(flow: Any) -> Any:
    if isinstance(flow, Flow):
        return canonical_flow(flow.raw)
    if isinstance(flow, Mapping):
        return canonical_flow(flow)
    return flow


# --------------------------------------------------------------------------- validate_flow

@dataclass
class ValidationResult:
    """What `validate_flow` returns when nothing is wrong enough to stop the build."""

    warnings: list[str] = field(default_factory=list)


def _matches(defn: Mapping[str, Any] | FieldDef, value: Any) -> bool:
    """Strict type (and enum, unless a template string) match of a JSON primitive."""
    type_ = defn.type if isinstance(defn, FieldDef) else defn.get("type")
    enum = defn.enum if isinstance(defn, FieldDef) else defn.get("enum")
    if not (isinstance(value, (str, bool)) or is_number(value)):
        return False
    if not _type_ok(type_, value):
        return False
    if not enum or (isinstance(value, str) and has_template(value)):
        return True
    return not isinstance(value, bool) and any(strict_equal(value, option) for option in enum)


def _type_ok(type_: Any, value: Any) -> bool:
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "boolean":
        return isinstance(value, bool)
    if not is_number(value):
        return False
    if type_ == "number":
        return value == value and value not in (float("inf"), float("-inf"))
    if type_ == "integer":
        return float(value).is_integer()
    return False


class _NameChecker:
    """Name and predicate checks that need only the registries."""

    def __init__(self, reg: Registries) -> None:
        self.reg = reg
        self.warnings: list[str] = []

    # -- names
    def slug(self, name: Any, at: str, where: str) -> None:
        if not isinstance(name, str) or name not in self.reg.fields:
            raise _problem(at, f'unknown field "{name}" in {where}', _FIELD_FIX)

    def tools(self, names: Any, at: str) -> None:
        for name in names or ():
            if name not in self.reg.tool_ids:
                raise _problem(at, f'unknown tool "{name}"', "Register the tool in the agent's tools, or correct the id.")

    def duration(self, value: Any, at: str, where: str) -> None:
        if value is not None and not is_duration(value):
            shown = value if isinstance(value, str) else _show(value)
            raise _problem(at, f'{where} has duration "{shown}", which does not parse', _DURATION_FIX)

    def pred(self, value: Any, at: str, where: str) -> None:
        if value is None or callable(value) and not isinstance(value, Mapping):
            return  # functions are not inspected
        for name, arg in value.items():
            if name == "equals":
                self.equals(arg, at, where)
            elif name == "known":
                if not isinstance(arg, (list, tuple)):
                    raise _problem(at, f"{where}.known is not a list", 'Write known as a list of slugs, such as ["nome"].')
                for slug in arg:
                    self.slug(slug, at, f"{where}.known")
            elif name == "silenced":
                if not isinstance(arg, bool):
                    raise _problem(at, f"{where}.silenced is not a boolean", "Write true or false.")
            elif name not in self.reg.conditions:
                raise _problem(
                    at, f'unknown condition "{name}" in {where}',
                    "Register it in the agent's conditions, or use one of the built-ins equals, known, silenced.",
                )

    def equals(self, arg: Any, at: str, where: str) -> None:
        if not isinstance(arg, Mapping):
            raise _problem(at, f"{where}.equals is not an object", 'Write equals as {"<field>": <value>}.')
        for slug, given in arg.items():
            self.slug(slug, at, f"{where}.equals")
            defn = self.reg.fields[slug]
            if not (isinstance(given, (str, bool)) or is_number(given)) or not _type_ok(defn.type, given):
                raise _problem(
                    at, f'{where}.equals gives "{slug}" {_article(_describe(given))}, but the field is {_article(defn.type)}',
                    f"Write {_article(defn.type)} value; equals compares without converting.",
                )
            if not _matches(defn, given):
                raise _problem(
                    at, f'{where}.equals gives "{slug}" {_show(given)}, which is not one of {_quoted(defn.enum or ())}',
                    "Use one of the field's listed values.",
                )



class _Validator(_NameChecker):
    def __init__(self, flow: Mapping[str, Any], reg: Registries) -> None:
        super().__init__(reg)
        self.flow = flow
        self.flow_at = f'flow "{flow["id"]}"'
        self.steps: list[Mapping[str, Any]] = list(flow["steps"])
        self.index = {s["id"]: i for i, s in enumerate(self.steps)}

    # -- targets
    def target(self, nxt: Any, at: str, where: str) -> int | None:
        if isinstance(nxt, str):
            if nxt == "end":
                return None
            if nxt not in self.index:
                raise _problem(at, f'{where} points at step "{nxt}", which does not exist', _TARGET_FIX)
            return self.index[nxt]
        if "flow" in nxt:
            target = nxt["flow"]
            ids = self.reg.flow_ids
            if ids is not None and not has_template(target) and target not in ids:
                self.warnings.append(
                    f'{at}: {where} names flow "{target}", which this agent does not have; at run time the move '
                    "is skipped with flow-gone. Add that flow to the agent or correct the id."
                )
            return None
        to = self.index.get(nxt["step"])
        if to is None:
            raise _problem(at, f'{where} points at step "{nxt["step"]}", which does not exist', _TARGET_FIX)
        for slug in nxt.get("clear") or ():
            self.slug(slug, at, f"{where}.clear")
        return to

    def edge(self, origin: int, nxt: Any, at: str, where: str) -> int | None:
        if nxt is None:
            return None
        to = self.target(nxt, at, where)
        clears = isinstance(nxt, Mapping) and bool(nxt.get("clear"))
        if to is not None and to <= origin and not clears:
            self.warnings.append(
                f'{at}: {where} jumps back to "{self.steps[to]["id"]}" without clear; fields collected since then '
                "stay known, so the talk steps on the way are skipped. List them in clear: [...] to ask again."
            )
        return to

    # -- with
    def check_with(self, at: str, name: str, params: Mapping[str, Any], given: Mapping[str, Any]) -> None:
        for param, defn in params.items():
            if param not in given:
                if not defn.get("optional"):
                    raise _problem(at, f'action "{name}" needs parameter "{param}"', f'Add "{param}" to with.')
                continue
            value = given[param]
            if not self.param_matches(defn, value):
                expected, got = self.mismatch(defn, value)
                fix = (
                    "Use one of the listed values."
                    if expected.startswith("one of")
                    else "Parameters are not converted; write a value of that type."
                )
                raise _problem(at, f'parameter "{param}" of action "{name}" must be {expected}, got {got}', fix)
        for param in given:
            if param not in params:
                raise _problem(at, f'action "{name}" has no parameter "{param}"', "Remove it from with, or correct the name.")

    @staticmethod
    def param_matches(defn: Mapping[str, Any], value: Any) -> bool:
        if defn.get("type") == "array":
            items = defn.get("items") or {}
            return isinstance(value, (list, tuple)) and all(_matches(items, item) for item in value)
        return _matches(defn, value)

    @staticmethod
    def mismatch(defn: Mapping[str, Any], value: Any) -> tuple[str, str]:
        is_array = defn.get("type") == "array"
        scalar = (defn.get("items") or {}) if is_array else defn
        allowed = scalar.get("enum")
        type_only = {k: v for k, v in scalar.items() if k != "enum"}
        items = list(value) if is_array and isinstance(value, (list, tuple)) else [value]
        if allowed:
            for item in items:
                if _matches(type_only, item) and not _matches(scalar, item):
                    return f"one of {_quoted(allowed)}", _show(item)
        expected = f"a list of {scalar.get('type')}s" if is_array else _article(str(defn.get("type")))
        return expected, _describe(value)

    # -- the walk, in the order of authoring note §9.4
    def run(self) -> ValidationResult:
        flow, flow_at, reg = self.flow, self.flow_at, self.reg
        if flow.get("on") and not self.steps:
            raise _problem(flow_at, "has triggers but no steps", "Add at least one step, or remove on.")
        for slug in flow.get("clearOnStart") or ():
            self.slug(slug, flow_at, "clearOnStart")
        for slug in flow.get("collect") or ():
            self.slug(slug, flow_at, "collect")
        self.pred(flow.get("while"), flow_at, "while")
        self.tools(flow.get("tools"), flow_at)
        for i, ins in enumerate(flow.get("instructions") or ()):
            self.pred(ins.get("if"), flow_at, f"instructions[{i}].if")

        for i, trigger in enumerate(flow.get("on") or ()):
            at = f"{flow_at}, trigger #{i + 1}"
            if not any(trigger.get(kind) is not None for kind in TRIGGER_KINDS):
                raise _problem(
                    at, "names no trigger kind",
                    "Use one of message, mention, silence or event; a flow started only by the host has no on at all.",
                )
            event = trigger.get("event")
            if event is not None and event not in reg.events:
                raise _problem(at, f'unknown event "{event}"', "Register the event in the agent's events, or correct the name.")
            self.duration(trigger.get("silence"), at, "silence")
            self.duration(trigger.get("after"), at, "after")
            if isinstance(trigger.get("repeat"), Mapping):
                self.duration(trigger["repeat"].get("cooldown"), at, "repeat.cooldown")
            self.pred(trigger.get("if"), at, "if")
            for key in ("message", "mention"):
                phrases = trigger.get(key)
                if not phrases or split_phrases(phrases)[0]:
                    continue
                fix = 'A "!" phrase only rules the trigger out; add at least one plain phrase saying when it fires'
                fix += ", or use an empty list for a catch-all." if key == "message" else "."
                raise _problem(at, f'every {key} phrase starts with "!", so nothing can ever match it', fix)

        for i, step in enumerate(self.steps):
            self.check_step(i, step)

        self.flow_collect_warnings()
        return ValidationResult(warnings=self.warnings)

    def check_step(self, i: int, step: Mapping[str, Any]) -> None:
        reg = self.reg
        at = _step_at(self.flow_at, step)
        if not _kinds_present(step):
            raise _does_nothing(at)
        then_to = self.edge(i, step.get("then"), at, "then")
        self.edge(i, step.get("else"), at, "else")

        if "collect" in step or "prompt" in step:
            collect = list(step.get("collect") or ())
            for slug in collect:
                self.slug(slug, at, "collect")
            ask = step.get("ask") or {}
            for slug in ask:
                self.slug(slug, at, "ask")
            if (
                step.get("prompt") is None
                and step.get("question") is None
                and collect
                and all(not ask.get(slug) and not reg.fields[slug].ask for slug in collect)
            ):
                names = ", ".join(f'"{slug}"' for slug in collect)
                self.warnings.append(
                    f"{at}: collects {names} with no prompt and no ask; the model gets no guidance for it. "
                    "Give the step a prompt, or each field an ask."
                )
        timer_wait = isinstance(step.get("wait"), str)
        for j, branch in enumerate(step.get("branches") or ()):
            where = f"branches[{j}]"
            if branch.get("when") is None and branch.get("if") is None:
                raise _problem(at, f"{where} has neither when nor if", "Give the branch a when (judged by the model) or an if (judged by code).")
            if timer_wait and branch.get("when") is not None:
                self.warnings.append(
                    f'{at}: {where} is a "when" branch, but a wait step is judged by code only; no model call '
                    "judges it, so a reply goes to else. Use an if branch, or move it to a talk step."
                )
            self.pred(branch.get("if"), at, f"{where}.if")
            self.edge(i, branch["then"], at, f"{where}.then")
        for j, ins in enumerate(step.get("instructions") or ()):
            self.pred(ins.get("if"), at, f"instructions[{j}].if")
        self.tools(step.get("tools"), at)

        if "do" in step:
            name = step["do"]
            if not isinstance(name, str) or name not in reg.actions:
                raise _problem(at, f'unknown action "{name}"', "Register the action in the agent's actions, or correct the name.")
            self.check_with(at, name, action_parameters(reg.actions[name]), step.get("with") or {})
            self.edge(i, step.get("onFail"), at, "onFail")
        wait = step.get("wait")
        if isinstance(wait, Mapping):
            if wait["event"] not in reg.events:
                raise _problem(at, f'unknown event "{wait["event"]}" in wait', "Register the event in the agent's events, or correct the name.")
            self.duration(wait.get("upTo"), at, "wait.upTo")
        elif wait is not None:
            self.duration(wait, at, "wait")
        if "if" in step:
            self.pred(step["if"], at, "if")
            if then_to is not None and then_to <= i and step.get("else") is None:
                raise _problem(
                    at, f'"if" jumps back to "{self.steps[then_to]["id"]}" with no else',
                    "Add an else so the false case has somewhere to go.",
                )

    def flow_collect_warnings(self) -> None:
        stepped = {slug for step in self.steps for slug in (step.get("collect") or ())}
        for slug in self.flow.get("collect") or ():
            if self.reg.fields[slug].extract == "asked" and slug not in stepped:
                self.warnings.append(
                    f'{self.flow_at}: collect lists "{slug}", which is only taken from the answer to a step that '
                    "asks for it, and no step here does. Add it to a step's collect, or give the field "
                    "extract: 'anywhere'."
                )


def check_predicate(pred: Any, registries: Any, at: str, where: str) -> None:
    """Check one predicate outside a flow (agent or idle instructions): `at` is the location
    (`agent`, `idle`), `where` the sub-location (`instructions[0].if`)."""
    _pred_shape(pred, at, where)
    _NameChecker(registries_of(registries)).pred(pred, at, where)


def validate_flow(flow: Any, registries: Any) -> ValidationResult:
    """Check a flow (dict, FlowSpec or `Flow`) against an Agent or a registries dict.

    Raises FlowConfigurationError on the first problem; returns `.warnings` otherwise.
    """
    data = _as_flow_dict(flow)
    check_flow_shape(data, empty_steps=False)
    return _Validator(data, registries_of(registries)).run()


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
