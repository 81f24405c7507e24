"""The speak call (engine-turn.md §3.7, persistence-and-LLM note §6.4-§6.5).

One speaker per turn: the queued talk step or the idle speaker. One provider call per round
(schema name "speak"), plus one per tool round, the last round without tools. Speak never
raises for a provider failure: it returns a `Deferred` that settle applies (retry ladder).

`speak_rounds()` is a generator: in streaming mode it yields the customer-facing text deltas
as they arrive; its return value (StopIteration.value) is the `Spoken` / `Deferred` outcome.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from falai_django.llm import recording
from falai_django.llm.calling import call_provider, resolve_awaitable, stream_provider
from falai_django.llm.errors import speak_deferral
from falai_django.llm.guidelines import DEFAULT_ANSWER, DEFAULT_COLLECT
from falai_django.llm.jsonparse import envelope_of, is_json_shaped, try_parse_json_response
from falai_django.llm.streaming import StreamingMessageDecoder
from falai_django.llm.types import GenerateInput, GenerateParameters, ToolSpec, add_usage, read_usage

from .fields import js_json, to_wire_schema
from .predicates import PredicateContext, ToolContext, evaluate
from .prompt import (
    SAFE_NAME,
    cached_prefix,
    describe_field,
    facts_section,
    instructions_section,
    join_sections,
)
from .state import TurnState
from .templates import render, scope_of
from .types import IDLE, Deferred, Spoken, Talk

RESERVED_KEYS = frozenset({"message", "toolCalls", "reasoning", "reasoningDetails"})
WAKE_NOTE = "The customer's last message, in the conversation above, has no answer yet. Answer it now."
SPEAK_FIRST = ("There is no new message from the customer. You speak first: open naturally, do not answer a "
               "question nobody asked.")
TOOLS_NOTE = ("## Tools\nCall the tools when you need to look something up or to act; then answer the customer.")
WRAP_UP = ("## Wrap up\nAnswer the customer now, using the tool results above. Do not call any tools.")


def wire_names(pending: list[str]) -> dict[str, str]:
    """slug → envelope property name: `field_<n>` for names a provider would refuse, for
    `message`, and for a real slug whose name an earlier alias took."""
    used: set[str] = set()
    out: dict[str, str] = {}
    n = 0
    for slug in pending:
        if SAFE_NAME.match(slug) and slug != "message" and slug not in used:
            wire = slug
        else:
            while True:
                n += 1
                wire = f"field_{n}"
                if wire not in used:
                    break
        used.add(wire)
        out[slug] = wire
    return out


class SpeakCall:
    """One speak request: prompt, envelope and tools for the chosen speaker."""

    def __init__(self, state: TurnState, speaker: Any, history: list[Any]) -> None:
        self.state = state
        self.agent = state.agent
        self.history = history
        self.idle = speaker is IDLE
        self.talk: Talk | None = None if self.idle else speaker
        run = None if self.idle else speaker.run
        self.run = run
        self.scope = scope_of(state.session.data, state.context) if run is None else state.scope(run)
        fixed = self.talk is not None and self.talk.fixed_follows
        self.pending: list[str] = [] if (self.talk is None or fixed) else list(self.talk.pending)
        self.wire = wire_names(self.pending)
        self.back = {w: s for s, w in self.wire.items()}
        self.tools = self._tools()

    @property
    def flow_talk(self) -> Talk:
        """The flow's speaker: read only where `idle` is false, which is when it is set."""
        assert self.talk is not None, "a flow speaker read on an idle call"
        return self.talk

    # ------------------------------------------------------------------ request parts
    def _tools(self) -> list[Any]:
        agent = self.agent
        if agent.max_tool_loops <= 0 or not agent.tools:
            return []
        if self.idle:
            ids = agent.idle.tools
        else:
            talk = self.flow_talk
            ids = talk.step.tools if talk.step.tools is not None else talk.flow.tools
        if ids is None:
            return list(agent.tools)
        return [agent.tools_by_id[i] for i in ids if i in agent.tools_by_id]

    def _instructions(self) -> list[Any]:
        state = self.state
        if self.idle:
            scopes = [self.agent.instructions, self.agent.idle.instructions]
            ctx = PredicateContext(context=state.context, data=state.session.data, input=None, run=None,
                                   silenced=state.silenced, now=state.now)
        else:
            talk = self.flow_talk
            scopes = [self.agent.instructions, talk.flow.instructions, talk.step.instructions]
            ctx = state.pctx(self.run)
        out = []
        for items in scopes:
            for ins in items:
                if ins.if_ is None or evaluate(ins.if_, ctx, self.agent.conditions):
                    out.append(ins)
        return out

    def schema(self) -> dict[str, Any]:
        cache = self.state.index.speak_cache
        key = ("schema", tuple(self.pending))
        schema = cache.get(key)
        if schema is None:
            props: dict[str, Any] = {"message": {"type": ["string", "null"]}}
            fields = self.agent.fields
            for slug in self.pending:
                definition = fields.get(slug) or {"type": "string"}
                props[self.wire[slug]] = to_wire_schema({slug: definition}, nullable=True)["properties"][slug]
            schema = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
            cache[key] = schema
        return schema

    def base_prompt(self) -> tuple[str | None, str]:
        state, scope, agent = self.state, self.scope, self.agent
        system, inline = cached_prefix(agent, state.index.speak_cache, scope)
        parts: list[str | None] = [inline]
        if self.idle:
            guideline = render(agent.idle.prompt or "", scope).strip() or DEFAULT_ANSWER
            parts.append(f"## Guideline for your reply (adapt to the conversation)\n{guideline}")
        else:
            talk = self.flow_talk
            flow, step = talk.flow, talk.step
            desc = render(flow.description, scope) if flow.description else ""
            parts.append(f"## Flow\n{flow.name}" + (f": {desc}" if desc else ""))
            if step.prompt:
                guideline = render(step.prompt, scope)
            elif self.pending:
                guideline = DEFAULT_COLLECT
            else:
                guideline = DEFAULT_ANSWER
            parts.append(f"## Guideline for your reply (adapt to the conversation)\n{guideline}")
            if talk.fixed_follows:
                question = render(step.question or "", scope)
                parts.append(
                    "## Fixed question\nRight after your reply, this question is sent word for word: "
                    f'"{question}". Do not ask it, or anything like it: answer the customer and stop.')
            if self.pending:
                lines = ["Ask for these in order, at this step's pace, and never re-ask what the customer's "
                         "message already answered."]
                for slug in self.pending:
                    definition = agent.fields.get(slug)
                    lines.append(f"- {describe_field(slug, definition)}")
                    ask = step.ask.get(slug) or (definition.ask if definition is not None else None)
                    if ask:
                        lines.append(f"  How to ask: {render(ask, scope)}")
                parts.append("## Still to collect\n" + "\n".join(lines))
            parts.append(facts_section(agent.fields, state.session.data))
        parts.append(instructions_section(self._instructions(), scope))
        if state.kind == "message":
            text = (state.what.get("text") or "").strip()
            if text:
                parts.append(f'## Customer\'s latest message\n"{text}"')
        else:
            last = self.history[-1] if self.history else None
            role = last.get("role") if isinstance(last, Mapping) else getattr(last, "role", None)
            parts.append("## Situation\n" + (WAKE_NOTE if role == "user" else SPEAK_FIRST))
        lines = ["Reply with one JSON object and nothing else.",
                 '- "message": the natural text for the customer, with no keys or raw values in it.']
        for slug in self.pending:
            lines.append(f'- "{self.wire[slug]}": {describe_field(slug, agent.fields.get(slug))}. '
                         "The value the customer gave, or null when they did not give one.")
        if self.pending:
            lines.append("Rules: fill in only what the customer actually said; take several values at once when "
                         "given; leave unanswered fields null; use the names exactly as written.")
        parts.append("## Response format\n" + "\n".join(lines))
        return system, join_sections(*parts)

    def tool_specs(self) -> list[ToolSpec]:
        return [ToolSpec(id=t.id, name=t.id, description=t.description, parameters=dict(t.parameters or {}) or None)
                for t in self.tools]

    # ------------------------------------------------------------------ replies
    def read(self, structured: Any, text: str) -> tuple[str, dict[str, Any], list[dict[str, Any]], Any]:
        envelope = envelope_of(structured, text)
        if envelope is None:
            message = "" if is_json_shaped(text or "") else (text or "")
            return message, {}, [], None
        raw = envelope.get("message")
        message = raw if isinstance(raw, str) else ""
        fields: dict[str, Any] = {}
        for name, value in envelope.items():
            if name in RESERVED_KEYS or value is None:
                continue
            slug = self.back.get(name)
            if slug is None and name in self.wire and name not in self.back:
                slug = name  # the real slug in place of its alias
            if slug is not None:  # only this step's pending fields travel in the speak envelope
                fields[slug] = value
        calls = envelope.get("toolCalls") or (structured.get("toolCalls") if isinstance(structured, dict) else None)
        calls = [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []
        extra = structured if isinstance(structured, dict) else envelope
        reasoning = {k: extra[k] for k in ("reasoning", "reasoningDetails") if extra.get(k) is not None}
        return message, fields, calls, reasoning or None

    # ------------------------------------------------------------------ tools
    def concurrency_safe(self, call: Mapping[str, Any], offered: dict[str, Any]) -> bool:
        tool = offered.get(call.get("toolName") or call.get("name") or "")
        if tool is None:
            return False
        args = call.get("arguments")
        try:
            if tool.is_destructive is not None and tool.is_destructive(args):
                return False
            if tool.is_concurrency_safe is not None:
                return bool(tool.is_concurrency_safe(args))
            return tool.is_read_only is not None and bool(tool.is_read_only(args))
        except Exception:  # a broken hint means "run it alone"
            return False

    def run_tools(self, calls: Sequence[Mapping[str, Any]], offered: dict[str, Any], data: dict[str, Any],
                  history: list[Any]) -> list[tuple[str, dict[str, Any] | None]]:
        """One round's calls, in order; consecutive concurrency-safe calls run together."""
        results: list[tuple[str, dict[str, Any] | None]] = []
        i = 0
        while i < len(calls):
            j = i
            while j < len(calls) and self.concurrency_safe(calls[j], offered):
                j += 1
            if j - i > 1:
                with ThreadPoolExecutor(max_workers=min(8, j - i)) as pool:
                    # each call gets a copy of this context, so `aturn`'s home loop reaches the workers
                    futures = [pool.submit(contextvars.copy_context().run, self.run_tool, c, offered, data, history)
                               for c in calls[i:j]]
                    results.extend(f.result() for f in futures)
                i = j
            else:
                results.append(self.run_tool(calls[i], offered, data, history))
                i += 1
        return results

    def run_tool(self, call: Mapping[str, Any], offered: dict[str, Any], data: dict[str, Any],
                 history: list[Any]) -> tuple[str, dict[str, Any] | None]:
        text, patch = self._run_tool(call, offered, data, history)
        name = call.get("toolName") or call.get("name") or ""
        if name in offered and recording.current() is not None:  # kept for a replay
            recording.note_effect({"tool": name, "text": text, "data": patch})
        return text, patch

    def _run_tool(self, call: Mapping[str, Any], offered: dict[str, Any], data: dict[str, Any],
                  history: list[Any]) -> tuple[str, dict[str, Any] | None]:
        name = call.get("toolName") or call.get("name") or ""
        args = _call_args(call)
        tool = offered.get(name)
        if tool is None:
            return js_json({"error": f'Tool "{name}" is not available.'}), None
        state = self.state
        ctx = ToolContext(context=state.context, data={**state.session.data, **data}, history=list(history),
                          run=self.run, now=state.now)
        try:
            if tool.validate_input is not None:
                ok, why, corrected = _gate(resolve_awaitable(tool.validate_input(args, ctx)))
                if not ok:
                    body: dict[str, Any] = {"error": f"Validation failed: {why or 'invalid input'}"}
                    if corrected is not None:
                        body["correctedInput"] = corrected
                    return js_json(body), None
            if tool.check_permissions is not None:
                ok, why, _ = _gate(resolve_awaitable(tool.check_permissions(args, ctx)))
                if not ok:
                    return js_json({"error": f"Permission denied: {why or 'not allowed'}"}), None
            result = resolve_awaitable(tool.handler(args, ctx)) or {}
        except Exception as exc:  # a tool error is the model's to read, never the host's
            return js_json({"error": str(exc) or type(exc).__name__}), None
        if not isinstance(result, Mapping):
            result = {"value": result}
        value = result.get("value")
        if value is None:
            text = '{"ok":true}'
        elif isinstance(value, str):
            text = value
        else:
            try:
                json.dumps(value, allow_nan=False)  # refuses what JSON cannot hold
                text = js_json(value)  # as JSON.stringify writes it: compact, non-ASCII kept
            except (TypeError, ValueError):
                text = f"[tool {name} returned a value that cannot be shown as JSON]"
        limit = tool.max_result_size_chars
        if limit is not None and len(text) > limit:
            text = text[:limit] + f"\n[truncated: {len(text)} characters in total, {limit} shown]"
        patch = result.get("data")
        return text, dict(patch) if isinstance(patch, Mapping) else None


def _call_args(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments: JSON text is parsed leniently; anything not an object is {}."""
    args = call.get("arguments", call.get("args"))
    if isinstance(args, str):
        args = try_parse_json_response(args)
    return args if isinstance(args, dict) else {}


def _history_call(call: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """A tool call as the next round's history carries it: `{id, name, arguments}` (the
    persistence-and-LLM note §6.4), arguments parsed; provider extras (Gemini's
    `thoughtSignature`) ride along, since some models refuse a call echoed without them."""
    name = call.get("toolName") or call.get("name")
    out = {k: v for k, v in call.items() if k not in ("id", "toolName", "name", "arguments", "args")}
    out.update({"id": call_id, "name": name, "arguments": _call_args(call)})
    return out


def _gate(value: Any) -> tuple[bool, str | None, Any]:
    if isinstance(value, bool) or value is None:
        return value is not False, None, None
    if isinstance(value, Mapping):
        for key in ("valid", "ok", "allowed", "result"):
            if key in value:
                ok = bool(value[key])
                break
        else:
            ok = True
        why = value.get("error") or value.get("reason") or value.get("message")
        return ok, why, value.get("correctedInput")
    return bool(value), None, None


def speak_rounds(state: TurnState, speaker: Any, history: list[Any], stream: bool = False
                 ) -> Generator[str, None, Spoken | Deferred]:
    """Run the speak call's rounds; yields deltas when `stream`, returns the outcome."""
    call = SpeakCall(state, speaker, history)
    provider = state.agent.provider
    system, base = call.base_prompt()
    schema = call.schema()
    max_loops = state.agent.max_tool_loops
    offered_all = {t.id: t for t in call.tools}
    specs = call.tool_specs()
    convo = list(history)
    fields: dict[str, Any] = {}
    data: dict[str, Any] = {}
    usage: dict[str, int] | None = None
    calls = 0
    message = ""
    text_for_wake = (state.what.get("text") or "") if state.kind == "message" else ""
    round_no = 0
    try:
        while True:
            offer = bool(specs) and round_no < max_loops
            prompt = base
            if offer:
                prompt = join_sections(base, TOOLS_NOTE)
            elif round_no > 0:
                prompt = join_sections(base, WRAP_UP)
            request = GenerateInput(prompt=prompt, system=system, history=list(convo), context=state.context,
                                    tools=specs if offer else None,
                                    parameters=GenerateParameters(json_schema=schema, schema_name="speak"))
            calls += 1
            if stream:
                decoder = StreamingMessageDecoder()
                structured = None
                accumulated = ""
                metadata: dict[str, Any] | None = None
                for chunk in stream_provider(provider, request):
                    accumulated = chunk.accumulated
                    _, delta = decoder.push(accumulated)
                    if delta:
                        yield delta
                    if chunk.structured is not None:
                        structured = chunk.structured
                    if read_usage(chunk.metadata) is not None:
                        metadata = chunk.metadata
                text = accumulated
            else:
                output = call_provider(provider, request)
                structured, text, metadata = output.structured, output.message, output.metadata
            usage = add_usage(usage, read_usage(metadata))
            message, round_fields, tool_calls, reasoning = call.read(structured, text)
            for slug, value in round_fields.items():
                fields[slug] = value  # last round wins
            if not offer or not tool_calls:
                break
            if round_no == 0:
                last = convo[-1] if convo else None
                role = last.get("role") if isinstance(last, Mapping) else None
                if role != "user":
                    convo.append({"role": "user", "content": text_for_wake or prompt})
            entry: dict[str, Any] = {
                "role": "assistant", "content": message or None,
                "tool_calls": [_history_call(c, f"call-{round_no}-{i}") for i, c in enumerate(tool_calls)]}
            if reasoning:
                entry.update(reasoning)  # providers that think need their reasoning echoed back
            convo.append(entry)
            results = call.run_tools(tool_calls, offered_all, data, list(convo))
            for i, (c, (content, patch)) in enumerate(zip(tool_calls, results, strict=True)):
                if patch:
                    data.update(patch)  # call order, whatever order they finished in
                convo.append({"role": "tool", "tool_call_id": f"call-{round_no}-{i}",
                              "name": c.get("toolName") or c.get("name"), "content": content})
            round_no += 1
    except Exception as exc:  # a provider failure defers the step; it never escapes
        d = speak_deferral(exc, getattr(provider, "name", "provider"))
        return Deferred(code=d["code"], retryable=d["retryable"], llm_calls=calls, reset_at_ms=d["reset_at_ms"],
                        usage=usage)
    if not message.strip():
        return Deferred(code="provider-unavailable", retryable=True, llm_calls=calls, usage=usage)
    return Spoken(message=message, fields=fields, data=data, llm_calls=calls, usage=usage)


def speak(state: TurnState, speaker: Any, history: list[Any]) -> Spoken | Deferred:
    """The non-streaming speak call."""
    gen = speak_rounds(state, speaker, history, stream=False)
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        spoken: Spoken | Deferred = stop.value
        return spoken
