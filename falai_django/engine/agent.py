"""`Agent`: the built, checked agent (authoring note §6.4, §9.4 constructor checks).

    agent = Agent(name="Ana", provider=provider, fields={...}, flows=[...], actions={...})
    r = agent.turn(session_id="5511...", message="oi", session=session, history=history)

Construction validates everything once (every flow through `validate_flow`, plus duplicate
flow ids, tool parameter schemas, idle tools, conditions shadowing built-ins, conditions in
agent/idle instructions, compaction ranges) and exposes normalized, read-only attributes for
the turn engine:

    agent.name, agent.provider, agent.persona, agent.goal, agent.knowledge_base, agent.debug
    agent.fields          {slug: FieldDef}
    agent.flows           tuple[Flow] in declaration (priority) order
    agent.flows_by_id     {id: Flow}; agent.flow(id) -> Flow | None
    agent.actions         {name: Action}     (Action.run(params, ctx) -> result dict)
    agent.events          {name: Event}      (Event.direction: "inbound" | "outbound" | None)
    agent.conditions      {name: Condition}  (Condition.check(ctx, arg) -> bool)
    agent.tools           tuple[Tool]; agent.tools_by_id {id: Tool} (first one wins)
    agent.instructions    tuple[Instruction] (agent level)
    agent.idle            Idle(prompt, tools, instructions, silent)
    agent.clock           () -> aware UTC datetime; agent.now() is the same
    agent.business_hours  the raw hook or None; agent.snap_business_hours(at, context)
    agent.max_tool_loops  int (default 5)
    agent.compaction      CompactionOptions | None
    agent.warnings        validation warnings (also logged with an "[Agent] " prefix)

`turn`, `aturn`, `turn_stream`, `aturn_stream` and `pending_wakes` delegate to the functions
of the same names in `engine/turn.py`, called as `fn(agent, **kwargs)`.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .errors import FlowConfigurationError
from .fields import FieldDef, check_field_defs, field_defs
from .flows import Flow, Instruction, canonical_keys, instructions_from
from .predicates import BUILT_IN_CONDITIONS, Condition, DefinitionLike, condition_check
from .spec import check_predicate, validate_flow

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from .results import ScheduleEntry, TurnResult

__all__ = ["Action", "Agent", "CompactionOptions", "Event", "Idle", "Tool", "DEFAULT_MAX_TOOL_LOOPS"]

DEFAULT_MAX_TOOL_LOOPS = 5

logger = logging.getLogger("falai_django.agent")


def _problem(text: str) -> FlowConfigurationError:
    return FlowConfigurationError(f"[FlowConfigurationError] {text}")


# --------------------------------------------------------------------------- registry entries

@dataclass(frozen=True, eq=False)
class Action(DefinitionLike):
    """A host action a `do` step runs.

    Attributes:
        parameters: {name: ParamDef} — a scalar def (`type`, `description`, `enum`) with
            `optional: True` to make it optional, or {"type": "array", "items": {...}}.
        run: `run(params, ctx) -> result` (sync, or async returning an awaitable); `params` is
            the step's rendered `with`, `ctx` an `ActionContext`. Results:
            {"ok": True, "detail"?, "spoke"?}, {"skipped": reason}, {"failed": reason},
            {"defer": "24h", "detail": str}. Raising counts as {"failed": <message>}.
        description: for people and editors; never sent anywhere.
    """

    run: Callable[..., Any]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None

    @classmethod
    def of(cls, value: Any, name: str) -> Action:
        if isinstance(value, Action):
            return value
        if isinstance(value, Mapping):
            run, params, description = value.get("run"), value.get("parameters"), value.get("description")
        else:
            run = getattr(value, "run", None)
            params = getattr(value, "parameters", None)
            description = getattr(value, "description", None)
        if not callable(run):
            raise _problem(f'action "{name}": has no run function. Give it run=lambda params, ctx: {{"ok": True}}.')
        if params is not None and not isinstance(params, Mapping):
            raise _problem(
                f'action "{name}": parameters is not a mapping of names to definitions. '
                'Write parameters={"message": {"type": "string"}}, or {} for none.'
            )
        return cls(run=run, parameters=dict(params or {}), description=description)


@dataclass(frozen=True, eq=False)
class Event(DefinitionLike):
    """A named event. `direction`: "inbound" (counts as the customer speaking), "outbound"
    (counts as the assistant speaking) or None (neither)."""

    direction: str | None = None

    @classmethod
    def of(cls, value: Any, name: str) -> Event:
        if isinstance(value, Event):
            return value
        direction = value.get("direction") if isinstance(value, Mapping) else getattr(value, "direction", None)
        if direction not in (None, "inbound", "outbound"):
            raise _problem(
                f'event "{name}": direction "{direction}" is not "inbound" or "outbound". '
                "Use one of those, or leave direction out."
            )
        return cls(direction=direction)


_TOOL_KEYS = {
    "isConcurrencySafe": "is_concurrency_safe",
    "isReadOnly": "is_read_only",
    "isDestructive": "is_destructive",
    "maxResultSizeChars": "max_result_size_chars",
    "validateInput": "validate_input",
    "checkPermissions": "check_permissions",
}


@dataclass(frozen=True)
class Tool:
    """A tool the model may call while a step (or the idle speaker) speaks.

    Attributes:
        id: the name the model calls and `tools: [...]` lists use.
        handler: `handler(args, ctx) -> {"value"?, "data"?} | None` (sync or async); `ctx` is
            a `ToolContext`.
        description: shown to the model.
        parameters: a JSON Schema object ({"type": "object", "properties", "required"}) or None.
        is_concurrency_safe / is_read_only / is_destructive: `(input) -> bool` or None.
        max_result_size_chars: cut the serialized value at this many characters, or None.
        validate_input / check_permissions: `(input, ctx) -> bool | dict` gates, or None.
    """

    id: str
    handler: Callable[..., Any]
    description: str | None = None
    parameters: Mapping[str, Any] | None = None
    is_concurrency_safe: Callable[[Any], bool] | None = None
    is_read_only: Callable[[Any], bool] | None = None
    is_destructive: Callable[[Any], bool] | None = None
    max_result_size_chars: int | None = None
    validate_input: Callable[..., Any] | None = None
    check_permissions: Callable[..., Any] | None = None

    @classmethod
    def of(cls, value: Any, index: int) -> Tool:
        if isinstance(value, Tool):
            tool = value
        else:
            if isinstance(value, Mapping):
                raw = {_TOOL_KEYS.get(k, k): v for k, v in value.items()}
            else:
                raw = {k: getattr(value, k) for k in (
                    "id", "handler", "description", "parameters", *_TOOL_KEYS.values()) if hasattr(value, k)}
            tool_id = raw.get("id")
            if not isinstance(tool_id, str) or not tool_id:
                raise _problem(f"tools[{index}]: has no id. Give every tool the id the model will call it by.")
            if not callable(raw.get("handler")):
                raise _problem(f'tool "{tool_id}": has no handler. Give it handler=lambda args, ctx: {{"value": ...}}.')
            known = set(cls.__dataclass_fields__)
            tool = cls(**{k: v for k, v in raw.items() if k in known})
        params = tool.parameters
        if params is not None and not (isinstance(params, Mapping) and params.get("type") == "object"):
            raise _problem(
                f'tool "{tool.id}": parameters must be a JSON Schema object. Write '
                '{"type": "object", "properties": {...}, "required": [...]}; the action-style '
                "{name: {type}} map does not work for tools."
            )
        return tool


@dataclass(frozen=True)
class Idle:
    """The idle speaker: answers when no run is asking and nothing else spoke.
    `silent=True` mutes it (`idle="silent"`). `tools=None` offers every agent tool."""

    prompt: str = ""
    tools: tuple[str, ...] | None = None
    instructions: tuple[Instruction, ...] = ()
    silent: bool = False


@dataclass(frozen=True)
class CompactionOptions:
    """History trimming settings (`compaction={...}` with camelCase or snake_case keys)."""

    max_tokens: int
    compaction_threshold: float = 0.8
    preserve_recent_count: int = 4
    max_tool_result_chars: int = 5000
    enabled: bool = True

    @classmethod
    def of(cls, value: Any) -> CompactionOptions | None:
        if value is None or isinstance(value, CompactionOptions):
            return value
        if not isinstance(value, Mapping):
            raise ValueError("compaction must be a dict such as {'maxTokens': 8000}")
        aliases = {
            "maxTokens": "max_tokens", "compactionThreshold": "compaction_threshold",
            "preserveRecentCount": "preserve_recent_count", "maxToolResultChars": "max_tool_result_chars",
        }
        opts: dict[Any, Any] = {aliases.get(k, k): v for k, v in value.items() if v is not None}
        unknown = set(opts) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"compaction has unknown option(s): {', '.join(sorted(unknown))}")
        max_tokens = opts.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
            raise ValueError(f"compaction.maxTokens must be a positive integer, got {max_tokens!r}")
        threshold = opts.get("compaction_threshold", 0.8)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.5 <= threshold <= 0.95:
            raise ValueError(f"compaction.compactionThreshold must be between 0.5 and 0.95, got {threshold!r}")
        keep = opts.get("preserve_recent_count", 4)
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 2:
            raise ValueError(f"compaction.preserveRecentCount must be an integer of at least 2, got {keep!r}")
        chars = opts.get("max_tool_result_chars", 5000)
        if isinstance(chars, bool) or not isinstance(chars, int) or chars <= 0:
            raise ValueError(f"compaction.maxToolResultChars must be a positive integer, got {chars!r}")
        return cls(max_tokens=max_tokens, compaction_threshold=float(threshold), preserve_recent_count=keep,
                   max_tool_result_chars=chars, enabled=bool(opts.get("enabled", True)))


# --------------------------------------------------------------------------- Agent

_CAMEL_OPTIONS = {
    "knowledgeBase": "knowledge_base",
    "businessHours": "business_hours",
    "maxToolLoops": "max_tool_loops",
}
_REMOVED_OPTIONS = (
    "schema", "contextProvider", "context_provider", "hooks", "initialData", "initial_data", "sessionId",
    "session_id", "flowSwitchMargin", "maxAutoStepsPerTurn", "maxDirectiveChain", "routerMode", "signals",
    "signalBatchSize", "terms", "promptCache", "routes",
)


def _utc_clock(clock: Any) -> Callable[[], datetime]:
    """Wrap a clock (callable, or object with `.now()`) so it always returns aware UTC."""
    if clock is None:
        source: Callable[[], Any] = lambda: datetime.now(UTC)  # noqa: E731
    elif callable(getattr(clock, "now", None)):
        source = clock.now
    elif callable(clock):
        source = clock
    else:
        raise TypeError("clock must be a callable returning a datetime, or an object with now() (fake_clock)")

    def now() -> datetime:
        value = source()
        if not isinstance(value, datetime):
            raise TypeError(f"clock returned {value!r}, not a datetime")
        # naive datetimes are taken as UTC: the engine compares instants, never wall times
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    return now


class Agent:
    """The agent: options checked once, then `turn()` as often as you like. See the module
    docstring for the attributes the engine reads."""

    def __init__(
        self,
        *,
        name: str | None = None,
        provider: Any = None,
        fields: Mapping[str, Any] | None = None,
        flows: Any = (),
        actions: Mapping[str, Any] | None = None,
        events: Mapping[str, Any] | None = None,
        conditions: Mapping[str, Any] | None = None,
        tools: Any = (),
        instructions: Any = (),
        knowledge_base: Any = None,
        idle: Any = None,
        clock: Any = None,
        business_hours: Callable[..., datetime] | None = None,
        max_tool_loops: int = DEFAULT_MAX_TOOL_LOOPS,
        persona: str | None = None,
        goal: str | None = None,
        compaction: Any = None,
        debug: bool = False,
        **options: Any,
    ) -> None:
        for key, value in options.items():
            if key in _CAMEL_OPTIONS:
                target = _CAMEL_OPTIONS[key]
                if target == "knowledge_base":
                    knowledge_base = value
                elif target == "business_hours":
                    business_hours = value
                else:
                    max_tool_loops = value
            elif key in _REMOVED_OPTIONS:
                raise TypeError(f"Agent option {key!r} was removed in v4; see the v3 → v4 migration notes.")
            else:
                raise TypeError(f"Agent() got an unexpected option {key!r}")

        if not isinstance(name, str) or not name.strip():
            raise _problem('agent: has no name. Pass name="Ana" (the name the agent calls itself).')
        if provider is None:
            raise _problem("agent: has no provider. Pass provider=GeminiProvider(...) or a test double.")
        if isinstance(max_tool_loops, bool) or not isinstance(max_tool_loops, int) or max_tool_loops < 0:
            raise ValueError(f"max_tool_loops must be a whole number of 0 or more, got {max_tool_loops!r}")

        self.name: str = name
        self.provider = provider
        self.persona = persona
        self.goal = goal
        self.knowledge_base = knowledge_base
        self.debug = bool(debug)
        self.max_tool_loops: int = max_tool_loops
        self.compaction: CompactionOptions | None = CompactionOptions.of(compaction)
        self.clock: Callable[[], datetime] = _utc_clock(clock)
        self.business_hours = business_hours
        # One logger per agent name, so `debug=True` on one agent never turns on another's lines.
        self.logger = logger.getChild(str(name)) if name else logger
        if self.debug:
            self.logger.setLevel(logging.DEBUG)

        check_field_defs(fields)
        self.field_options: dict[str, Any] = dict(fields or {})
        self.fields: dict[str, FieldDef] = field_defs(fields)

        conditions = dict(conditions or {})
        for cname in conditions:
            if cname in BUILT_IN_CONDITIONS:
                raise _problem(
                    f'condition "{cname}" shadows a built-in: equals, known and silenced are reserved. '
                    "Register it under another name."
                )
        self.conditions: dict[str, Any] = {}
        for cname, cond in conditions.items():
            check = condition_check(cond)
            if check is None:
                raise _problem(
                    f'condition "{cname}": has no check function. Build it with f.condition(lambda ctx, arg: ...).'
                )
            self.conditions[cname] = cond if isinstance(cond, Condition) else Condition(check=check)

        self.actions: dict[str, Action] = {n: Action.of(a, n) for n, a in (actions or {}).items()}
        self.events: dict[str, Event] = {n: Event.of(e, n) for n, e in (events or {}).items()}
        self.tools: tuple[Tool, ...] = tuple(Tool.of(t, i) for i, t in enumerate(tools or ()))
        self.tools_by_id: dict[str, Tool] = {}
        for tool in self.tools:
            self.tools_by_id.setdefault(tool.id, tool)  # first handler wins, as upstream

        raw_flows = list(flows.values()) if isinstance(flows, Mapping) else list(flows or ())
        self._set_flows(raw_flows)
        registries = self.registries

        self.idle: Idle = self._build_idle(idle)
        self.instructions: tuple[Instruction, ...] = instructions_from(
            [canonical_keys(i) for i in (instructions or ())]
        )
        for ins in self.instructions:
            check_predicate(ins.if_, registries, "agent", f"instructions[{ins.index}].if")
        for ins in self.idle.instructions:
            check_predicate(ins.if_, registries, "idle", f"instructions[{ins.index}].if")

    def _set_flows(self, raw_flows: list[Any]) -> None:
        """Validate `raw_flows` against this agent's registries and keep them (in this order)."""
        flow_ids = [{"id": f.id if isinstance(f, Flow) else (f.get("id") if isinstance(f, Mapping) else None)}
                    for f in raw_flows]
        registries = {
            "fields": self.fields, "actions": self.actions, "events": self.events,
            "conditions": self.conditions, "tools": self.tools, "flows": flow_ids,
        }
        self.warnings: list[str] = []
        built: list[Flow] = []
        seen: set[str] = set()
        for raw in raw_flows:
            result = validate_flow(raw, registries)
            flow = raw if isinstance(raw, Flow) else Flow.from_dict(raw)
            if flow.id in seen:
                raise _problem(
                    f'flow "{flow.id}" is declared twice: flow ids must be unique. Rename one of them.'
                )
            seen.add(flow.id)
            for warning in result.warnings:
                self.warnings.append(warning)
                logger.warning("[Agent] %s", warning)
            built.append(flow)
        self.flows: tuple[Flow, ...] = tuple(built)
        self.flows_by_id: dict[str, Flow] = {f.id: f for f in built}

    def with_flows(self, flows: Any) -> Agent:
        """A new agent sharing everything with this one (provider, registries, clock, idle,
        instructions) but whose flows are `flows`, checked as the constructor checks them.
        The host uses it to run database flows beside the code ones."""
        clone = copy.copy(self)
        clone.__dict__.pop("_falai_turn_index", None)  # the turn index is per flow set
        clone._set_flows(list(flows.values()) if isinstance(flows, Mapping) else list(flows or ()))
        return clone

    def _build_idle(self, idle: Any) -> Idle:
        if idle is None:
            return Idle()
        if idle == "silent":
            return Idle(silent=True)
        if isinstance(idle, Idle):
            spec: dict[str, Any] = {"prompt": idle.prompt, "tools": idle.tools, "instructions": None}
            result = idle
        elif isinstance(idle, Mapping):
            spec = dict(idle)
            result = Idle(
                prompt=spec.get("prompt") or "",
                tools=None if spec.get("tools") is None else tuple(spec["tools"]),
                instructions=instructions_from([canonical_keys(i) for i in (spec.get("instructions") or ())]),
            )
        else:
            raise _problem('idle: is neither "silent" nor {"prompt": ...}. Pass one of those, or leave idle out.')
        for tool_id in result.tools or ():
            if tool_id not in self.tools_by_id:
                raise _problem(f'idle: unknown tool "{tool_id}". Register it in the agent\'s tools, or correct the id.')
        return result

    # -- lookups the engine uses
    def flow(self, flow_id: str) -> Flow | None:
        """The flow with this id, or None (`flow-gone`)."""
        return self.flows_by_id.get(flow_id)

    def now(self) -> datetime:
        """The agent clock's current time (aware UTC)."""
        return self.clock()

    @property
    def registries(self) -> dict[str, Any]:
        """This agent's names, in the form `validate_flow` / `flow_spec_schema` accept."""
        return {
            "fields": self.fields, "actions": self.actions, "events": self.events,
            "conditions": self.conditions, "tools": self.tools, "flows": [{"id": f.id} for f in self.flows],
        }

    def snap_business_hours(self, at: datetime, context: Any = None) -> datetime:
        """Move `at` forward with the `business_hours` hook (unchanged when there is none).
        The hook is called as `hook(at, context=context)` when it has a `context` parameter,
        else as `hook(at, {"context": context})` (the upstream shape)."""
        hook = self.business_hours
        if hook is None:
            return at
        try:
            params: Mapping[str, inspect.Parameter] = inspect.signature(hook).parameters
        except (TypeError, ValueError):
            params = {}
        snapped = hook(at, context=context) if "context" in params else hook(at, {"context": context})
        if snapped.tzinfo is None:
            snapped = snapped.replace(tzinfo=UTC)
        return snapped.astimezone(UTC)

    # -- the turn (engine/turn.py)
    def turn(self, **kwargs: Any) -> TurnResult:
        """Run one turn and return its `TurnResult` (see engine/turn.py).

        Keyword arguments: `session_id` (required) and exactly one input kind —
        `message=str` (with `id=`, `at=`), `wake=key`, `event=name` (with `payload=`, `key=`,
        `hop=`) or `start={"flow", "input"?, "key"?}` — plus the common `session`, `history`,
        `context`, `silenced` (str, or `{"reason", "understand"?: True, "skip"?: True}`),
        `anchors` and `claims`. An unknown keyword is a TypeError. Raises `ProviderError` only
        when the understand call fails (nothing was applied; retry the same input).
        """
        from .turn import turn

        return turn(self, **kwargs)

    async def aturn(self, **kwargs: Any) -> TurnResult:
        """The async twin of turn(); same keyword arguments."""
        from .turn import aturn

        return await aturn(self, **kwargs)

    def turn_stream(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """turn() as a generator: `{"delta": str}` chunks while the speaker writes its message,
        then one `{"done": True, "result": TurnResult}`. Only the final result is authoritative."""
        from .turn import turn_stream

        return turn_stream(self, **kwargs)

    def aturn_stream(self, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        """See turn_stream(); an async generator."""
        from .turn import aturn_stream

        return aturn_stream(self, **kwargs)

    def pending_wakes(self, **kwargs: Any) -> list[ScheduleEntry]:
        """Every wake a saved session waits on, as schedule entries (changes nothing, no model
        call). Keywords: `session`, `context`, `anchors=None`, `claims=None`."""
        from .turn import pending_wakes

        return pending_wakes(self, **kwargs)

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, flows={[f.id for f in self.flows]!r})"
