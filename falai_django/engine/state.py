"""The per-turn state (engine-turn.md §3.0): one object every phase reads and writes.

`TurnState.load(...)` is phase 1: the working session and the turn's fixed inputs. The
phases are plain functions over it (`ingest`, `decide`, `advance`, `settle`, ...); its
methods only read it, or append outcome lines, skipped triggers and messages to what the
turn returns.

The caller's session is never changed, and copying all of it made a turn's cost grow with
every live run. So the working session is copy-on-write: its own data, claims and inputs,
but the caller's `Run` objects until a turn changes one. Whatever changes a run first calls
`state.own(run)`, which swaps in the turn's copy; code that kept a run from before (the
queue, a loop's snapshot) asks `state.current(run)`. Unchanged runs are shared between the
caller's session and the new one, so a host must not change a returned session in place
(stores and `turn()` never do).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import keys
from .fields import UNSET
from .flows import Flow, Next, Step, Trigger
from .index import AgentIndex, agent_index
from .jstime import from_ms, iso_to_ms, to_iso, to_ms
from .outcomes import OUTCOME_MESSAGES
from .predicates import PredicateContext, evaluate
from .results import EndedRun, OutboundMessage, ScheduleEntry, SkippedTrigger, StartedRun
from .session import Run, Session, StepOutcome
from .session import Trigger as RunTrigger
from .templates import scope_of
from .types import Talk, Understanding

MAX_RUN_OUTCOMES = 50
DEFAULT_REPEAT = {"message": "once", "mention": "once", "silence": "once",
                  "event": "always", "start": "always", "flow": "always"}


@dataclass(eq=False)
class TurnState:
    """One turn's mutable state and its inputs."""

    agent: Any
    index: AgentIndex
    session_id: str
    kind: str
    what: dict[str, Any]
    original: Session | None  # the caller's session: read, never changed
    session: Session  # the working session this turn changes
    context: Any
    history: list[Any] | None
    anchors: Mapping[str, Any]
    claims_held: Mapping[str, str]
    claims_active: frozenset[str]
    now: datetime
    now_ms: int
    now_iso: str
    silenced: str | None
    understand_allowed: bool
    skip_mode: bool
    trigger_key: str
    # what the turn returns
    ignored: bool = False
    messages: list[OutboundMessage] = field(default_factory=list)
    schedule: list[ScheduleEntry] = field(default_factory=list)
    outcomes: list[StepOutcome] = field(default_factory=list)
    started: list[StartedRun] = field(default_factory=list)
    ended: list[EndedRun] = field(default_factory=list)
    skipped: list[SkippedTrigger] = field(default_factory=list)
    llm_calls: int = 0
    usage: dict[str, int] | None = None
    # moving runs
    floor_run_id: str | None = None
    floor_from_ingest: bool = False
    ingesting: bool = False
    spoke_by: set[str] = field(default_factory=set)
    spoke: bool = False
    after_ms: int = 0
    talk: Talk | None = None
    speak_done: bool = False
    queue: deque[Run] = field(default_factory=deque)
    understanding: Understanding | None = None
    # copy-on-write of the caller's runs: their ids, and id(original) -> the turn's copy
    theirs: frozenset[int] = frozenset()
    owned: dict[int, Run] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
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
    ) -> TurnState:
        """Phase 1, load: the turn's inputs and its working copy of the session."""
        claims = claims or {}
        reason, understand_allowed, skip_mode = parse_silenced(silenced)
        return cls(
            agent=agent,
            index=agent_index(agent),
            session_id=session_id,
            kind=kind,
            what=what,
            original=session,
            session=working_copy(session) if session is not None else Session.fresh(session_id),
            theirs=frozenset(id(run) for run in session.runs) if session is not None else frozenset(),
            context=context,
            history=history,
            anchors=anchors or {},
            claims_held=claims.get("held") or {},
            claims_active=frozenset(claims.get("active") or ()),
            now=now,
            now_ms=to_ms(now),
            now_iso=to_iso(now),
            silenced=reason,
            understand_allowed=understand_allowed,
            skip_mode=skip_mode,
            trigger_key=what.get("key", ""),
        )

    def flow_of(self, run: Run) -> Flow | None:
        return self.index.by_id.get(run.flow_id)

    def place(self, run: Run) -> tuple[Flow, Step] | None:
        """The run's flow and the step it is on, or None when either is gone from the agent."""
        flow = self.flow_of(run)
        step = flow.step(run.step_id) if flow is not None else None
        return None if flow is None or step is None else (flow, step)

    def own(self, run: Run) -> Run:
        """The turn's own copy of `run`, made (and put in the working session) on its first change."""
        if id(run) not in self.theirs:
            return run  # started this turn, or already the turn's copy
        mine = self.owned.get(id(run))
        if mine is None:
            mine = self.owned[id(run)] = copy_run(run)
            runs = self.session.runs
            for i, r in enumerate(runs):
                if r is run:
                    runs[i] = mine
                    break
        return mine

    def current(self, run: Run) -> Run:
        """`run` as the working session now holds it (the turn's copy once it changed)."""
        return self.owned.get(id(run), run) if self.owned else run

    def is_live(self, run: Run) -> bool:
        run = self.current(run)
        for r in self.session.runs:  # by identity: a plain loop, this runs once per moved run
            if r is run:
                return True
        return False

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
        place = self.place(run)
        return place[1].outcome_kind if place is not None else "if"

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
        if run is not None:
            run = self.own(run)  # the line goes on the turn's copy, never on the caller's run
            if step_id is None:
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

    def draft_run(self, flow: Flow, kind: str, key: str) -> Run:
        return Run.model_construct(
            id=keys.run_id(flow.id, key), flow_id=flow.id, anchor=self.anchor_of(flow),
            dedupe_key=keys.dedupe_key(flow.id, self.anchor_of(flow), ""), step_id=None, status="running",
            trigger=RunTrigger.model_construct(kind=kind, key=key, payload=None), input=None, hop=0,
            started_at=self.now_iso, suspended_at=None, staying=None, waiting=None, asked={}, visits={},
            outcomes=[])

    def changed(self) -> bool:
        if self.ignored:
            return False
        if self.original is None:
            return True
        if self.messages or self.schedule or self.outcomes or self.skipped:
            return True
        return self.session != self.original


def copy_json(value: Any) -> Any:
    """A copy of JSON-shaped data (dicts and lists copied at every depth, other values shared)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def working_copy(session: Session) -> Session:
    """The turn's session: its own containers (data and the input a handler may change in place
    are copied at every depth) around the caller's runs, which `TurnState.own` copies on change."""
    return type(session).model_construct(
        id=session.id, v=session.v, version=session.version, data=copy_json(session.data),
        runs=list(session.runs), claims=dict(session.claims), inputs=list(session.inputs),
        metadata=copy_json(session.metadata), last_user_at=session.last_user_at,
        last_assistant_at=session.last_assistant_at,
        history=copy_json(session.history) if session.history is not None else None)


def copy_run(run: Run) -> Run:
    """A copy of `run` the turn may change: its own containers; the trigger, waiting and outcome
    records are shared (the engine replaces them, never changes them)."""
    return run.model_copy(update={"input": copy_json(run.input), "asked": dict(run.asked),
                                  "visits": dict(run.visits), "outcomes": list(run.outcomes)})


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
