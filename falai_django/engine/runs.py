"""The one mover (engine-turn.md §3.3, §3.6.6-§3.6.7): every change of where a run is.

Starting a run (the one start order and its claims), entering a step, following a step's
target, chaining into another flow, finishing a flow (`onEnd`), staying, parking on a wait,
suspending and ending. The phases decide; only these functions move.
"""

from __future__ import annotations

from typing import Any

from . import keys
from .fields import UNSET
from .flows import Flow, Next, Step, Trigger
from .jstime import from_ms, iso_to_ms, to_iso
from .results import EndedRun, ScheduleEntry, StartedRun
from .session import Run, Waiting
from .session import Trigger as RunTrigger
from .state import TurnState
from .templates import render

MAX_ALWAYS_CLAIMS = 50
HOP_CAP = 5


def prune_always_claims(state: TurnState, prefix: str) -> None:
    """Ruling 7: keep the last 50 `always` claims per flow+anchor, oldest `at` dropped first."""
    claims = state.session.claims
    mine = [k for k in claims if k.startswith(prefix) and len(k) > len(prefix)]
    if len(mine) <= MAX_ALWAYS_CLAIMS:
        return
    mine.sort(key=lambda k: (iso_to_ms(claims[k]["at"]) or 0, k))
    for k in mine[: len(mine) - MAX_ALWAYS_CLAIMS]:
        del claims[k]


def start_run(
    state: TurnState,
    flow: Flow,
    kind: str,
    key: str,
    trigger: Trigger | None = None,
    payload: Any = UNSET,
    hop: int = 0,
    keep_data: bool = False,
) -> Run | None:
    """The one start order (§3.3)."""
    anchor = state.anchor_of(flow)
    mode, cooldown = state.repeat_mode(trigger, kind)
    nonce = key if mode == "always" else ""
    dedupe = keys.dedupe_key(flow.id, anchor, nonce)
    value = None if payload is UNSET else payload
    run = Run.model_construct(
        id=keys.run_id(flow.id, key), flow_id=flow.id, anchor=anchor, dedupe_key=dedupe, step_id=None,
        status="running", trigger=RunTrigger.model_construct(kind=kind, key=key, payload=value), input=value,
        hop=hop, started_at=state.now_iso, suspended_at=None, staying=None, waiting=None, asked={}, visits={},
        outcomes=[])
    if trigger is not None and trigger.if_ is not None and not state.judge(trigger.if_, run, value):
        return None  # a false trigger `if` writes nothing
    held = state.held_at(dedupe)
    if held is not None:
        if mode in ("once", "always"):
            state.skip(flow.id, anchor, key, "already-claimed")
            return None
        held_ms = iso_to_ms(held)
        if held_ms is not None and state.now_ms - held_ms < (cooldown or 0):
            state.skip(flow.id, anchor, key, "cooldown")
            return None
    if hop >= HOP_CAP:
        state.skip(flow.id, anchor, key, "hop-limit")
        return None
    live = next((r for r in state.session.runs if r.flow_id == flow.id and r.anchor == anchor), None)
    if live is not None:
        if live.status == "waiting" and live.step_id is None:
            end_run(state, live, "replaced")
        else:
            state.skip(flow.id, anchor, key, "already-running")
            return None
    elif keys.live_pair(flow.id, anchor) in state.claims_active:
        state.skip(flow.id, anchor, key, "already-running")
        return None
    state.session.claims[dedupe] = {"at": state.now_iso}
    if nonce:
        prune_always_claims(state, keys.dedupe_key(flow.id, anchor, ""))
    if not keep_data:
        for slug in flow.clear_on_start:
            state.session.data.pop(slug, None)
    state.session.runs.append(run)
    state.started.append(StartedRun.model_construct(run_id=run.id, flow_id=flow.id, anchor=anchor,
                                                   dedupe_key=dedupe))
    if trigger is not None and trigger.kind == "event":
        at_ms = state.snap(state.now_ms + (trigger.after_ms or 0), trigger.business_hours)
        if trigger.after_ms is not None or at_ms > state.now_ms:
            park(state, run, "timer", keys.start_wake(run.id, at_ms), at_ms)
            state.line(run, "wait", "waiting", "awaiting-trigger", until=to_iso(from_ms(at_ms)))
    return run


