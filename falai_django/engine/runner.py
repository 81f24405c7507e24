"""The Runner: one turn's state and the one `advance()` that moves runs (engine-turn.md §3).

`turn.py` drives it in the spec's order::

    runner.begin()                       # phase 1-2: load + ingest
    request = runner.understand_request()
    runner.decide(understanding)         # phase 4 (message turns)
    speaker = runner.advance()           # phase 5
    outcome = speak(...)                 # phase 6 (turn.py / speak.py)
    runner.settle(outcome)               # phase 7
    result = runner.finish()             # phase 8

Everything here is pure: the provider is never called from this module, only action
handlers are (they run inside the turn, at least once, before the save).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from falai_django.llm.calling import HOME_LOOP, call_provider, resolve_awaitable, stream_provider  # noqa: F401
from falai_django.llm.types import add_usage

from . import keys
from .durations import is_duration, parse_duration
from .fields import UNSET, Drop, coerce_field, is_known, pending_fields
from .flows import Flow, Next, Step, Trigger
from .jstime import from_ms, iso_to_ms, to_iso, to_ms
from .outcomes import OUTCOME_MESSAGES
from .predicates import ActionContext, PredicateContext, evaluate
from .session import (
    EndedRun,
    OutboundMessage,
    Run,
    ScheduleEntry,
    Session,
    SkippedTrigger,
    StartedRun,
    StepOutcome,
    Waiting,
)
from .session import Trigger as RunTrigger
from .templates import render, render_deep, scope_of

MAX_INPUTS = 50
MAX_ALWAYS_CLAIMS = 50
MAX_RUN_OUTCOMES = 50
HOP_CAP = 5
STEP_CAP = 50
SHORT_WAIT_MS = 10_000
ROUTE_MIN = 40
ROUTE_STICKY = 15
RETRY_LADDER_MS = (60_000, 300_000, 900_000, 3_600_000, 21_600_000)  # 1m 5m 15m 1h 6h
DEFAULT_REPEAT = {"message": "once", "mention": "once", "silence": "once",
                  "event": "always", "start": "always", "flow": "always"}


# --------------------------------------------------------------------------- small records

@dataclass
class Talk:
    """The queued speaker talk step."""

    run: Run
    flow: Flow
    step: Step
    pending: list[str]
    fixed_follows: bool = False  # ruling 1: answer first, the fixed question follows verbatim


@dataclass
class Understanding:
    flows: dict[str, float] = field(default_factory=dict)
    mentions: dict[str, bool] = field(default_factory=dict)
    extract: dict[str, dict[str, Any]] = field(default_factory=dict)
    branches: dict[str, bool] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    asks: bool | None = None
    llm_calls: int = 0
    usage: dict[str, int] | None = None


@dataclass
class UnderstandRequest:
    text: str
    floor_run: Run | None
    floor_flow: Flow | None
    message_flows: list[Flow]
    mention_flows: list[tuple[Flow, Trigger]]
    branches: list[tuple[Run, Step, Any]]
    fields: list[str]
    judge_asks: bool


@dataclass
class Spoken:
    message: str
    fields: dict[str, Any]
    data: dict[str, Any]
    llm_calls: int
    usage: dict[str, int] | None = None


@dataclass
class Deferred:
    code: str
    retryable: bool
    llm_calls: int
    reset_at_ms: int | None = None
    usage: dict[str, int] | None = None


IDLE = "idle"  # the idle speaker marker returned by advance()


# --------------------------------------------------------------------------- per-agent cache

class AgentIndex:
    """Static facts about an agent's flows, computed once and kept on the agent."""

    def __init__(self, agent: Any) -> None:
        self.flows: tuple[Flow, ...] = tuple(agent.flows)
        self.by_id: dict[str, Flow] = dict(agent.flows_by_id)
        self.fields = agent.fields
        self.message_trigger: dict[str, Trigger | None] = {}
        self.catch_all_trigger: dict[str, Trigger | None] = {}
        self.mention_trigger: dict[str, Trigger | None] = {}
        self.silence_trigger: dict[str, Trigger | None] = {}
        self.flow_fields: dict[str, tuple[str, ...]] = {}
        self.has_question: dict[str, bool] = {}
        for flow in self.flows:
            fid = flow.id
            self.message_trigger[fid] = next((t for t in flow.on if t.kind == "message" and t.phrases), None)
            self.catch_all_trigger[fid] = next((t for t in flow.on if t.kind == "message" and not t.phrases), None)
            self.mention_trigger[fid] = flow.first_trigger("mention")
            self.silence_trigger[fid] = flow.first_trigger("silence")
            seen: dict[str, None] = {}
            for slug in flow.collect or ():
                seen.setdefault(slug, None)
            for step in flow.steps:
                if step.kind == "talk":
                    for slug in step.collect or ():
                        seen.setdefault(slug, None)
            self.flow_fields[fid] = tuple(seen)
            self.has_question[fid] = any(s.kind == "talk" and s.question for s in flow.steps)
        self.has_mentions = any(self.mention_trigger.values())
        self.has_silence = any(self.silence_trigger.values())
        self.speak_cache: dict[Any, Any] = {}


def agent_index(agent: Any) -> AgentIndex:
    index = getattr(agent, "_falai_turn_index", None)
    if index is None:
        index = AgentIndex(agent)
        try:
            agent._falai_turn_index = index
        except AttributeError:  # a frozen agent: rebuild per turn
            pass
    return index


# --------------------------------------------------------------------------- the runner

