"""FlowSpec, the shape pass (authoring note §9.4 items 1-3): `check_flow_shape`, also run by
`from_spec`. The check order is in `spec.py`'s docstring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import FlowConfigurationError
from .fields import is_number
from .flows import STEP_KIND_KEYS, Flow, canonical_flow
from .spec_common import INSTRUCTION_KINDS, ON_END, STEP_KINDS, _problem, _quoted, _shape_value, _show

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
        when = ins.get("when")  # read as a tuple of situations when the rule is judged
        if when is not None and not isinstance(when, str) and not (
            isinstance(when, (list, tuple)) and all(isinstance(w, str) for w in when)
        ):
            raise _problem(at, f"{key}.when is {_shape_value(when)}, not a list of situations",
                           'Write when as a list of phrases, such as ["asks for a discount"].')
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
        _object(step.get("media"), at, "media")
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
            if branch.get("when") is None and branch.get("if") is None:  # else it would always be taken
                raise _problem(at, f"{key} has neither when nor if",
                               "Say when the branch is taken: when (judged by the AI) or if (a condition).")
            if "then" not in branch:
                raise _problem(at, f"{key} has no then", "Say where the branch goes with then.")
            _target_shape(branch["then"], at, f"{key}.then")


def _as_flow_dict(flow: Any) -> Any:
    if isinstance(flow, Flow):
        return canonical_flow(flow.raw)
    if isinstance(flow, Mapping):
        return canonical_flow(flow)
    return flow