def park(state: TurnState, run: Run, kind: str, key: str, at_ms: int, event: str | None = None) -> None:
    run = state.own(run)
    until = to_iso(from_ms(at_ms))
    run.status = "waiting"
    run.waiting = Waiting.model_construct(kind=kind, key=key, until=until, set_at=state.now_iso, event=event)
    state.schedule.append(ScheduleEntry.model_construct(key=key, at=from_ms(at_ms), replaces=None))


def end_run(state: TurnState, run: Run, reason: str, code: str | None = None, kind: str | None = None,
            detail: str | None = None) -> None:
    run = state.own(run)
    runs = state.session.runs
    for i, r in enumerate(runs):
        if r is run:
            del runs[i]
            break
    if code is not None:
        state.line(run, kind or state.current_kind(run), "failed" if reason == "failed" else "skipped", code,
                  detail=detail or None)
    state.ended.append(EndedRun.of(run, reason))
    if state.talk is not None and state.talk.run is run:
        state.talk = None


def enter(state: TurnState, run: Run, step: Step) -> None:
    run = state.own(run)
    run.step_id = step.id
    run.visits[step.id] = run.visits.get(step.id, 0) + 1
    run.status = "running"
    run.waiting = None
    run.staying = None


def suspend(state: TurnState, run: Run) -> None:
    run = state.own(run)
    run.status = "suspended"
    run.suspended_at = state.now_iso
    if state.talk is not None and state.talk.run is run:
        state.talk = None


def follow(state: TurnState, run: Run, flow: Flow, step: Step, target: Next | None) -> None:
    """§3.6.6: where a step's target leads."""
    run = state.own(run)
    if target is None:
        nxt = flow.step_after(step)
        if nxt is None:
            finish_flow(state, run, flow)
        else:
            enter(state, run, nxt)
        return
    if target.kind == "end":
        finish_flow(state, run, flow)
        return
    if target.kind == "flow":
        chain(state, run, step, target)
        return
    for slug in target.clear:
        state.session.data.pop(slug, None)
        run.asked.pop(slug, None)  # so a fixed question goes out again
    nxt = flow.step(target.step)
    if nxt is None:
        end_run(state, run, "skipped", "step-gone")
    else:
        enter(state, run, nxt)


def chain(state: TurnState, run: Run, step: Step, target: Next) -> None:
    child_id = render(target.flow or "", state.scope(run))
    key = state.step_key(run, step.id)
    end_run(state, run, "flow")
    child = state.index.by_id.get(child_id)
    if child is None:
        state.skip(child_id, state.session.id, key, "flow-gone")
        return
    payload = target.input if target.has_input else (run.input if run.input is not None else UNSET)
    start_child(state, run, child, key, payload, keep_data=False)


def start_child(state: TurnState, parent: Run, flow: Flow, key: str, payload: Any, keep_data: bool) -> None:
    child = start_run(state, flow, "flow", key, None, payload, parent.hop + 1, keep_data=keep_data)
    if child is None:
        return
    if state.floor_run_id is None or state.floor_run_id == parent.id:
        state.floor_run_id = child.id
        if state.ingesting:
            state.floor_from_ingest = True
    state.queue.append(child)


def stay_step(state: TurnState, run: Run, flow: Flow) -> Step | None:
    for line in reversed(run.outcomes):
        if line.kind in ("prompt", "collect"):
            step = flow.step(line.step_id)
            if step is not None and step.kind == "talk":
                return step
    return flow.last_talk_step


def finish_flow(state: TurnState, run: Run, flow: Flow) -> None:
    """§3.6.7: past the last step, `onEnd` decides."""
    if flow.on_end == "stay":
        step = stay_step(state, run, flow)
        if step is None:
            end_run(state, run, "end")
            return
        stay_at(state, run, step)
    elif flow.on_end == "reset" and flow.steps:
        last = flow.steps[-1]
        key = state.step_key(run, last.id)
        end_run(state, run, "reset")
        payload = run.input if run.input is not None else UNSET
        start_child(state, run, flow, key, payload, keep_data=True)
    else:
        end_run(state, run, "end")


def stay_at(state: TurnState, run: Run, step: Step) -> None:
    run = state.own(run)
    enter(state, run, step)
    run.staying = True
    run.status = "asking"
    others = [r for r in state.session.runs if r is not run and r.status == "asking"]
    owns = state.kind == "message" and state.floor_run_id == run.id
    if others and not owns:
        suspend(state, run)
        return
    for other in others:
        suspend(state, other)
    if (not state.ingesting and state.kind == "message" and state.silenced is None and not state.speak_done
            and not state.spoke):
        run.status = "running"  # the stay step answers this very message