class Runner:
    """One turn's mutable state (engine-turn.md §3.0) and the phases that act on it."""

    def __init__(
        self,
        agent: Any,
        *,
        session_id: str,
        kind: str,
        what: dict[str, Any],
        session: Session | None,
        context: Any,
        history: list[Any] | None,
        silenced: Any,
        anchors: Mapping[str, Any] | None,
        claims: Mapping[str, Any] | None,
        now: datetime,
    ) -> None:
        self.agent = agent
        self.index = agent_index(agent)
        self.session_id = session_id
        self.kind = kind
        self.what = what
        self.original = session
        self.context = context
        self.history = history
        self.anchors = anchors or {}
        claims = claims or {}
        self.claims_held: Mapping[str, str] = claims.get("held") or {}
        self.claims_active = frozenset(claims.get("active") or ())
        self.now = now
        self.now_ms = to_ms(now)
        self.now_iso = to_iso(now)
        self.silenced, self.understand_allowed, self.skip_mode = parse_silenced(silenced)
        self.trigger_key: str = what.get("key", "")

        self.session: Session = session.copy_deep() if session is not None else Session.fresh(session_id)
        self.ignored = False
        self.messages: list[OutboundMessage] = []
        self.schedule: list[ScheduleEntry] = []
        self.outcomes: list[StepOutcome] = []
        self.started: list[StartedRun] = []
        self.ended: list[EndedRun] = []
        self.skipped: list[SkippedTrigger] = []
        self.llm_calls = 0
        self.usage: dict[str, int] | None = None
        self.floor_run_id: str | None = None
        self.floor_from_ingest = False
        self.ingesting = False
        self.spoke_by: set[str] = set()
        self.spoke = False
        self.after_ms = 0
        self.talk: Talk | None = None
        self.speak_done = False
        self.queue: deque[Run] = deque()
        self.understanding: Understanding | None = None

    # ======================================================================= helpers

    def flow_of(self, run: Run) -> Flow | None:
        return self.index.by_id.get(run.flow_id)

    def is_live(self, run: Run) -> bool:
        return any(r is run for r in self.session.runs)

    def run_by_id(self, run_id: str | None) -> Run | None:
        if run_id is None:
            return None
        return next((r for r in self.session.runs if r.id == run_id), None)

    def asker(self) -> Run | None:
        return next((r for r in self.session.runs if r.status == "asking"), None)

    def pctx(self, run: Run | None, input: Any = UNSET) -> PredicateContext:
        if input is UNSET:
            input = run.input if run is not None else None
        return PredicateContext(context=self.context, data=self.session.data, input=input, run=run,
                                silenced=self.silenced, now=self.now)

    def judge(self, pred: Any, run: Run | None, input: Any = UNSET) -> bool:
        if pred is None:
            return True
        return evaluate(pred, self.pctx(run, input), self.agent.conditions)

    def scope(self, run: Run | None) -> dict[str, Any]:
        if run is None:
            return scope_of(self.session.data, self.context)
        return scope_of(self.session.data, self.context, run.input)

    def anchor_of(self, flow: Flow) -> str:
        if not flow.anchor or flow.anchor == "session":
            return self.session.id
        entry = self.anchors.get(flow.anchor)
        key = _get(entry, "key")
        return key if isinstance(key, str) and key else self.session.id

    def lead_wrote_since(self, flow: Flow | None, since_iso: str | None) -> bool:
        """§3.11.5: the customer wrote after `since_iso` (lastUserAt, or the anchor's lastInboundAt)."""
        since = iso_to_ms(since_iso) if since_iso else None
        if since is None:
            return False
        last_user = self.session.last_user_at
        if last_user and (iso_to_ms(last_user) or 0) > since:
            return True
        if flow is not None and flow.anchor and flow.anchor != "session":
            entry = self.anchors.get(flow.anchor)
            inbound = _get(entry, "lastInboundAt") or _get(entry, "last_inbound_at")
            if isinstance(inbound, datetime):
                inbound = to_iso(inbound)
            if inbound and (iso_to_ms(inbound) or 0) > since:
                return True
        return False

    def snap(self, at_ms: int, wanted: bool) -> int:
        if not wanted or self.agent.business_hours is None:
            return at_ms
        return to_ms(self.agent.snap_business_hours(from_ms(at_ms), self.context))

    def step_key(self, run: Run, step_id: str) -> str:
        return keys.step_key(run.id, step_id, run.visits.get(step_id, 0))

    @staticmethod
    def label(target: Next | None) -> str | None:
        if target is None:
            return None
        if target.kind == "end":
            return "end"
        if target.kind == "flow":
            return f"flow:{target.flow}"
        return target.step

    def current_kind(self, run: Run) -> str:
        flow = self.flow_of(run)
        step = flow.step(run.step_id) if flow is not None else None
        return step.outcome_kind if step is not None else "if"

    # ----------------------------------------------------------------------- lines

    def line(
        self,
        run: Run | None,
        kind: str,
        status: str,
        code: str | None = None,
        *,
        key: str | None = None,
        step_id: str | None = None,
        detail: str | None = None,
        next: str | None = None,
        until: str | None = None,
        llm_calls: int | None = None,
    ) -> StepOutcome:
        if run is not None and step_id is None:
            step_id = run.step_id
        out = StepOutcome.model_construct(
            run_id=run.id if run is not None else None,
            flow_id=run.flow_id if run is not None else None,
            step_id=step_id if run is not None else None,
            key=key,
            kind=kind,
            status=status,
            code=code,
            message=OUTCOME_MESSAGES[code] if code is not None else None,
            detail=detail,
            next=next,
            until=until,
            at=self.now_iso,
            llm_calls=llm_calls,
        )
        self.outcomes.append(out)
        if run is not None:
            run.outcomes.append(out)
            if len(run.outcomes) > MAX_RUN_OUTCOMES:
                del run.outcomes[: len(run.outcomes) - MAX_RUN_OUTCOMES]
        return out

    def skip(self, flow_id: str, anchor: str, trigger_key: str, code: str) -> None:
        self.skipped.append(SkippedTrigger.model_construct(
            flow_id=flow_id, anchor=anchor, trigger_key=trigger_key, code=code, message=OUTCOME_MESSAGES[code]))

    def ignore(self, code: str, key: str) -> None:
        self.line(None, "wait", "skipped", code, key=key)
        self.ignored = True

    def emit(self, text: str, kind: str, key: str, run: Run | None, step_id: str | None, media: Any = None) -> None:
        self.messages.append(OutboundMessage.model_construct(
            text=text, kind=kind, media=media, after_ms=self.after_ms, key=key,
            run_id=run.id if run is not None else None, step_id=step_id))
        self.after_ms = 0
        if run is not None:
            self.spoke_by.add(run.id)
        self.spoke = True

    # ----------------------------------------------------------------------- claims

    def repeat_mode(self, trigger: Trigger | None, kind: str) -> tuple[str, int | None]:
        if trigger is None:
            return DEFAULT_REPEAT[kind], None
        return trigger.repeat_mode, trigger.cooldown_ms

    def held_at(self, dedupe: str) -> str | None:
        claim = self.session.claims.get(dedupe)
        if claim is not None:
            return claim.get("at") if isinstance(claim, Mapping) else getattr(claim, "at", None)
        return self.claims_held.get(dedupe)

    def repeat_allows(self, flow: Flow, trigger: Trigger | None, kind: str, key: str) -> bool:
        """The `repeatAllows` pre-check (message eligibility, mention candidacy, silence arming)."""
        mode, cooldown = self.repeat_mode(trigger, kind)
        nonce = key if mode == "always" else ""
        held = self.held_at(keys.dedupe_key(flow.id, self.anchor_of(flow), nonce))
        if held is None:
            return True
        if mode in ("once", "always"):
            return False
        held_ms = iso_to_ms(held)
        return held_ms is None or self.now_ms - held_ms >= (cooldown or 0)

    def prune_always_claims(self, prefix: str) -> None:
        """Ruling 7: keep the last 50 `always` claims per flow+anchor, oldest `at` dropped first."""
        claims = self.session.claims
        mine = [k for k in claims if k.startswith(prefix) and len(k) > len(prefix)]
        if len(mine) <= MAX_ALWAYS_CLAIMS:
            return
        mine.sort(key=lambda k: (iso_to_ms(claims[k]["at"]) or 0, k))
        for k in mine[: len(mine) - MAX_ALWAYS_CLAIMS]:
            del claims[k]

    # ----------------------------------------------------------------------- runs

    def draft_run(self, flow: Flow, kind: str, key: str) -> Run:
        return Run.model_construct(
            id=keys.run_id(flow.id, key), flow_id=flow.id, anchor=self.anchor_of(flow),
            dedupe_key=keys.dedupe_key(flow.id, self.anchor_of(flow), ""), step_id=None, status="running",
            trigger=RunTrigger.model_construct(kind=kind, key=key, payload=None), input=None, hop=0,
            started_at=self.now_iso, suspended_at=None, staying=None, waiting=None, asked={}, visits={},
            outcomes=[])

    def start_run(
        self,
        flow: Flow,
        kind: str,
        key: str,
        trigger: Trigger | None = None,
        payload: Any = UNSET,
        hop: int = 0,
        keep_data: bool = False,
    ) -> Run | None:
        """The one start order (§3.3)."""
        anchor = self.anchor_of(flow)
        mode, cooldown = self.repeat_mode(trigger, kind)
        nonce = key if mode == "always" else ""
        dedupe = keys.dedupe_key(flow.id, anchor, nonce)
        value = None if payload is UNSET else payload
        run = Run.model_construct(
            id=keys.run_id(flow.id, key), flow_id=flow.id, anchor=anchor, dedupe_key=dedupe, step_id=None,
            status="running", trigger=RunTrigger.model_construct(kind=kind, key=key, payload=value), input=value,
            hop=hop, started_at=self.now_iso, suspended_at=None, staying=None, waiting=None, asked={}, visits={},
            outcomes=[])
        if trigger is not None and trigger.if_ is not None and not self.judge(trigger.if_, run, value):
            return None  # a false trigger `if` writes nothing
        held = self.held_at(dedupe)
        if held is not None:
            if mode in ("once", "always"):
                self.skip(flow.id, anchor, key, "already-claimed")
                return None
            held_ms = iso_to_ms(held)
            if held_ms is not None and self.now_ms - held_ms < (cooldown or 0):
                self.skip(flow.id, anchor, key, "cooldown")
                return None
        if hop >= HOP_CAP:
            self.skip(flow.id, anchor, key, "hop-limit")
            return None
        live = next((r for r in self.session.runs if r.flow_id == flow.id and r.anchor == anchor), None)
        if live is not None:
            if live.status == "waiting" and live.step_id is None:
                self.end_run(live, "replaced")
            else:
                self.skip(flow.id, anchor, key, "already-running")
                return None
        elif keys.live_pair(flow.id, anchor) in self.claims_active:
            self.skip(flow.id, anchor, key, "already-running")
            return None
        self.session.claims[dedupe] = {"at": self.now_iso}
        if nonce:
            self.prune_always_claims(keys.dedupe_key(flow.id, anchor, ""))
        if not keep_data:
            for slug in flow.clear_on_start:
                self.session.data.pop(slug, None)
        self.session.runs.append(run)
        self.started.append(StartedRun.model_construct(run_id=run.id, flow_id=flow.id, anchor=anchor,
                                                       dedupe_key=dedupe))
        if trigger is not None and trigger.kind == "event":
            at_ms = self.snap(self.now_ms + (trigger.after_ms or 0), trigger.business_hours)
            if trigger.after_ms is not None or at_ms > self.now_ms:
                self.park(run, "timer", keys.start_wake(run.id, at_ms), at_ms)
                self.line(run, "wait", "waiting", "awaiting-trigger", until=to_iso(from_ms(at_ms)))
        return run

    def park(self, run: Run, kind: str, key: str, at_ms: int, event: str | None = None) -> None:
        until = to_iso(from_ms(at_ms))
        run.status = "waiting"
        run.waiting = Waiting.model_construct(kind=kind, key=key, until=until, set_at=self.now_iso, event=event)
        self.schedule.append(ScheduleEntry.model_construct(key=key, at=from_ms(at_ms), replaces=None))

    def end_run(self, run: Run, reason: str, code: str | None = None, kind: str | None = None,
                detail: str | None = None) -> None:
        runs = self.session.runs
        for i, r in enumerate(runs):
            if r is run:
                del runs[i]
                break
        if code is not None:
            self.line(run, kind or self.current_kind(run), "failed" if reason == "failed" else "skipped", code,
                      detail=detail or None)
        self.ended.append(EndedRun.of(run, reason))
        if self.talk is not None and self.talk.run is run:
            self.talk = None

    def enter(self, run: Run, step: Step) -> None:
        run.step_id = step.id
        run.visits[step.id] = run.visits.get(step.id, 0) + 1
        run.status = "running"
        run.waiting = None
        run.staying = None

    def suspend(self, run: Run) -> None:
        run.status = "suspended"
        run.suspended_at = self.now_iso
        if self.talk is not None and self.talk.run is run:
            self.talk = None

    # ======================================================================= phase 2: ingest

    def begin(self) -> None:
        """Load (done in __init__) and Ingest (§3.2)."""
        self.ingesting = True
        try:
            getattr(self, f"_ingest_{self.kind}")()
        finally:
            self.ingesting = False

    def _ingest_message(self) -> None:
        what = self.what
        message_id = what.get("id")
        if message_id is not None:
            if message_id in self.session.inputs:
                self.ignore("duplicate-input", message_id)
                return
            self.session.inputs.append(message_id)
            if len(self.session.inputs) > MAX_INPUTS:
                del self.session.inputs[: len(self.session.inputs) - MAX_INPUTS]
        self.session.last_user_at = what["at"]
        self.resolve_reply_waits()

    def take_ingest_floor(self, run: Run) -> None:
        if self.is_live(run) and not self.floor_from_ingest:
            self.floor_from_ingest = True
            self.floor_run_id = run.id

    def resolve_reply_waits(self) -> None:
        """§3.2.1 step 3: a reply resolves timer waits that have an `else`."""
        for run in list(self.session.runs):
            waiting = run.waiting
            if run.status != "waiting" or waiting is None or waiting.kind != "timer" or run.step_id is None:
                continue
            flow = self.flow_of(run)
            step = flow.step(run.step_id) if flow is not None else None
            if step is None or step.kind != "wait" or step.else_ is None:
                continue
            run.status = "running"
            run.waiting = None
            target = step.else_
            for branch in step.branches:
                if branch.if_ is not None and self.judge(branch.if_, run):
                    target = branch.then
                    break
            self.line(run, "wait", "ok", "replied", next=self.label(target), step_id=step.id)
            if not self.floor_from_ingest:
                self.floor_run_id = run.id
            self.follow(run, flow, step, target)
            self.take_ingest_floor(run)

    def _ingest_wake(self) -> None:
        key = self.what["key"]
        if self.original is None:
            self.ignore("no-session", key)
            return
        if keys.is_silence_wake(key):
            self._silence_wake(key)
        else:
            self._run_wake(key)

    def _run_wake(self, key: str) -> None:
        run = next((r for r in self.session.runs if r.waiting is not None and r.waiting.key == key), None)
        if run is None:
            self.ignore("stale-wake", key)
            return
        set_at = run.waiting.set_at or run.started_at
        run.status = "running"
        run.waiting = None
        self.floor_run_id = run.id
        if run.step_id is None:
            return
        flow = self.flow_of(run)
        step = flow.step(run.step_id) if flow is not None else None
        if step is None:
            return
        if step.kind == "wait":
            replied = step.else_ is not None and self.lead_wrote_since(flow, set_at)
            target = step.else_ if replied else step.then
            self.line(run, "wait", "ok", "replied" if replied else "no-reply", next=self.label(target))
            self.follow(run, flow, step, target)
        elif step.kind == "wait_event":
            target = step.else_ or Next.end()
            self.line(run, "wait", "ok", "no-event", next=self.label(target))
            self.follow(run, flow, step, target)
        # a deferred `do` or a speak retry re-runs its step at the same visit in phase 5

    def _silence_wake(self, key: str) -> None:
        flow_id, ms_text = keys.parse_silence_wake(key, self.session.id)
        flow = self.index.by_id.get(flow_id)
        if flow is None:
            self.skip(flow_id, self.session.id, ms_text, "flow-gone")
            return
        last = self.session.last_assistant_at
        try:
            ms = int(ms_text)
        except ValueError:
            ms = None
        if not last or ms is None or iso_to_ms(last) != ms or self.lead_wrote_since(flow, last):
            self.ignore("silence-broken", key)
            return
        trigger = self.index.silence_trigger.get(flow.id)
        run = self.start_run(flow, "silence", str(ms), trigger)
        if run is not None:
            self.floor_run_id = run.id

    def _ingest_event(self) -> None:
        what = self.what
        name = what["name"]
        event = self.agent.events.get(name)
        direction = getattr(event, "direction", None)
        if direction == "inbound":
            self.session.last_user_at = self.now_iso
            self.resolve_reply_waits()
        elif direction == "outbound":
            self.session.last_assistant_at = self.now_iso
        for run in list(self.session.runs):
            waiting = run.waiting
            if waiting is None or waiting.kind != "event" or waiting.event != name:
                continue
            run.status = "running"
            run.waiting = None
            flow = self.flow_of(run)
            step = flow.step(run.step_id) if flow is not None else None
            if step is None:
                continue
            self.line(run, "wait", "ok", "event-arrived", next=self.label(step.then))
            if not self.floor_from_ingest:
                self.floor_run_id = run.id
            self.follow(run, flow, step, step.then)
            self.take_ingest_floor(run)
        for flow in self.index.flows:
            for trigger in flow.on:
                if trigger.kind == "event" and trigger.event == name:
                    if self.start_run(flow, "event", what["key"], trigger, what.get("payload", UNSET),
                                      what.get("hop", 0)) is not None:
                        break

    def _ingest_start(self) -> None:
        what = self.what
        flow = self.index.by_id.get(what["flow"])
        if flow is None:
            self.skip(what["flow"], self.session.id, what["key"], "flow-gone")
            return
        self.start_run(flow, "start", what["key"], None, what.get("input", UNSET), what.get("hop", 0))

    # ======================================================================= phase 3: understand request

    def eligible_flows(self) -> list[tuple[Flow, Trigger]]:
        return list(self.message_triggered(self.index.message_trigger))

    def catch_all(self) -> tuple[Flow, Trigger] | None:
        return next(self.message_triggered(self.index.catch_all_trigger), None)

    def message_triggered(self, triggers: Mapping[str, Trigger | None]) -> Iterator[tuple[Flow, Trigger]]:
        """Each flow, in order, whose trigger in `triggers` this message may fire: `if` holds, repeat allows."""
        tk = self.trigger_key
        for flow in self.index.flows:
            trigger = triggers[flow.id]
            if trigger is None:
                continue
            if trigger.if_ is not None and not self.judge(trigger.if_, self.draft_run(flow, "message", tk), None):
                continue
            if self.repeat_allows(flow, trigger, "message", tk):
                yield flow, trigger

    def lone_flow_shortcut(self, eligible: list[Any]) -> bool:
        return len(eligible) == 1 and self.agent.idle.silent and self.catch_all() is None

    def harvestable(self, flow: Flow) -> list[str]:
        fields = self.agent.fields
        data = self.session.data
        return [s for s in self.index.flow_fields[flow.id]
                if s in fields and fields[s].extract == "anywhere" and not is_known(data.get(s))]

    def understand_request(self) -> UnderstandRequest | None:
        """§3.4.1-3.4.2: what the understand call must judge, or None (no call)."""
        if self.ignored or self.kind != "message":
            return None
        if self.silenced is not None and not self.understand_allowed:
            return None
        floor_run = self.asker() or self.run_by_id(self.floor_run_id)
        floor_flow = self.flow_of(floor_run) if floor_run is not None else None
        eligible = self.eligible_flows()
        eligible_flows = [f for f, _ in eligible]
        message_flows = [] if floor_run is None and self.lone_flow_shortcut(eligible) else eligible_flows
        mention_flows = []
        for flow in self.index.flows:
            trigger = self.index.mention_trigger[flow.id]
            if trigger is not None and trigger.phrases and self.repeat_allows(flow, trigger, "mention",
                                                                               self.trigger_key):
                mention_flows.append((flow, trigger))
        branches: list[tuple[Run, Step, Any]] = []
        if floor_run is not None and floor_flow is not None:
            step = floor_flow.step(floor_run.step_id)
            if step is not None and step.kind == "talk":
                branches = [(floor_run, step, b) for b in step.branches if b.when is not None]
        wanted: set[str] = set()
        for flow in ([floor_flow] if floor_flow is not None else []) + eligible_flows:
            wanted.update(self.harvestable(flow))
        judging = bool(message_flows or mention_flows or branches or wanted)
        if floor_run is None:
            fallback = self.catch_all()
            if fallback is not None:
                fb_flow = fallback[0]
                own = self.harvestable(fb_flow)
                first = fb_flow.steps[0] if fb_flow.steps else None
                free = set(first.collect or ()) if first is not None and first.kind == "talk" and not first.question \
                    else set()
                if judging or any(s not in free for s in own):
                    wanted.update(own)
        fields = [s for s in self.agent.fields if s in wanted]
        if not (judging or fields):
            return None
        question_flows = ([floor_flow] if floor_flow is not None else []) + eligible_flows
        judge_asks = any(self.index.has_question.get(f.id) for f in question_flows)
        text = self.what.get("text", "")
        return UnderstandRequest(text, floor_run, floor_flow, message_flows, mention_flows, branches, fields,
                                 judge_asks)

    # ======================================================================= phase 4: decide

    def decide(self, understanding: Understanding | None) -> None:
        if self.ignored or self.kind != "message":
            return
        u = understanding or Understanding()
        self.understanding = u
        self.llm_calls += u.llm_calls
        self.usage = add_usage(self.usage, u.usage)
        asker = self.asker()
        route: tuple[Flow, Trigger] | None = None
        if not self.floor_from_ingest:
            eligible = self.eligible_flows()
            scores = u.flows

            def best(items: list[tuple[Flow, Trigger]]) -> tuple[tuple[Flow, Trigger] | None, float]:
                top, top_score = None, -1.0
                for item in items:
                    score = scores.get(item[0].id, 0)
                    if score > top_score:
                        top, top_score = item, score
                return top, top_score

            if asker is not None:
                current = scores.get(asker.flow_id, 0)
                top, top_score = best([e for e in eligible if e[0].id != asker.flow_id])
                if top is not None and top_score >= current + ROUTE_STICKY and top_score >= ROUTE_MIN:
                    route = top
            elif self.lone_flow_shortcut(eligible):
                route = eligible[0]
            else:
                top, top_score = best(eligible)
                route = top if top is not None and top_score >= ROUTE_MIN else self.catch_all()
        # mention runs, in agent order
        for flow in self.index.flows:
            trigger = self.index.mention_trigger[flow.id]
            if trigger is None:
                continue
            if not trigger.phrases:
                self.start_run(flow, "mention", self.trigger_key, trigger)
            elif u.mentions.get(flow.id) is True:
                self.start_run(flow, "mention", self.trigger_key, trigger, u.extract.get(flow.id, UNSET))
        if route is not None:
            flow, trigger = route
            suspended = next((r for r in self.session.runs if r.flow_id == flow.id and r.status == "suspended"), None)
            if suspended is not None:
                suspended.status = "running"
                suspended.suspended_at = None
                self.floor_run_id = suspended.id
            else:
                run = self.start_run(flow, "message", self.trigger_key, trigger)
                if run is not None:
                    self.floor_run_id = run.id
        elif asker is not None and not self.floor_from_ingest:
            self.floor_run_id = asker.id
        for slug, value in u.fields.items():
            self.write_field(slug, value)
        if asker is not None and self.is_live(asker) and asker.status == "asking":
            flow = self.flow_of(asker)
            step = flow.step(asker.step_id) if flow is not None else None
            if step is not None and step.kind == "talk":
                self.fire_branch(asker, flow, step, u)

    def write_field(self, slug: str, value: Any) -> None:
        """The validated write (§3.5 step 7) shared by understand and the speak envelope."""
        if value is None or value is UNSET:
            return
        definition = self.agent.fields.get(slug)
        if definition is None:
            self.line(None, "collect", "skipped", "unknown-field", detail=slug)
            return
        coerced = coerce_field(definition, value)
        if isinstance(coerced, Drop):
            self.line(None, "collect", "skipped", coerced.code, detail=slug)
            return
        self.session.data[slug] = coerced

    def already_run(self, run: Run, target: Next) -> bool:
        if target.kind == "end":
            return True
        if target.kind == "step":
            return run.visits.get(target.step, 0) > 0
        return False

    def fire_branch(self, run: Run, flow: Flow, step: Step, u: Understanding | None) -> bool:
        """§3.5.2: the first holding branch of an asking talk step."""
        for branch in step.branches:
            if branch.if_ is not None:
                hit = self.judge(branch.if_, run)
                if hit and run.staying and self.already_run(run, branch.then):
                    hit = False
            else:
                hit = u is not None and u.branches.get(keys.branch_key(run.id, step.id, branch.index)) is True
            if hit:
                self.line(run, step.outcome_kind, "ok", "branch", key=self.step_key(run, step.id),
                          next=self.label(branch.then), step_id=step.id)
                run.status = "running"
                self.follow(run, flow, step, branch.then)
                return True
        return False

    # ======================================================================= phase 5: advance

    def resume(self, check_branches: bool) -> Run | None:
        if self.asker() is not None:
            return None
        top: Run | None = None
        top_ms = -1
        for run in self.session.runs:
            if run.status != "suspended":
                continue
            ms = iso_to_ms(run.suspended_at or run.started_at) or 0
            if ms >= top_ms:  # ties: the later in session order
                top, top_ms = run, ms
        if top is None:
            return None
        top.status = "asking"
        top.suspended_at = None
        if check_branches and self.kind == "message":
            flow = self.flow_of(top)
            step = flow.step(top.step_id) if flow is not None else None
            if step is not None and step.kind == "talk":
                self.fire_branch(top, flow, step, None)
        return top

    def drain(self) -> None:
        queue = self.queue
        while queue:
            run = queue.popleft()
            if self.is_live(run):
                self.move(run)

    def advance(self) -> Any:
        """Phase 5: move every run, then choose the speaker (a Talk, IDLE, or None)."""
        if self.ignored:
            return None
        self.resume(check_branches=True)
        self.queue = deque(self.session.runs)
        self.drain()
        if self.kind == "message" and self.silenced is None:
            for _ in range(len(self.session.runs)):
                if self.talk is not None or self.spoke_by:
                    break
                resumed = self.resume(check_branches=True)
                if resumed is None:
                    break
                self.queue.append(resumed)
                self.drain()
        if self.silenced is not None:
            return None
        talk = self.talk
        if talk is not None:
            if self.kind == "message" and any(rid != talk.run.id for rid in self.spoke_by):
                self.line(talk.run, talk.step.outcome_kind, "skipped", "another-reply",
                          key=self.step_key(talk.run, talk.step.id), step_id=talk.step.id)
                self.talk = None
                return None
            if self.fixed_ready(talk):
                asks = self.understanding.asks if self.understanding is not None else None
                if self.kind == "message" and asks is not False:
                    talk.fixed_follows = True  # ruling 1: answer first, then the question verbatim
                    return talk
                self.ask_fixed(talk.run, talk.step, talk.pending)
                self.talk = None
                return None
            return talk
        if self.kind == "message" and self.asker() is None and not self.agent.idle.silent and not self.spoke_by:
            return IDLE
        return None

    def move(self, run: Run) -> None:
        """§3.6.2: move one run as far as it goes this time."""
        if run.status in ("waiting", "suspended"):
            return
        if run.status == "asking" and self.kind != "message":
            return
        flow = self.flow_of(run)
        if flow is None:
            self.end_run(run, "skipped", "flow-gone")
            return
        if not self.premise_holds(run, flow):
            return
        if run.staying and flow.on_end != "stay":
            self.finish_flow(run, flow)
            return
        resuming = run.status == "asking"
        run.status = "running"
        if run.step_id is None:
            if not flow.steps:
                self.finish_flow(run, flow)
                return
            self.enter(run, flow.steps[0])
        steps = 0
        while run.status == "running" and self.is_live(run):
            if steps >= STEP_CAP:
                self.end_run(run, "failed", "step-loop")
                return
            step = flow.step(run.step_id)
            if step is None:
                self.end_run(run, "skipped", "step-gone")
                return
            self.execute(run, flow, step, resuming and steps == 0)
            steps += 1

    def premise_holds(self, run: Run, flow: Flow) -> bool:
        """§3.11.3: `while`, or the starting trigger kind's `if`s; silence runs also die on a reply."""
        if run.trigger.kind == "silence" and self.kind == "wake" and self.lead_wrote_since(flow, run.started_at):
            self.end_run(run, "skipped", "customer-replied")
            return False
        if flow.while_ is not None:
            holds = self.judge(flow.while_, run)
        else:
            triggers = [t for t in flow.on if t.kind == run.trigger.kind]
            holds = not triggers or any(t.if_ is None or self.judge(t.if_, run) for t in triggers)
        if not holds:
            self.end_run(run, "skipped", "premise-changed")
        return holds

    # ----------------------------------------------------------------------- steps

    def execute(self, run: Run, flow: Flow, step: Step, resuming: bool) -> None:
        kind = step.kind
        if kind == "talk":
            self.exec_talk(run, flow, step, resuming)
        elif kind == "say":
            self.exec_say(run, flow, step)
        elif kind == "do":
            self.exec_do(run, flow, step)
        elif kind == "wait":
            self.exec_wait(run, flow, step)
        elif kind == "wait_event":
            self.exec_wait_event(run, flow, step)
        else:
            self.exec_if(run, flow, step)

    def pending_of(self, run: Run, step: Step) -> list[str]:
        if not step.collect:
            return []
        return pending_fields(step.collect, self.session.data, run.asked, step.max_asks)

    def report_max_asks(self, run: Run, step: Step) -> None:
        data = self.session.data
        for slug in step.collect or ():
            if not is_known(data.get(slug)) and run.asked.get(slug, 0) >= step.max_asks:
                self.line(run, "collect", "skipped", "max-asks", key=self.step_key(run, step.id), detail=slug,
                          step_id=step.id)

    def where_it_went(self, flow: Flow, step: Step, target: Next | None) -> str:
        """`next` for a silenced-skip line: the explicit target, else the next step or 'end'."""
        if target is not None:
            return self.label(target) or "end"
        after = flow.step_after(step)
        return after.id if after is not None else "end"

    def silenced_step(self, run: Run, flow: Flow, step: Step) -> None:
        """A fresh talk or say step while silenced: the run ends, or under `skip: True` the
        step is skipped and the run takes its `then` (the user's page)."""
        if self.skip_mode:
            self.line(run, step.outcome_kind, "skipped", "silenced", key=self.step_key(run, step.id),
                      detail=self.silenced, next=self.where_it_went(flow, step, step.then), step_id=step.id)
            self.follow(run, flow, step, step.then)
        else:
            self.end_run(run, "skipped", "silenced", kind=step.outcome_kind, detail=self.silenced)

    def exec_talk(self, run: Run, flow: Flow, step: Step, resuming: bool) -> None:
        pending = self.pending_of(run, step)
        if step.collect and not pending and not run.staying:
            self.report_max_asks(run, step)
            key = self.step_key(run, step.id)
            if resuming:
                self.line(run, "collect", "ok", key=key, next=self.label(step.then), step_id=step.id)
            else:
                self.line(run, "collect", "skipped", "already-known", key=key, next=self.label(step.then),
                          step_id=step.id)
            self.follow(run, flow, step, step.then)
            return
        if self.silenced is not None:
            if resuming:
                run.status = "asking"
            else:
                self.silenced_step(run, flow, step)
            return
        for other in self.session.runs:
            if other is not run and other.status == "asking":
                self.suspend(other)
        run.status = "asking"
        if not self.speak_done:
            self.talk = Talk(run, flow, step, pending)
        elif self.fixed_ready(Talk(run, flow, step, pending)):
            self.ask_fixed(run, step, pending)

    def fixed_ready(self, talk: Talk) -> bool:
        """§3.6.5: a fixed question goes out only as the very first ask of every field."""
        step, run = talk.step, talk.run
        if not step.question or run.staying or not step.collect:
            return False
        if list(talk.pending) != list(step.collect):
            return False
        return all(run.asked.get(slug, 0) == 0 for slug in talk.pending)

    def ask_fixed(self, run: Run, step: Step, pending: list[str]) -> None:
        key = self.step_key(run, step.id)
        self.emit(render(step.question, self.scope(run)), "verbatim", key, run, step.id)
        for slug in pending:
            run.asked[slug] = run.asked.get(slug, 0) + 1
        self.line(run, "collect", "ok", "asked-fixed", key=key, step_id=step.id)

    def exec_say(self, run: Run, flow: Flow, step: Step) -> None:
        if self.silenced is not None:
            self.silenced_step(run, flow, step)
            return
        key = self.step_key(run, step.id)
        if step.once:
            claim = keys.say_once_claim(flow.id, step.id, self.session.id)
            if claim in self.session.claims or claim in self.claims_held:
                self.line(run, "say", "skipped", "already-sent", key=key, next=self.label(step.then))
                self.follow(run, flow, step, step.then)
                return
            self.session.claims[claim] = {"at": self.now_iso}
        self.emit(render(step.say, self.scope(run)), "verbatim", key, run, step.id, media=step.media)
        self.line(run, "say", "ok", key=key, next=self.label(step.then))
        self.follow(run, flow, step, step.then)

    def exec_do(self, run: Run, flow: Flow, step: Step) -> None:
        key = self.step_key(run, step.id)
        name = step.action
        action = self.agent.actions.get(name)
        if action is None:
            result: Any = {"failed": f'unknown action "{name}"'}
        else:
            params = render_deep(step.params, self.scope(run))
            ctx = ActionContext(context=self.context, data=self.session.data, input=run.input, run=run,
                                silenced=self.silenced, now=self.now, key=key, dedupe_key=run.dedupe_key)
            try:
                result = resolve_awaitable(action.run(params, ctx))
            except Exception as exc:  # an action error never escapes the turn
                result = {"failed": str(exc) or type(exc).__name__}
        if result is None:
            result = {"ok": True}
        elif not isinstance(result, Mapping):
            result = {k: getattr(result, k) for k in ("ok", "detail", "spoke", "skipped", "failed", "defer")
                      if getattr(result, k, None) is not None}
        if "defer" in result and result.get("defer") is not None and not is_duration(result["defer"]):
            # ruling 2: a non-duration defer is a failure of the action, never an exception
            result = {"failed": f'action "{name}" asked to defer by "{result["defer"]}", which is not a '
                                'duration. Use a value like "2m" or "1h".'}
        detail = result.get("detail")
        detail = str(detail) if detail else None  # an empty detail adds nothing
        if result.get("failed") is not None:
            target = step.on_fail or step.then
            self.line(run, "do", "failed", "action-failed", key=key, detail=str(result["failed"]),
                      next=self.label(target))
            self.follow(run, flow, step, target)
        elif result.get("skipped") is not None:
            self.line(run, "do", "skipped", "action-skipped", key=key, detail=str(result["skipped"]),
                      next=self.label(step.then))
            self.follow(run, flow, step, step.then)
        elif result.get("defer") is not None:
            at_ms = self.now_ms + parse_duration(result["defer"])
            self.park(run, "timer", keys.timer_wake(run.id, step.id, at_ms), at_ms)
            self.line(run, "do", "deferred", "action-deferred", key=key, detail=detail,
                      until=to_iso(from_ms(at_ms)))
        else:
            if result.get("spoke"):
                self.spoke_by.add(run.id)
                self.spoke = True
            self.line(run, "do", "ok", key=key, detail=detail, next=self.label(step.then))
            self.follow(run, flow, step, step.then)

    def peek_speaks(self, flow: Flow, step: Step) -> bool:
        target = step.then
        if target is None:
            nxt = flow.step_after(step)
        elif target.kind == "step":
            nxt = flow.step(target.step)
        else:
            nxt = None
        return nxt is not None and nxt.kind in ("say", "talk")

    def exec_wait(self, run: Run, flow: Flow, step: Step) -> None:
        key = self.step_key(run, step.id)
        ms = step.wait_ms or 0
        if ms <= SHORT_WAIT_MS and self.peek_speaks(flow, step):
            self.after_ms += ms
            self.line(run, "wait", "ok", "inline-delay", key=key, detail=f"{ms}ms", next=self.label(step.then))
            self.follow(run, flow, step, step.then)
            return
        at_ms = self.snap(self.now_ms + ms, step.business_hours)
        self.park(run, "timer", keys.timer_wake(run.id, step.id, at_ms), at_ms)
        self.line(run, "wait", "waiting", key=key, until=to_iso(from_ms(at_ms)))

    def exec_wait_event(self, run: Run, flow: Flow, step: Step) -> None:
        key = self.step_key(run, step.id)
        at_ms = self.now_ms + (step.up_to_ms or 0)
        self.park(run, "event", keys.timer_wake(run.id, step.id, at_ms), at_ms, event=step.event)
        self.line(run, "wait", "waiting", "awaiting-event", key=key, detail=step.event,
                  until=to_iso(from_ms(at_ms)))

    def exec_if(self, run: Run, flow: Flow, step: Step) -> None:
        target = step.then if self.judge(step.if_, run) else (step.else_ or Next.end())
        self.line(run, "if", "ok", key=self.step_key(run, step.id), next=self.label(target))
        self.follow(run, flow, step, target)

    # ----------------------------------------------------------------------- movement

    def follow(self, run: Run, flow: Flow, step: Step, target: Next | None) -> None:
        """§3.6.6: where a step's target leads."""
        if target is None:
            nxt = flow.step_after(step)
            if nxt is None:
                self.finish_flow(run, flow)
            else:
                self.enter(run, nxt)
            return
        if target.kind == "end":
            self.finish_flow(run, flow)
            return
        if target.kind == "flow":
            self.chain(run, step, target)
            return
        for slug in target.clear:
            self.session.data.pop(slug, None)
            run.asked.pop(slug, None)  # so a fixed question goes out again
        nxt = flow.step(target.step)
        if nxt is None:
            self.end_run(run, "skipped", "step-gone")
        else:
            self.enter(run, nxt)

    def chain(self, run: Run, step: Step, target: Next) -> None:
        child_id = render(target.flow or "", self.scope(run))
        key = self.step_key(run, step.id)
        self.end_run(run, "flow")
        child = self.index.by_id.get(child_id)
        if child is None:
            self.skip(child_id, self.session.id, key, "flow-gone")
            return
        payload = target.input if target.has_input else (run.input if run.input is not None else UNSET)
        self.start_child(run, child, key, payload, keep_data=False)

    def start_child(self, parent: Run, flow: Flow, key: str, payload: Any, keep_data: bool) -> None:
        child = self.start_run(flow, "flow", key, None, payload, parent.hop + 1, keep_data=keep_data)
        if child is None:
            return
        if self.floor_run_id is None or self.floor_run_id == parent.id:
            self.floor_run_id = child.id
            if self.ingesting:
                self.floor_from_ingest = True
        self.queue.append(child)

    def stay_step(self, run: Run, flow: Flow) -> Step | None:
        for line in reversed(run.outcomes):
            if line.kind in ("prompt", "collect"):
                step = flow.step(line.step_id)
                if step is not None and step.kind == "talk":
                    return step
        return flow.last_talk_step

    def finish_flow(self, run: Run, flow: Flow) -> None:
        """§3.6.7: past the last step, `onEnd` decides."""
        if flow.on_end == "stay":
            step = self.stay_step(run, flow)
            if step is None:
                self.end_run(run, "end")
                return
            self.stay_at(run, step)
        elif flow.on_end == "reset" and flow.steps:
            last = flow.steps[-1]
            key = self.step_key(run, last.id)
            self.end_run(run, "reset")
            payload = run.input if run.input is not None else UNSET
            self.start_child(run, flow, key, payload, keep_data=True)
        else:
            self.end_run(run, "end")

    def stay_at(self, run: Run, step: Step) -> None:
        self.enter(run, step)
        run.staying = True
        run.status = "asking"
        others = [r for r in self.session.runs if r is not run and r.status == "asking"]
        owns = self.kind == "message" and self.floor_run_id == run.id
        if others and not owns:
            self.suspend(run)
            return
        for other in others:
            self.suspend(other)
        if (not self.ingesting and self.kind == "message" and self.silenced is None and not self.speak_done
                and not self.spoke):
            run.status = "running"  # the stay step answers this very message

    # ======================================================================= phase 7: settle

    def settle(self, speaker: Any, outcome: Spoken | Deferred | None) -> None:
        if self.ignored:
            return
        self.speak_done = True
        talk = self.talk
        self.talk = None
        if outcome is not None:
            self.llm_calls += outcome.llm_calls
            self.usage = add_usage(self.usage, outcome.usage)
            if isinstance(outcome, Deferred):
                if speaker is IDLE:
                    self.line(None, "idle", "deferred", outcome.code, llm_calls=outcome.llm_calls)
                elif talk is not None:
                    self.defer_talk(talk, outcome)
            elif speaker is IDLE:
                if outcome.message:
                    self.emit(outcome.message, "ai", keys.idle_key(self.trigger_key), None, None)
                self.session.data.update(outcome.data)
                self.line(None, "idle", "ok", key=keys.idle_key(self.trigger_key), llm_calls=outcome.llm_calls)
            elif talk is not None:
                self.apply_spoken(talk, outcome)
        if self.spoke:
            self.session.last_assistant_at = self.now_iso
        if self.asker() is None:
            self.resume(check_branches=False)
        self.arm_silence()

    def defer_talk(self, talk: Talk, deferred: Deferred) -> None:
        run, step = talk.run, talk.step
        key = self.step_key(run, step.id)
        attempt = 0
        for line in reversed(run.outcomes):
            if line.status == "deferred" and line.step_id == step.id:
                attempt += 1
            else:
                break
        retry_ms: int | None = None
        if deferred.retryable and attempt < len(RETRY_LADDER_MS):
            retry_ms = self.now_ms + RETRY_LADDER_MS[attempt]
            if deferred.reset_at_ms is not None and deferred.reset_at_ms > retry_ms:
                retry_ms = int(deferred.reset_at_ms)
        if retry_ms is None:
            self.line(run, step.outcome_kind, "failed", deferred.code, key=key, step_id=step.id)
            self.end_run(run, "failed")
            return
        wake = keys.retry_wake(run.id, step.id, run.visits.get(step.id, 0), retry_ms)
        self.park(run, "timer", wake, retry_ms)
        self.line(run, step.outcome_kind, "deferred", deferred.code, key=key, until=to_iso(from_ms(retry_ms)),
                  step_id=step.id)

    def apply_spoken(self, talk: Talk, spoken: Spoken) -> None:
        run, flow, step = talk.run, talk.flow, talk.step
        key = self.step_key(run, step.id)
        if spoken.message:
            self.emit(spoken.message, "ai", key, run, step.id)
        for slug, value in spoken.fields.items():
            self.write_field(slug, value)
        self.session.data.update(spoken.data)
        self.line(run, step.outcome_kind, "ok", key=key, llm_calls=spoken.llm_calls, step_id=step.id)
        if not self.is_live(run):
            return
        pending = self.pending_of(run, step)
        if talk.fixed_follows and self.fixed_ready(Talk(run, flow, step, pending)):
            self.ask_fixed(run, step, pending)  # the question follows the answer word for word
            return
        for slug in pending:
            run.asked[slug] = run.asked.get(slug, 0) + 1
        if run.staying:
            for slug in pending:
                if run.asked[slug] == step.max_asks:
                    self.line(run, "collect", "skipped", "max-asks", key=key, detail=slug, step_id=step.id)
            self.enter(run, step)
            run.staying = True
            run.status = "asking"
            return
        if pending:
            run.status = "asking"
            return
        self.report_max_asks(run, step)
        run.status = "running"
        self.follow(run, flow, step, step.then)
        if self.is_live(run) and run.status == "running":
            self.queue.append(run)
        self.drain()

    # ----------------------------------------------------------------------- silence

    def silence_wakes(self) -> list[tuple[Flow, int]]:
        """§5.2 `silenceWakes`: (flow, at ms) for each flow that would follow up."""
        if not self.index.has_silence:
            return []
        last = self.session.last_assistant_at
        if not last:
            return []
        ms = iso_to_ms(last)
        if ms is None:
            return []
        last_user = self.session.last_user_at
        if last_user and (iso_to_ms(last_user) or 0) > ms:
            return []
        out = []
        key = str(ms)
        for flow in self.index.flows:
            trigger = self.index.silence_trigger[flow.id]
            if trigger is None:
                continue
            if trigger.if_ is not None and not self.judge(trigger.if_, self.draft_run(flow, "silence", key), None):
                continue
            if not self.repeat_allows(flow, trigger, "silence", key):
                continue
            out.append((flow, self.snap(ms + (trigger.silence_ms or 0), trigger.business_hours)))
        return out

    def arm_silence(self) -> None:
        previous = self.original.last_assistant_at if self.original is not None else None
        if self.session.last_assistant_at == previous:
            return
        previous_ms = iso_to_ms(previous) if previous else None
        ms = iso_to_ms(self.session.last_assistant_at or "")
        for flow, at_ms in self.silence_wakes():
            replaces = keys.silence_wake(flow.id, self.session.id, previous_ms) if previous_ms is not None else None
            self.schedule.append(ScheduleEntry.model_construct(
                key=keys.silence_wake(flow.id, self.session.id, ms), at=from_ms(at_ms), replaces=replaces))

    # ======================================================================= phase 8: finish

    def changed(self) -> bool:
        if self.ignored:
            return False
        if self.original is None:
            return True
        if self.messages or self.schedule or self.outcomes or self.skipped:
            return True
        return self.session != self.original


def parse_silenced(silenced: Any) -> tuple[str | None, bool, bool]:
    """(reason, understand allowed, skip form) of the three `silenced` forms (§1.3 + the page)."""
    if silenced is None or silenced is False:
        return None, True, False
    if isinstance(silenced, str):
        return silenced, False, False
    reason = _get(silenced, "reason")
    reason = reason if isinstance(reason, str) else ""
    return reason, _get(silenced, "understand") is True, _get(silenced, "skip") is True


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)
