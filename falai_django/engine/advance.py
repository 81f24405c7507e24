"""Phase 5, advance (engine-turn.md §3.6): move every run as far as it goes this turn, then
choose the one speaker (a `Talk`, `IDLE`, or None)."""

from __future__ import annotations

from collections import deque
from typing import Any

from .decide import fire_branch
from .flows import Flow
from .jstime import iso_to_ms
from .runs import end_run, enter, finish_flow
from .session import Run
from .state import TurnState
from .steps import ask_fixed, execute, fixed_ready
from .types import IDLE

STEP_CAP = 50


def resume(state: TurnState, check_branches: bool) -> Run | None:
    if state.asker() is not None:
        return None
    top: Run | None = None
    top_ms = -1
    for run in state.session.runs:
        if run.status != "suspended":
            continue
        ms = iso_to_ms(run.suspended_at or run.started_at) or 0
        if ms >= top_ms:  # ties: the later in session order
            top, top_ms = run, ms
    if top is None:
        return None
    top = state.own(top)
    top.status = "asking"
    top.suspended_at = None
    if check_branches and state.kind == "message":
        place = state.place(top)
        if place is not None and place[1].kind == "talk":
            fire_branch(state, top, *place, None)
    return top


def drain(state: TurnState) -> None:
    queue = state.queue
    while queue:
        run = state.current(queue.popleft())
        if run.status in ("waiting", "suspended"):
            continue  # move() leaves a parked run where it is; skip the liveness scan
        if state.is_live(run):
            move(state, run)


def advance(state: TurnState) -> Any:
    """Phase 5: move every run, then choose the speaker (a Talk, IDLE, or None)."""
    if state.ignored:
        return None
    resume(state, check_branches=True)
    state.queue = deque(state.session.runs)
    drain(state)
    if state.kind == "message" and state.silenced is None:
        for _ in range(len(state.session.runs)):
            if state.talk is not None or state.spoke_by:
                break
            resumed = resume(state, check_branches=True)
            if resumed is None:
                break
            state.queue.append(resumed)
            drain(state)
    if state.silenced is not None:
        return None
    talk = state.talk
    if talk is not None:
        if state.kind == "message" and any(rid != talk.run.id for rid in state.spoke_by):
            state.line(talk.run, talk.step.outcome_kind, "skipped", "another-reply",
                      key=state.step_key(talk.run, talk.step.id), step_id=talk.step.id)
            state.talk = None
            return None
        if fixed_ready(state, talk):
            asks = state.understanding.asks if state.understanding is not None else None
            if state.kind == "message" and asks is not False:
                talk.fixed_follows = True  # ruling 1: answer first, then the question verbatim
                return talk
            ask_fixed(state, talk.run, talk.step, talk.pending)
            state.talk = None
            return None
        return talk
    if state.kind == "message" and state.asker() is None and not state.agent.idle.silent and not state.spoke_by:
        return IDLE
    return None


def move(state: TurnState, run: Run) -> None:
    """§3.6.2: move one run as far as it goes this time."""
    if run.status in ("waiting", "suspended"):
        return
    if run.status == "asking" and state.kind != "message":
        return
    flow = state.flow_of(run)
    if flow is None:
        end_run(state, run, "skipped", "flow-gone")
        return
    if not premise_holds(state, run, flow):
        return
    run = state.own(run)  # from here on the run changes
    if run.staying and flow.on_end != "stay":
        finish_flow(state, run, flow)
        return
    resuming = run.status == "asking"
    run.status = "running"
    if run.step_id is None:
        if not flow.steps:
            finish_flow(state, run, flow)
            return
        enter(state, run, flow.steps[0])
    steps = 0
    while run.status == "running" and state.is_live(run):
        if steps >= STEP_CAP:
            end_run(state, run, "failed", "step-loop")
            return
        step = flow.step(run.step_id)
        if step is None:
            end_run(state, run, "skipped", "step-gone")
            return
        execute(state, run, flow, step, resuming and steps == 0)
        steps += 1


def premise_holds(state: TurnState, run: Run, flow: Flow) -> bool:
    """§3.11.3: `while`, or the starting trigger kind's `if`s; silence runs also die on a reply."""
    if run.trigger.kind == "silence" and state.kind == "wake" and state.lead_wrote_since(flow, run.started_at):
        end_run(state, run, "skipped", "customer-replied")
        return False
    if flow.while_ is not None:
        holds = state.judge(flow.while_, run)
    else:
        triggers = [t for t in flow.on if t.kind == run.trigger.kind]
        holds = not triggers or any(t.if_ is None or state.judge(t.if_, run) for t in triggers)
    if not holds:
        end_run(state, run, "skipped", "premise-changed")
    return holds
