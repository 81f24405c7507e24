"""The step kinds (engine-turn.md §3.6.3-§3.6.5): talk, say, do, wait, wait for an event, if.

Each executes one step of a moving run and hands the run's next place to `runs.follow`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from falai_django.llm import recording
from falai_django.llm.calling import resolve_awaitable

from . import keys
from .durations import is_duration, parse_duration
from .fields import is_known, pending_fields
from .flows import Flow, Next, Step
from .jstime import from_ms, to_iso
from .predicates import ActionContext
from .runs import end_run, follow, park, suspend
from .session import Run
from .state import TurnState
from .templates import render, render_deep
from .types import Talk

SHORT_WAIT_MS = 10_000


def execute(state: TurnState, run: Run, flow: Flow, step: Step, resuming: bool) -> None:
    kind = step.kind
    if kind == "talk":
        exec_talk(state, run, flow, step, resuming)
    elif kind == "say":
        exec_say(state, run, flow, step)
    elif kind == "do":
        exec_do(state, run, flow, step)
    elif kind == "wait":
        exec_wait(state, run, flow, step)
    elif kind == "wait_event":
        exec_wait_event(state, run, flow, step)
    else:
        exec_if(state, run, flow, step)


def pending_of(state: TurnState, run: Run, step: Step) -> list[str]:
    if not step.collect:
        return []
    return pending_fields(step.collect, state.session.data, run.asked, step.max_asks)


def report_max_asks(state: TurnState, run: Run, step: Step) -> None:
    data = state.session.data
    for slug in step.collect or ():
        if not is_known(data.get(slug)) and run.asked.get(slug, 0) >= step.max_asks:
            state.line(run, "collect", "skipped", "max-asks", key=state.step_key(run, step.id), detail=slug,
                      step_id=step.id)


def where_it_went(state: TurnState, flow: Flow, step: Step, target: Next | None) -> str:
    """`next` for a silenced-skip line: the explicit target, else the next step or 'end'."""
    if target is not None:
        return state.label(target) or "end"
    after = flow.step_after(step)
    return after.id if after is not None else "end"


def silenced_step(state: TurnState, run: Run, flow: Flow, step: Step) -> None:
    """A fresh talk or say step while silenced: the run ends, or under `skip: True` the
    step is skipped and the run takes its `then` (the user's page)."""
    if state.skip_mode:
        state.line(run, step.outcome_kind, "skipped", "silenced", key=state.step_key(run, step.id),
                  detail=state.silenced, next=where_it_went(state, flow, step, step.then), step_id=step.id)
        follow(state, run, flow, step, step.then)
    else:
        end_run(state, run, "skipped", "silenced", kind=step.outcome_kind, detail=state.silenced)


def exec_talk(state: TurnState, run: Run, flow: Flow, step: Step, resuming: bool) -> None:
    pending = pending_of(state, run, step)
    if step.collect and not pending and not run.staying:
        report_max_asks(state, run, step)
        key = state.step_key(run, step.id)
        if resuming:
            state.line(run, "collect", "ok", key=key, next=state.label(step.then), step_id=step.id)
        else:
            state.line(run, "collect", "skipped", "already-known", key=key, next=state.label(step.then),
                      step_id=step.id)
        follow(state, run, flow, step, step.then)
        return
    if state.silenced is not None:
        if resuming:
            run.status = "asking"
        else:
            silenced_step(state, run, flow, step)
        return
    for other in state.session.runs:
        if other is not run and other.status == "asking":
            suspend(state, other)
    run.status = "asking"
    if not state.speak_done:
        state.talk = Talk(run, flow, step, pending)
    elif fixed_ready(state, Talk(run, flow, step, pending)):
        ask_fixed(state, run, step, pending)


def fixed_ready(state: TurnState, talk: Talk) -> bool:
    """§3.6.5: a fixed question goes out only as the very first ask of every field."""
    step, run = talk.step, talk.run
    if not step.question or run.staying or not step.collect:
        return False
    if list(talk.pending) != list(step.collect):
        return False
    return all(run.asked.get(slug, 0) == 0 for slug in talk.pending)


def ask_fixed(state: TurnState, run: Run, step: Step, pending: list[str]) -> None:
    run = state.own(run)
    key = state.step_key(run, step.id)
    state.emit(render(step.question or "", state.scope(run)), "verbatim", key, run, step.id)
    for slug in pending:
        run.asked[slug] = run.asked.get(slug, 0) + 1
    state.line(run, "collect", "ok", "asked-fixed", key=key, step_id=step.id)


def exec_say(state: TurnState, run: Run, flow: Flow, step: Step) -> None:
    if state.silenced is not None:
        silenced_step(state, run, flow, step)
        return
    key = state.step_key(run, step.id)
    if step.once:
        claim = keys.say_once_claim(flow.id, step.id, state.session.id)
        if claim in state.session.claims or claim in state.claims_held:
            state.line(run, "say", "skipped", "already-sent", key=key, next=state.label(step.then))
            follow(state, run, flow, step, step.then)
            return
        state.session.claims[claim] = {"at": state.now_iso}
    state.emit(render(step.say or "", state.scope(run)), "verbatim", key, run, step.id, media=step.media)
    state.line(run, "say", "ok", key=key, next=state.label(step.then))
    follow(state, run, flow, step, step.then)


def exec_do(state: TurnState, run: Run, flow: Flow, step: Step) -> None:
    key = state.step_key(run, step.id)
    name = step.action
    action = state.agent.actions.get(name)
    taping = recording.current() is not None
    if action is None:
        result: Any = {"failed": f'unknown action "{name}"'}
    else:
        params = render_deep(step.params, state.scope(run))
        patches: list[Mapping[str, Any]] = []  # what the action set, kept for a replay (taping only)
        ctx = ActionContext(context=state.context, data=state.session.data, input=run.input, run=run,
                            silenced=state.silenced, now=state.now, key=key, dedupe_key=run.dedupe_key,
                            on_set=patches.append if taping else None)
        try:
            result = resolve_awaitable(action.run(params, ctx))
        except Exception as exc:  # an action error never escapes the turn
            result = {"failed": str(exc) or type(exc).__name__}
    if result is None:
        result = {"ok": True}
    elif not isinstance(result, Mapping):
        result = {k: getattr(result, k) for k in ("ok", "detail", "spoke", "skipped", "failed", "defer")
                  if getattr(result, k, None) is not None}
    if action is not None and taping:
        recording.note_effect({"action": name, "result": result, "set": patches})
    if "defer" in result and result.get("defer") is not None and not is_duration(result["defer"]):
        # ruling 2: a non-duration defer is a failure of the action, never an exception
        result = {"failed": f'action "{name}" asked to defer by "{result["defer"]}", which is not a '
                            'duration. Use a value like "2m" or "1h".'}
    detail = result.get("detail")
    detail = str(detail) if detail else None  # an empty detail adds nothing
    if result.get("failed") is not None:
        target = step.on_fail or step.then
        state.line(run, "do", "failed", "action-failed", key=key, detail=str(result["failed"]),
                  next=state.label(target))
        follow(state, run, flow, step, target)
    elif result.get("skipped") is not None:
        state.line(run, "do", "skipped", "action-skipped", key=key, detail=str(result["skipped"]),
                  next=state.label(step.then))
        follow(state, run, flow, step, step.then)
    elif result.get("defer") is not None:
        at_ms = state.now_ms + parse_duration(result["defer"])
        park(state, run, "timer", keys.timer_wake(run.id, step.id, at_ms), at_ms)
        state.line(run, "do", "deferred", "action-deferred", key=key, detail=detail,
                  until=to_iso(from_ms(at_ms)))
    else:
        if result.get("spoke"):
            state.spoke_by.add(run.id)
            state.spoke = True
        state.line(run, "do", "ok", key=key, detail=detail, next=state.label(step.then))
        follow(state, run, flow, step, step.then)


def peek_speaks(state: TurnState, flow: Flow, step: Step) -> bool:
    target = step.then
    if target is None:
        nxt = flow.step_after(step)
    elif target.kind == "step":
        nxt = flow.step(target.step)
    else:
        nxt = None
    return nxt is not None and nxt.kind in ("say", "talk")


def exec_wait(state: TurnState, run: Run, flow: Flow, step: Step) -> None:
    key = state.step_key(run, step.id)
    ms = step.wait_ms or 0
    if ms <= SHORT_WAIT_MS and peek_speaks(state, flow, step):
        state.after_ms += ms
        state.line(run, "wait", "ok", "inline-delay", key=key, detail=f"{ms}ms", next=state.label(step.then))
        follow(state, run, flow, step, step.then)
        return
    at_ms = state.snap(state.now_ms + ms, step.business_hours)
    park(state, run, "timer", keys.timer_wake(run.id, step.id, at_ms), at_ms)
    state.line(run, "wait", "waiting", key=key, until=to_iso(from_ms(at_ms)))


def exec_wait_event(state: TurnState, run: Run, flow: Flow, step: Step) -> None:
    key = state.step_key(run, step.id)
    at_ms = state.now_ms + (step.up_to_ms or 0)
    park(state, run, "event", keys.timer_wake(run.id, step.id, at_ms), at_ms, event=step.event)
    state.line(run, "wait", "waiting", "awaiting-event", key=key, detail=step.event,
              until=to_iso(from_ms(at_ms)))


def exec_if(state: TurnState, run: Run, flow: Flow, step: Step) -> None:
    target = step.then if state.judge(step.if_, run) else (step.else_ or Next.end())
    state.line(run, "if", "ok", key=state.step_key(run, step.id), next=state.label(target))
    follow(state, run, flow, step, target)
