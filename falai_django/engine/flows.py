"""The normalized, read-only model of an authored flow (authoring note §3–§5).

Authors write flows as dicts (upstream camelCase keys, or snake_case spellings of them;
Python keywords may carry a trailing underscore: `if_`, `else_`, `while_`, `with_`).
`Flow.from_dict(d)` turns one *already validated* flow dict (see `spec.validate_flow`) into
the objects below, with defaults filled in, so the turn engine never reads raw dicts:

    flow = Flow.from_dict({...})
    flow.steps[0].kind            # "talk" | "say" | "do" | "wait" | "wait_event" | "if"
    flow.step("confirma").then    # Next | None (None = the next step, or onEnd after the last)
    flow.on[0].kind               # "message" | "mention" | "silence" | "event"

Predicates (`if_`, `while_`) are kept as authored: a callable `(ctx) -> bool` or a
ConditionSpec dict; evaluate them with `predicates.evaluate`. Templates are kept as strings;
render them with `templates.render`. Every object keeps its authored dict in `.raw`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .durations import parse_duration
from .fields import DEFAULT_MAX_ASKS, UNSET

__all__ = [
    "KEY_ALIASES", "STEP_KIND_KEYS", "TRIGGER_KINDS", "Branch", "Flow", "Instruction", "Next",
    "Predicate", "Step", "Trigger", "canonical_flow", "canonical_keys", "split_phrases", "strip_nulls",
]

Predicate = Callable[[Any], bool] | Mapping[str, Any]
"""A predicate as authored: a function of the predicate context, or a ConditionSpec dict."""

StepKind = Literal["talk", "say", "do", "wait", "wait_event", "if"]
TriggerKind = Literal["message", "mention", "silence", "event"]
RepeatMode = Literal["once", "always", "cooldown"]

TRIGGER_KINDS: tuple[TriggerKind, ...] = ("message", "mention", "silence", "event")
STEP_KIND_KEYS: tuple[str, ...] = ("prompt", "collect", "say", "do", "wait", "if")
DEFAULT_UP_TO = "30d"
DEFAULT_REPEAT = {"message": "once", "mention": "once", "silence": "once", "event": "always"}

# snake_case (and keyword-safe) spellings → the upstream camelCase key
KEY_ALIASES: Mapping[str, str] = MappingProxyType({
    "max_asks": "maxAsks",
    "clear_on_start": "clearOnStart",
    "on_end": "onEnd",
    "on_fail": "onFail",
    "business_hours": "businessHours",
    "up_to": "upTo",
    "if_": "if",
    "else_": "else",
    "while_": "while",
    "with_": "with",
    "then_": "then",
})


# --------------------------------------------------------------------------- dict helpers

def strip_nulls(value: Any) -> Any:
    """Drop every `None` dict entry at any depth (FlowSpec "null = not set"); lists are mapped.
    Non-JSON values (callables, objects) pass through untouched."""
    if isinstance(value, Mapping):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [strip_nulls(v) for v in value]
    return value


def canonical_keys(d: Any) -> Any:
    """Rename snake_case keys of one authored object to camelCase (camelCase wins on clashes)."""
    if not isinstance(d, Mapping):
        return d
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = KEY_ALIASES.get(key, key)
        if name != key and name in d:
            continue
        out[name] = value
    return out


def _canonical_next(value: Any) -> Any:
    return canonical_keys(value) if isinstance(value, Mapping) else value


def _canonical_list(value: Any, each: Callable[[Any], Any]) -> Any:
    return [each(v) for v in value] if isinstance(value, (list, tuple)) else value


def _canonical_trigger(t: Any) -> Any:
    t = canonical_keys(t)
    if isinstance(t, dict) and isinstance(t.get("repeat"), Mapping):
        t["repeat"] = dict(t["repeat"])
    return t


def _canonical_branch(b: Any) -> Any:
    b = canonical_keys(b)
    if isinstance(b, dict) and "then" in b:
        b["then"] = _canonical_next(b["then"])
    return b


def _canonical_step(s: Any) -> Any:
    s = canonical_keys(s)
    if not isinstance(s, dict):
        return s
    for key in ("then", "else", "onFail"):
        if key in s:
            s[key] = _canonical_next(s[key])
    if isinstance(s.get("wait"), Mapping):
        s["wait"] = canonical_keys(s["wait"])
    if "branches" in s:
        s["branches"] = _canonical_list(s["branches"], _canonical_branch)
    if "instructions" in s:
        s["instructions"] = _canonical_list(s["instructions"], canonical_keys)
    return s


def canonical_flow(flow: Any) -> Any:
    """A copy of an authored flow with camelCase keys at every level that has option keys
    (flow, triggers, steps, branches, targets, waits, instructions) and `None` values removed.
    Keys inside `with`, `equals`, `ui`, `input`, `ask` and `extract` are user names: untouched."""
    flow = canonical_keys(strip_nulls(flow))
    if not isinstance(flow, dict):
        return flow
    if "on" in flow:
        flow["on"] = _canonical_list(flow["on"], _canonical_trigger)
    if "steps" in flow:
        flow["steps"] = _canonical_list(flow["steps"], _canonical_step)
    if "instructions" in flow:
        flow["instructions"] = _canonical_list(flow["instructions"], canonical_keys)
    return flow


def split_phrases(phrases: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split a message/mention phrase list into (counts, excludes).

    Phrases are trimmed; blanks and a bare "!" are ignored; a leading "!" marks an exclusion.
    """
    counts: list[str] = []
    excludes: list[str] = []
    for phrase in phrases or ():
        text = phrase.strip() if isinstance(phrase, str) else ""
        if not text:
            continue
        if text.startswith("!"):
            body = text[1:].strip()
            if body:
                excludes.append(body)
        else:
            counts.append(text)
    return tuple(counts), tuple(excludes)


