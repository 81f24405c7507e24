"""Phase 2, ingest (engine-turn.md §3.2): what the input does before any model call.

A message is deduplicated, stamps `lastUserAt` and resolves reply waits; a wake resumes its
run (or starts a silence follow-up); an event resolves event waits and starts event flows;
a start input starts its flow.
"""

from __future__ import annotations

from . import keys
from .fields import UNSET
from .flows import Next
from .jstime import iso_to_ms
from .runs import follow, start_run
from .session import Run
from .state import TurnState

MAX_INPUTS = 50


def ingest(state: TurnState) -> None:
    """Phase 2 (§3.2): what the input itself changes, by kind."""
    state.ingesting = True
    try:
        INGEST[state.kind](state)
    finally:
        state.ingesting = False


def _ingest_message(state: TurnState) -> None:
    what = state.what
    message_id = what.get("id")
    if message_id is not None:
        if message_id in state.session.inputs:
            state.ignore("duplicate-input", message_id)
            return
        state.session.inputs.append(message_id)
        if len(state.session.inputs) > MAX_INPUTS:
            del state.session.inputs[: len(state.session.inputs) - MAX_INPUTS]
    state.session.last_user_at = what["at"]
    resolve_reply_waits(state)


def take_ingest_floor(state: TurnState, run: Run) -> None:
    if state.is_live(run) and not state.floor_from_ingest:
        state.floor_from_ingest = True
        state.floor_run_id = run.id


def resolve_reply_waits(state: TurnState) -> None:
    """§3.2.1 step 3: a reply resolves timer waits that have an `else`."""
    for run in list(state.session.runs):
        run = state.current(run)  # an earlier one's move may have changed it
        waiting = run.waiting
        if run.status != "waiting" or waiting is None or waiting.kind != "timer" or run.step_id is None:
            continue
        place = state.place(run)
        if place is None:
            continue
        flow, step = place
        if step.kind != "wait" or step.else_ is None:
            continue
        run = state.own(run)
        run.status = "running"
        run.waiting = None
        target = step.else_
        for branch in step.branches:
            if branch.if_ is not None and state.judge(branch.if_, run):
                target = branch.then
                break
        state.line(run, "wait", "ok", "replied", next=state.label(target), step_id=step.id)
        if not state.floor_from_ingest:
            state.floor_run_id = run.id
        follow(state, run, flow, step, target)
        take_ingest_floor(state, run)


def _ingest_wake(state: TurnState) -> None:
    key = state.what["key"]
    if state.original is None:
        state.ignore("no-session", key)
        return
    if keys.is_silence_wake(key):
        _silence_wake(state, key)
    else:
        _run_wake(state, key)


def _run_wake(state: TurnState, key: str) -> None:
    run = next((r for r in state.session.runs if r.waiting is not None and r.waiting.key == key), None)
    if run is None:
        state.ignore("stale-wake", key)
        return
    assert run.waiting is not None  # the search matched its key
    set_at = run.waiting.set_at or run.started_at
    run = state.own(run)
    run.status = "running"
    run.waiting = None
    state.floor_run_id = run.id
    if run.step_id is None:
        return
    place = state.place(run)
    if place is None:
        return
    flow, step = place
    if step.kind == "wait":
        replied = step.else_ is not None and state.lead_wrote_since(flow, set_at)
        target = step.else_ if replied else step.then
        state.line(run, "wait", "ok", "replied" if replied else "no-reply", next=state.label(target))
        follow(state, run, flow, step, target)
    elif step.kind == "wait_event":
        target = step.else_ or Next.end()
        state.line(run, "wait", "ok", "no-event", next=state.label(target))
        follow(state, run, flow, step, target)


def _silence_wake(state: TurnState, key: str) -> None:
    flow_id, ms_text = keys.parse_silence_wake(key, state.session.id)
    flow = state.index.by_id.get(flow_id)
    if flow is None:
        state.skip(flow_id, state.session.id, ms_text, "flow-gone")
        return
    last = state.session.last_assistant_at
    try:
        ms = int(ms_text)
    except ValueError:
        ms = None
    if not last or ms is None or iso_to_ms(last) != ms or state.lead_wrote_since(flow, last):
        state.ignore("silence-broken", key)
        return
    trigger = state.index.silence_trigger.get(flow.id)
    run = start_run(state, flow, "silence", str(ms), trigger)
    if run is not None:
        state.floor_run_id = run.id


def _ingest_event(state: TurnState) -> None:
    what = state.what
    name = what["name"]
    event = state.agent.events.get(name)
    direction = getattr(event, "direction", None)
    if direction == "inbound":
        state.session.last_user_at = state.now_iso
        resolve_reply_waits(state)
    elif direction == "outbound":
        state.session.last_assistant_at = state.now_iso
    for run in list(state.session.runs):
        run = state.current(run)  # an earlier one's move may have changed it
        waiting = run.waiting
        if waiting is None or waiting.kind != "event" or waiting.event != name:
            continue
        run = state.own(run)
        run.status = "running"
        run.waiting = None
        place = state.place(run)
        if place is None:
            continue
        flow, step = place
        state.line(run, "wait", "ok", "event-arrived", next=state.label(step.then))
        if not state.floor_from_ingest:
            state.floor_run_id = run.id
        follow(state, run, flow, step, step.then)
        take_ingest_floor(state, run)
    for flow in state.index.flows:
        for trigger in flow.on:
            if trigger.kind == "event" and trigger.event == name:
                if start_run(state, flow, "event", what["key"], trigger, what.get("payload", UNSET),
                                  what.get("hop", 0)) is not None:
                    break


def _ingest_start(state: TurnState) -> None:
    what = state.what
    flow = state.index.by_id.get(what["flow"])
    if flow is None:
        state.skip(what["flow"], state.session.id, what["key"], "flow-gone")
        return
    start_run(state, flow, "start", what["key"], None, what.get("input", UNSET), what.get("hop", 0))


INGEST = {"message": _ingest_message, "wake": _ingest_wake, "event": _ingest_event, "start": _ingest_start}
