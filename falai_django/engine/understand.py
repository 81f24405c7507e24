"""Phase 3, understand (engine-turn.md §3.4, persistence-and-LLM note §6.2): what the call must
judge (`understand_request`), then the call itself.

At most one provider call per message turn, schema name "understand", never streamed, never
with tools. A provider failure here is not caught: `turn()` raises it and nothing was applied.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, TypeGuard

from falai_django.llm.calling import call_provider
from falai_django.llm.jsonparse import envelope_of
from falai_django.llm.types import GenerateInput, GenerateParameters, read_usage

from . import keys
from .decide import catch_all, eligible_flows, lone_flow_shortcut
from .fields import coerce_field, is_known, js_number, to_wire_schema
from .flows import Flow, Step
from .prompt import Aliases, cached_prefix, describe_field, facts_section, join_sections
from .session import Run
from .state import TurnState
from .steps import pending_of
from .templates import render, scope_of
from .types import Understanding, UnderstandRequest

# ---------------------------------------------------------------- what the call must judge

def harvestable(state: TurnState, flow: Flow) -> list[str]:
    fields = state.agent.fields
    data = state.session.data
    return [s for s in state.index.flow_fields[flow.id]
            if s in fields and fields[s].extract == "anywhere" and not is_known(data.get(s))]


def understand_request(state: TurnState) -> UnderstandRequest | None:
    """§3.4.1-3.4.2: what the understand call must judge, or None (no call)."""
    if state.ignored or state.kind != "message":
        return None
    if state.silenced is not None and not state.understand_allowed:
        return None
    floor_run = state.asker() or state.run_by_id(state.floor_run_id)
    floor_flow = state.flow_of(floor_run) if floor_run is not None else None
    eligible = eligible_flows(state)
    eligible_list = [f for f, _ in eligible]
    message_flows = [] if floor_run is None and lone_flow_shortcut(state, eligible) else eligible_list
    mention_flows = []
    for flow in state.index.flows:
        trigger = state.index.mention_trigger[flow.id]
        if trigger is not None and trigger.phrases and state.repeat_allows(flow, trigger, "mention",
                                                                           state.trigger_key):
            mention_flows.append((flow, trigger))
    branches: list[tuple[Run, Step, Any]] = []
    if floor_run is not None and floor_flow is not None:
        step = floor_flow.step(floor_run.step_id)
        if step is not None and step.kind == "talk":
            branches = [(floor_run, step, b) for b in step.branches if b.when is not None]
    wanted: set[str] = set()
    for flow in ([floor_flow] if floor_flow is not None else []) + eligible_list:
        wanted.update(harvestable(state, flow))
    judging = bool(message_flows or mention_flows or branches or wanted)
    if floor_run is None:
        fallback = catch_all(state)
        if fallback is not None:
            fb_flow = fallback[0]
            own = harvestable(state, fb_flow)
            first = fb_flow.steps[0] if fb_flow.steps else None
            free = set(first.collect or ()) if first is not None and first.kind == "talk" and not first.question \
                else set()
            if judging or any(s not in free for s in own):
                wanted.update(own)
    fields = [s for s in state.agent.fields if s in wanted]
    if not (judging or fields):
        return None
    question_flows = ([floor_flow] if floor_flow is not None else []) + eligible_list
    judge_asks = any(state.index.has_question.get(f.id) for f in question_flows)
    text = state.what.get("text", "")
    return UnderstandRequest(text, floor_run, floor_flow, message_flows, mention_flows, branches, fields,
                             judge_asks)


# ---------------------------------------------------------------- the call

SECTIONS = ("flows", "mentions", "extract", "branches", "fields", "asks")


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


class UnderstandCall:
    """Builds the prompt and envelope of one understand request and reads the reply."""

    def __init__(self, state: TurnState, request: UnderstandRequest) -> None:
        self.state = state
        self.request = request
        self.aliases = Aliases()
        agent = state.agent
        self.agent = agent
        scope = scope_of(state.session.data, state.context)
        self.scope = scope
        candidates = []
        if request.floor_flow is not None:
            candidates.append(request.floor_flow)
        for flow in request.message_flows:
            if flow not in candidates:
                candidates.append(flow)
        self.candidates = candidates
        a = self.aliases
        self.flow_wire = {f.id: a.alias("flows", f.id, "f") for f in candidates}
        self.mention_wire = {f.id: a.alias("flows", f.id, "f") for f, _ in request.mention_flows}
        self.branch_wire = {
            keys.branch_key(run.id, step.id, b.index): a.alias("branches", keys.branch_key(run.id, step.id, b.index),
                                                               "q", force=True)
            for run, step, b in request.branches
        }
        self.field_wire = {slug: a.alias("fields", slug, "d") for slug in request.fields}

    @property
    def skippable(self) -> bool:
        """`Understand.run` shortcut (§3.4.3): nothing to judge but the floor itself."""
        r = self.request
        if r.mention_flows or r.branches or r.fields:
            return False
        limit = 1 if r.floor_run is not None else 0
        return len(self.candidates) <= limit

    # ------------------------------------------------------------------ envelope
    def schema(self) -> dict[str, Any]:
        props: dict[str, Any] = {}
        if self.candidates:
            props["flows"] = _closed({
                wire: {"type": ["integer", "null"], "description": "0-100: how clearly the customer wants this flow"}
                for wire in self.flow_wire.values()})
        if self.request.mention_flows:
            props["mentions"] = _closed({wire: {"type": ["boolean", "null"]} for wire in self.mention_wire.values()})
            extract = {self.mention_wire[f.id]: to_wire_schema(t.extract, nullable=True)
                       for f, t in self.request.mention_flows if t.extract}
            if extract:
                props["extract"] = _closed(extract)
        if self.branch_wire:
            props["branches"] = _closed({wire: {"type": ["boolean", "null"]} for wire in self.branch_wire.values()})
        if self.field_wire:
            fields = self.agent.fields
            props["fields"] = _closed({
                wire: to_wire_schema({slug: fields[slug]}, nullable=True)["properties"][slug]
                for slug, wire in self.field_wire.items()})
        if self.request.judge_asks:
            props["asks"] = {"type": ["boolean", "null"],
                             "description": "Does the customer's latest message ask something?"}
        return _closed(props)

    # ------------------------------------------------------------------ prompt
    def prompt(self) -> tuple[str | None, str]:
        state, request, scope = self.state, self.request, self.scope
        system, inline = cached_prefix(self.agent, state.index.speak_cache, scope)
        parts: list[str | None] = [inline]
        parts.append(
            "## Task\nJudge the customer's latest message (quoted below) in the light of the conversation. "
            "Only the customer's own words count as evidence. Answer with one JSON object shaped as under "
            '"Output".')
        if request.floor_flow is not None and request.floor_run is not None:
            flow = request.floor_flow
            lines = [f'The customer is in the middle of "{flow.name}" ({flow.id}).']
            if flow.description:
                lines.append(render(flow.description, scope))
            step = flow.step(request.floor_run.step_id)
            if step is not None and step.kind == "talk":
                lines.append(f"Current step: {step.id} — {render(step.prompt or '', scope)}".rstrip(" —"))
                pending = pending_of(state, request.floor_run, step)
                if pending:
                    lines.append("This step is waiting for:")
                    lines.extend(f"- {describe_field(s, self.agent.fields.get(s))}" for s in pending)
            lines.append("The customer may carry on here or switch topics: score this flow like any other.")
            parts.append("## Current flow\n" + "\n".join(lines))
        parts.append(facts_section(self.agent.fields, state.session.data))
        if self.candidates:
            lines = ["Score every flow from 0 to 100, the current one included."]
            for n, flow in enumerate(self.candidates, 1):
                desc = render(flow.description, scope) if flow.description else ""
                lines.append(f"{n}. {self.flow_wire[flow.id]} — {flow.name}" + (f": {desc}" if desc else ""))
                trigger = state.index.message_trigger.get(flow.id)
                if trigger is not None:
                    if trigger.counts:
                        lines.append("   The customer: " + "; ".join(render(p, scope) for p in trigger.counts))
                    if trigger.excludes:
                        lines.append("   Score 0 when: " + "; ".join(render(p, scope) for p in trigger.excludes))
            lines.append("Scale: 90-100 explicit keywords and a clear intent; 70-89 strong evidence from context; "
                         "50-69 moderate evidence; 30-49 weak or ambiguous; 0-29 little or none.")
            parts.append("## Flows the customer may want\n" + "\n".join(lines))
        if request.mention_flows:
            lines = ["Answer true only on clear, explicit evidence. The phrases are alternatives; a "
                     '"Does not count when" line overrides a match.']
            for flow, trigger in request.mention_flows:
                desc = render(flow.description, scope) if flow.description else ""
                lines.append(f"- {self.mention_wire[flow.id]} — {flow.name}" + (f": {desc}" if desc else ""))
                if trigger.counts:
                    lines.append("  Counts when: " + "; ".join(render(p, scope) for p in trigger.counts))
                if trigger.excludes:
                    lines.append("  Does not count when: " + "; ".join(render(p, scope) for p in trigger.excludes))
                if trigger.extract:
                    lines.append("  When true, also extract:")
                    for name, d in trigger.extract.items():
                        d = d or {}
                        label = f"{name} (list of {(d.get('items') or {}).get('type', 'string')})" \
                            if d.get("type") == "array" else f"{name} ({d.get('type', 'string')})"
                        lines.append(f"  - {label}" + (f": {d['description']}" if d.get("description") else ""))
            parts.append("## Things the customer may mention\n" + "\n".join(lines))
        if self.branch_wire:
            lines = ["Answer each one true or false, in context."]
            for run, step, branch in request.branches:
                wire = self.branch_wire[keys.branch_key(run.id, step.id, branch.index)]
                lines.append(f"- {wire}: {render(branch.when or '', scope)}")
            parts.append("## Questions about this message\n" + "\n".join(lines))
        if self.field_wire:
            lines = ["Report a value only when the customer gave it in this message; never infer it from what "
                     "the assistant said. Use null otherwise."]
            lines.extend(f"- {describe_field(wire, self.agent.fields.get(slug))}"
                         for slug, wire in self.field_wire.items())
            parts.append("## Details the customer may have given\n" + "\n".join(lines))
        parts.append(f'## Customer\'s latest message\n"""\n{request.text}\n"""')
        parts.append(self.output_section())
        return system, join_sections(*parts)

    def output_section(self) -> str:
        lines = ["Reply with exactly one JSON object: no prose, no code fences. Every key is required; use null "
                 "where nothing applies."]
        skeleton: dict[str, Any] = {}
        if self.candidates:
            lines.append('- "flows": a 0-100 score per flow.')
            skeleton["flows"] = {w: 0 for w in self.flow_wire.values()}
        if self.request.mention_flows:
            lines.append('- "mentions": true or false per thing the customer may mention.')
            skeleton["mentions"] = {w: False for w in self.mention_wire.values()}
            extract = {self.mention_wire[f.id]: {name: None for name in t.extract}
                       for f, t in self.request.mention_flows if t.extract}
            if extract:
                lines.append('- "extract": the values to pull out when a mention is true.')
                skeleton["extract"] = extract
        if self.branch_wire:
            lines.append('- "branches": true or false per question.')
            skeleton["branches"] = {w: False for w in self.branch_wire.values()}
        if self.field_wire:
            lines.append('- "fields": the details the customer gave, null for the rest.')
            skeleton["fields"] = {w: None for w in self.field_wire.values()}
        if self.request.judge_asks:
            lines.append('- "asks": true when the customer\'s message asks something, else false.')
            skeleton["asks"] = False
        lines.append("Shape, with placeholder values:\n" + json.dumps(skeleton, ensure_ascii=False,
                                                                       separators=(",", ":")))
        return "## Output\n" + "\n".join(lines)

    # ------------------------------------------------------------------ reply
    def parse(self, structured: Any, message: str | None, usage: dict[str, int] | None) -> Understanding:
        out = Understanding(llm_calls=1, usage=usage)
        envelope = structured if _usable(structured) else envelope_of(None, message)
        if not _usable(envelope):
            return out
        a = self.aliases
        reply: dict[str, Any] = envelope  # narrowed above; a closure does not keep the narrowing

        def section(name: str, namespace: str, read: Callable[[Any], Any]) -> dict[str, Any]:
            """A reply section by real id: each value `read`, the unreadable ones (None) dropped."""
            entries = reply.get(name)
            if not isinstance(entries, dict):
                return {}
            return {a.real(namespace, wire): value for wire, raw in entries.items()
                    if (value := read(raw)) is not None}

        out.flows = section("flows", "flows", _score)
        out.mentions = section("mentions", "flows", _boolean)
        out.extract = section("extract", "flows", _given_values)
        out.branches = section("branches", "branches", _boolean)
        out.fields = section("fields", "fields", _given)
        asks = _boolean(envelope.get("asks"))
        if asks is not None:
            out.asks = asks
        return out


def _usable(value: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict) and any(k in value for k in SECTIONS)


def _score(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        n = value
    elif isinstance(value, str) and value.strip():
        n = js_number(value.strip())
    else:
        return None
    if not math.isfinite(n):
        return None
    return max(0, min(100, n))


def _given(value: Any) -> Any:
    """A detail the customer gave, or None for null and the empty string."""
    return None if value is None or value == "" else value


def _given_values(values: Any) -> dict[str, Any] | None:
    """An extract object without its null and empty values; None when it is not an object."""
    if not isinstance(values, dict):
        return None
    return {k: v for k, v in values.items() if _given(v) is not None}


def _boolean(value: Any) -> bool | None:
    if value is None:
        return None
    result = coerce_field({"type": "boolean"}, value)
    return result if isinstance(result, bool) else None


def build_input(call: UnderstandCall, history: list[Any]) -> GenerateInput:
    system, prompt = call.prompt()
    return GenerateInput(prompt=prompt, system=system, history=list(history), context=call.state.context,
                         parameters=GenerateParameters(json_schema=call.schema(), schema_name="understand"))


def understand(state: TurnState, request: UnderstandRequest | None, history: list[Any]) -> Understanding | None:
    """Run the understand call; None when no request was built. Provider errors propagate."""
    if request is None:
        return None
    call = UnderstandCall(state, request)
    if call.skippable:
        return Understanding()
    provider = state.agent.provider
    output = call_provider(provider, build_input(call, history))
    return call.parse(output.structured, output.message, read_usage(output.metadata))