def _tuple_or_none(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


# --------------------------------------------------------------------------- model

@dataclass(frozen=True, slots=True)
class Next:
    """Where a step goes next (`then`, `else`, `onFail`, a branch's `then`).

    Attributes:
        kind: "step" (jump to a step of this flow), "end" (finish as if past the last step;
            `onEnd` still decides) or "flow" (end this run with reason `flow`, start another).
        step: the target step id when kind == "step".
        clear: slugs to delete from `session.data` (and whose `run.asked` counts reset) before
            the jump; empty when none.
        flow: the target flow id when kind == "flow" — a template, render it with
            data/context/input before looking the flow up (unknown → `flow-gone`).
        input: the child run's input for kind == "flow", passed as given (not rendered);
            `UNSET` when not given (the child then inherits the parent's input).
        raw: the target as authored ("id", "end" or a dict).
    """

    kind: Literal["step", "end", "flow"]
    step: str | None = None
    clear: tuple[str, ...] = ()
    flow: str | None = None
    input: Any = UNSET
    raw: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, value: Any) -> Next:
        """Build from an authored target (assumed valid)."""
        if isinstance(value, Next):
            return value
        if value == "end":
            return cls("end", raw=value)
        if isinstance(value, str):
            return cls("step", step=value, raw=value)
        value = canonical_keys(value)
        if "flow" in value:
            return cls("flow", flow=value["flow"], input=value.get("input", UNSET), raw=value)
        return cls("step", step=value["step"], clear=tuple(value.get("clear") or ()), raw=value)

    @classmethod
    def end(cls) -> Next:
        return cls("end", raw="end")

    @property
    def has_input(self) -> bool:
        """True when a `{flow, input}` target gave its own input."""
        return self.input is not UNSET


@dataclass(frozen=True, slots=True)
class Branch:
    """An early exit of a talk step or a timer wait (§4.9).

    Attributes:
        index: 0-based position in the step's `branches` (understand keys use it).
        when: the model-judged condition text (a template: data/context), or None.
        if_: a code predicate (callable or ConditionSpec), or None. Exactly one of when/if_.
        then: where the run goes when the branch holds.
    """

    index: int
    when: str | None
    if_: Predicate | None
    then: Next
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def kind(self) -> Literal["when", "if"]:
        return "when" if self.when is not None else "if"

    @classmethod
    def from_dict(cls, index: int, d: Mapping[str, Any]) -> Branch:
        d = canonical_keys(d)
        return cls(index=index, when=d.get("when"), if_=d.get("if"), then=Next.parse(d["then"]), raw=d)


