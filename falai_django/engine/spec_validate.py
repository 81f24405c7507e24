"""FlowSpec, `validate_flow` (authoring note §9.4): the shape pass, then the name pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .durations import is_duration
from .fields import FieldDef, is_number, strict_equal
from .flows import TRIGGER_KINDS, split_phrases
from .spec_common import (
    _DURATION_FIX,
    _FIELD_FIX,
    _TARGET_FIX,
    Registries,
    _article,
    _describe,
    _problem,
    _quoted,
    _show,
    action_parameters,
    registries_of,
)
from .spec_shape import _as_flow_dict, _does_nothing, _kinds_present, _pred_shape, _step_at, check_flow_shape
from .templates import has_template

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
            if not isinstance(name, str) or name not in self.reg.tool_ids:
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
            if event is not None and (not isinstance(event, str) or event not in reg.events):
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