@dataclass(frozen=True, slots=True)
class Instruction:
    """A guideline for the speak call (§6.5).

    Attributes:
        index: 0-based position in its list.
        id: carried, never read.
        kind: "must" | "never" | "should" (default "should").
        when: situations (for the model, "apply only when: a OR b"); () when none.
        if_: code predicate judged when the speak request is built, or None.
        prompt: the instruction text (a template: data/context/input).
    """

    index: int
    prompt: str
    kind: Literal["must", "never", "should"] = "should"
    when: tuple[str, ...] = ()
    if_: Predicate | None = None
    id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, index: int, d: Mapping[str, Any]) -> Instruction:
        d = canonical_keys(d)
        when = d.get("when")
        if isinstance(when, str):
            when = (when,)
        return cls(
            index=index,
            prompt=d.get("prompt", ""),
            kind=d.get("kind") or "should",
            when=tuple(when or ()),
            if_=d.get("if"),
            id=d.get("id"),
            raw=d,
        )


def instructions_from(value: Any) -> tuple[Instruction, ...]:
    """Normalize an instruction list (agent, idle, flow or step level)."""
    return tuple(Instruction.from_dict(i, d) for i, d in enumerate(value or ()))


@dataclass(frozen=True, slots=True)
class Trigger:
    """One entry of a flow's `on` list (§5).

    Attributes:
        index: 0-based position in `on` (messages say "trigger #<index+1>").
        kind: "message" | "mention" | "silence" | "event".
        phrases: the message/mention list as authored (templates: data/context); () otherwise.
        counts / excludes: `phrases` split by `split_phrases` (trimmed; "!" exclusions apart).
        extract: a mention's parameter map (same shape as action parameters), or None.
        silence / silence_ms: a silence trigger's quiet time.
        event: an event trigger's event name.
        after / after_ms: an event trigger's delay before the first step, or None.
        business_hours: snap the wake/start with the agent's `business_hours` hook.
        if_: predicate or None.
        repeat: as authored or defaulted: "once", "always" or {"cooldown": "<duration>"}.
        repeat_mode: "once" | "always" | "cooldown"; cooldown_ms set for "cooldown".
    """

    index: int
    kind: TriggerKind
    phrases: tuple[str, ...] = ()
    counts: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    extract: Mapping[str, Any] | None = None
    silence: str | None = None
    silence_ms: int | None = None
    event: str | None = None
    after: str | None = None
    after_ms: int | None = None
    business_hours: bool = False
    if_: Predicate | None = None
    repeat: Any = "once"
    repeat_mode: RepeatMode = "once"
    cooldown_ms: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_catch_all(self) -> bool:
        """A message trigger with an empty phrase list: never scored, the fallback flow."""
        return self.kind == "message" and not self.phrases

    @property
    def is_code_only(self) -> bool:
        """A mention trigger with no phrases: decided by its `if` alone, no model call."""
        return self.kind == "mention" and not self.phrases

    @classmethod
    def from_dict(cls, index: int, d: Mapping[str, Any]) -> Trigger:
        d = _canonical_trigger(d)
        kind: TriggerKind = next(k for k in TRIGGER_KINDS if k in d)
        repeat = d.get("repeat", DEFAULT_REPEAT[kind])
        if isinstance(repeat, Mapping):
            mode: RepeatMode = "cooldown"
            cooldown_ms: int | None = parse_duration(repeat["cooldown"])
        else:
            mode, cooldown_ms = repeat, None
        phrases: tuple[str, ...] = ()
        if kind in ("message", "mention"):
            phrases = tuple(d[kind] or ())
        counts, excludes = split_phrases(phrases)
        return cls(
            index=index,
            kind=kind,
            phrases=phrases,
            counts=counts,
            excludes=excludes,
            extract=d.get("extract") if kind == "mention" else None,
            silence=d.get("silence"),
            silence_ms=parse_duration(d["silence"]) if kind == "silence" else None,
            event=d.get("event") if kind == "event" else None,
            after=d.get("after"),
            after_ms=parse_duration(d["after"]) if d.get("after") is not None else None,
            business_hours=bool(d.get("businessHours", False)),
            if_=d.get("if"),
            repeat=repeat,
            repeat_mode=mode,
            cooldown_ms=cooldown_ms,
            raw=d,
        )


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a flow (§4). Every attribute exists on every step; those of other kinds are
    None / empty.

    Common:
        id, index (0-based position in `flow.steps`), label, ui (editor data, never read),
        kind: "talk" (prompt and/or collect), "say", "do", "wait" (timer), "wait_event", "if".
        then: Next, or None = the next step in the list (after the last: the flow's onEnd).
    Talk ("talk"):
        prompt: guideline template or None; collect: slugs or None (an empty tuple is allowed);
        ask: {slug: template} per-step wording; question: fixed first question template or None;
        max_asks: asks per field before `max-asks` (default 3); branches: tuple[Branch];
        tools: tool ids offered while it speaks, None = inherit (flow, then agent);
        instructions: tuple[Instruction].
    Say ("say"):
        say: verbatim text template; media: passed through; once: at most once per session.
    Do ("do"):
        action: the action name; params: the `with` dict (render with `render_deep` at run time);
        on_fail: Next, or None = `then`.
    Timer wait ("wait"):
        wait: duration text; wait_ms; business_hours; else_: Next or None (None: a reply does
        not end the wait); branches: `if`-only branches judged when the customer replies.
    Event wait ("wait_event"):
        event: event name; up_to / up_to_ms (default "30d"); else_: Next (default end).
    If ("if"):
        if_: the predicate; else_: Next (default end).
    """

    id: str
    index: int
    kind: StepKind
    label: str | None = None
    then: Next | None = None
    ui: Mapping[str, Any] | None = None
    # talk
    prompt: str | None = None
    collect: tuple[str, ...] | None = None
    ask: Mapping[str, str] = field(default_factory=dict)
    question: str | None = None
    max_asks: int = DEFAULT_MAX_ASKS
    branches: tuple[Branch, ...] = ()
    tools: tuple[str, ...] | None = None
    instructions: tuple[Instruction, ...] = ()
    # say
    say: str | None = None
    media: Any = None
    once: bool = False
    # do
    action: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    on_fail: Next | None = None
    # waits
    wait: str | None = None
    wait_ms: int | None = None
    business_hours: bool = False
    event: str | None = None
    up_to: str | None = None
    up_to_ms: int | None = None
    # if / waits
    if_: Predicate | None = None
    else_: Next | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def outcome_kind(self) -> str:
        """The `kind` written on this step's outcome lines: collect/prompt/say/do/wait/if."""
        if self.kind == "talk":
            return "collect" if self.collect else "prompt"
        if self.kind == "wait_event":
            return "wait"
        return self.kind

    @property
    def spec_kind(self) -> str:
        """The FlowSpec `kind`: prompt/collect/say/do/wait/waitEvent/if."""
        if self.kind == "talk":
            return "collect" if self.collect is not None else "prompt"
        if self.kind == "wait_event":
            return "waitEvent"
        return self.kind

    @classmethod
    def from_dict(cls, index: int, d: Mapping[str, Any]) -> Step:
        d = _canonical_step(d)
        base: dict[str, Any] = {
            "id": d["id"],
            "index": index,
            "label": d.get("label"),
            "then": Next.parse(d["then"]) if "then" in d else None,
            "ui": d.get("ui"),
            "raw": d,
        }
        if "say" in d:
            return cls(kind="say", say=d["say"], media=d.get("media"), once=bool(d.get("once", False)), **base)
        if "do" in d:
            return cls(
                kind="do",
                action=d["do"],
                params=dict(d.get("with") or {}),
                on_fail=Next.parse(d["onFail"]) if "onFail" in d else None,
                **base,
            )
        if "wait" in d and isinstance(d["wait"], Mapping):
            up_to = d["wait"].get("upTo", DEFAULT_UP_TO)
            return cls(
                kind="wait_event",
                event=d["wait"].get("event"),
                up_to=up_to,
                up_to_ms=parse_duration(up_to),
                else_=Next.parse(d["else"]) if "else" in d else Next.end(),
                **base,
            )
        if "wait" in d:
            return cls(
                kind="wait",
                wait=d["wait"],
                wait_ms=parse_duration(d["wait"]),
                business_hours=bool(d.get("businessHours", False)),
                else_=Next.parse(d["else"]) if "else" in d else None,
                branches=tuple(Branch.from_dict(i, b) for i, b in enumerate(d.get("branches") or ())),
                **base,
            )
        if "if" in d:
            return cls(
                kind="if",
                if_=d["if"],
                else_=Next.parse(d["else"]) if "else" in d else Next.end(),
                **base,
            )
        return cls(
            kind="talk",
            prompt=d.get("prompt"),
            collect=_tuple_or_none(d.get("collect")),
            ask=dict(d.get("ask") or {}),
            question=d.get("question"),
            max_asks=int(d.get("maxAsks", DEFAULT_MAX_ASKS)),
            branches=tuple(Branch.from_dict(i, b) for i, b in enumerate(d.get("branches") or ())),
            tools=_tuple_or_none(d.get("tools")),
            instructions=instructions_from(d.get("instructions")),
            **base,
        )


@dataclass(frozen=True, slots=True)
class Flow:
    """One flow, normalized (§3).

    Attributes:
        id: unique across the agent; part of run ids and claim keys.
        name: human name the model reads.
        description: when to use the flow (a template), or None.
        on: the triggers, in order; () = started only by `start` or another flow's `{flow}`.
        anchor: "session" (default) or the name of a `turn(anchors=...)` entry.
        while_: explicit premise predicate, or None (then the starting trigger kind's `if`s).
        clear_on_start: slugs deleted when a run of this flow starts.
        collect: flow-level field list (makes "anywhere" fields harvestable), or None.
        steps: the steps, in order.
        on_end: "end" | "stay" | "reset".
        instructions: flow-level instructions.
        tools: tool ids offered while this flow speaks; None = every agent tool; () = none.
        raw: the canonical (camelCase, null-free) dict the flow was built from.
    """

    id: str
    name: str
    steps: tuple[Step, ...]
    description: str | None = None
    on: tuple[Trigger, ...] = ()
    anchor: str = "session"
    while_: Predicate | None = None
    clear_on_start: tuple[str, ...] = ()
    collect: tuple[str, ...] | None = None
    on_end: Literal["end", "stay", "reset"] = "end"
    instructions: tuple[Instruction, ...] = ()
    tools: tuple[str, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    _by_id: Mapping[str, Step] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Flow:
        """Normalize one validated flow dict (camelCase or snake_case keys)."""
        d = canonical_flow(d)
        steps = tuple(Step.from_dict(i, s) for i, s in enumerate(d.get("steps") or ()))
        return cls(
            id=d["id"],
            name=d.get("name", d["id"]),
            steps=steps,
            description=d.get("description"),
            on=tuple(Trigger.from_dict(i, t) for i, t in enumerate(d.get("on") or ())),
            anchor=d.get("anchor") or "session",
            while_=d.get("while"),
            clear_on_start=tuple(d.get("clearOnStart") or ()),
            collect=_tuple_or_none(d.get("collect")),
            on_end=d.get("onEnd", "end"),
            instructions=instructions_from(d.get("instructions")),
            tools=_tuple_or_none(d.get("tools")),
            raw=d,
            _by_id=MappingProxyType({s.id: s for s in steps}),
        )

    def step(self, step_id: str | None) -> Step | None:
        """The step with this id, or None (a missing id at run time means `step-gone`)."""
        return self._by_id.get(step_id) if step_id is not None else None

    def step_after(self, step: Step | str) -> Step | None:
        """The step listed right after `step`, or None when it is the last one."""
        current = self.step(step) if isinstance(step, str) else step
        if current is None or current.index + 1 >= len(self.steps):
            return None
        return self.steps[current.index + 1]

    @property
    def first_step(self) -> Step | None:
        return self.steps[0] if self.steps else None

    def triggers(self, kind: str) -> tuple[Trigger, ...]:
        """This flow's triggers of one kind, in order."""
        return tuple(t for t in self.on if t.kind == kind)

    def first_trigger(self, kind: str) -> Trigger | None:
        """The first trigger of a kind (the only one used for message/mention/silence)."""
        return next((t for t in self.on if t.kind == kind), None)

    @property
    def talk_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.kind == "talk")

    @property
    def last_talk_step(self) -> Step | None:
        talks = self.talk_steps
        return talks[-1] if talks else None
