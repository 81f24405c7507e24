"""Phase 7, settle (engine-turn.md §3.8): the speak outcome applied (asked counting, the retry
ladder, the step moving on), suspended runs resumed and silence wakes armed."""

from __future__ import annotations

from typing import Any

from falai_django.llm.types import add_usage

from . import keys
from .advance import drain, resume
from .decide import write_field
from .flows import Flow
from .jstime import from_ms, iso_to_ms, to_iso
from .results import ScheduleEntry
from .runs import end_run, enter, follow, park
from .state import TurnState
from .steps import ask_fixed, fixed_ready, pending_of, report_max_asks
from .types import IDLE, Deferred, Spoken, Talk

RETRY_LADDER_MS = (60_000, 300_000, 900_000, 3_600_000, 21_600_000)  # 1m 5m 15m 1h 6h


def settle(state: TurnState, speaker: Any, outcome: Spoken | Deferred | None) -> None:
    if state.ignored:
        return
    state.speak_done = True
    talk = state.talk
    state.talk = None
    if outcome is not None:
        state.llm_calls += outcome.llm_calls
        state.usage = add_usage(state.usage, outcome.usage)
        if isinstance(outcome, Deferred):
            if speaker is IDLE:
                state.line(None, "idle", "deferred", outcome.code, llm_calls=outcome.llm_calls)
            elif talk is not None:
                defer_talk(state, talk, outcome)
        elif speaker is IDLE:
            if outcome.message:
                state.emit(outcome.message, "ai", keys.idle_key(state.trigger_key), None, None)
            state.session.data.update(outcome.data)
            state.line(None, "idle", "ok", key=keys.idle_key(state.trigger_key), llm_calls=outcome.llm_calls)
        elif talk is not None:
            apply_spoken(state, talk, outcome)
    if state.spoke:
        state.session.last_assistant_at = state.now_iso
    if state.asker() is None:
        resume(state, check_branches=False)
    arm_silence(state)


def defer_talk(state: TurnState, talk: Talk, deferred: Deferred) -> None:
    run, step = state.own(talk.run), talk.step
    key = state.step_key(run, step.id)
    attempt = 0
    for line in reversed(run.outcomes):
        if line.status == "deferred" and line.step_id == step.id:
            attempt += 1
        else:
            break
    retry_ms: int | None = None
    if deferred.retryable and attempt < len(RETRY_LADDER_MS):
        retry_ms = state.now_ms + RETRY_LADDER_MS[attempt]
        if deferred.reset_at_ms is not None and deferred.reset_at_ms > retry_ms:
            retry_ms = int(deferred.reset_at_ms)
    if retry_ms is None:
        state.line(run, step.outcome_kind, "failed", deferred.code, key=key, step_id=step.id)
        end_run(state, run, "failed")
        return
    wake = keys.retry_wake(run.id, step.id, run.visits.get(step.id, 0), retry_ms)
    park(state, run, "timer", wake, retry_ms)
    state.line(run, step.outcome_kind, "deferred", deferred.code, key=key, until=to_iso(from_ms(retry_ms)),
              step_id=step.id)


def apply_spoken(state: TurnState, talk: Talk, spoken: Spoken) -> None:
    run, flow, step = state.own(talk.run), talk.flow, talk.step
    key = state.step_key(run, step.id)
    if spoken.message:
        state.emit(spoken.message, "ai", key, run, step.id)
    for slug, value in spoken.fields.items():
        write_field(state, slug, value)
    state.session.data.update(spoken.data)
    state.line(run, step.outcome_kind, "ok", key=key, llm_calls=spoken.llm_calls, step_id=step.id)
    if not state.is_live(run):
        return
    pending = pending_of(state, run, step)
    if talk.fixed_follows and fixed_ready(state, Talk(run, flow, step, pending)):
        ask_fixed(state, run, step, pending)  # the question follows the answer word for word
        return
    for slug in pending:
        run.asked[slug] = run.asked.get(slug, 0) + 1
    if run.staying:
        for slug in pending:
            if run.asked[slug] == step.max_asks:
                state.line(run, "collect", "skipped", "max-asks", key=key, detail=slug, step_id=step.id)
        enter(state, run, step)
        run.staying = True
        run.status = "asking"
        return
    if pending:
        run.status = "asking"
        return
    report_max_asks(state, run, step)
    run.status = "running"
    follow(state, run, flow, step, step.then)
    if state.is_live(run) and run.status == "running":
        state.queue.append(run)
    drain(state)


def silence_wakes(state: TurnState) -> list[tuple[Flow, int]]:
    """§5.2 `silenceWakes`: (flow, at ms) for each flow that would follow up."""
    if not state.index.has_silence:
        return []
    last = state.session.last_assistant_at
    if not last:
        return []
    ms = iso_to_ms(last)
    if ms is None:
        return []
    last_user = state.session.last_user_at
    if last_user and (iso_to_ms(last_user) or 0) > ms:
        return []
    out = []
    key = str(ms)
    for flow in state.index.flows:
        trigger = state.index.silence_trigger[flow.id]
        if trigger is None:
            continue
        if trigger.if_ is not None and not state.judge(trigger.if_, state.draft_run(flow, "silence", key), None):
            continue
        if not state.repeat_allows(flow, trigger, "silence", key):
            continue
        out.append((flow, state.snap(ms + (trigger.silence_ms or 0), trigger.business_hours)))
    return out


def arm_silence(state: TurnState) -> None:
    previous = state.original.last_assistant_at if state.original is not None else None
    if state.session.last_assistant_at == previous:
        return
    previous_ms = iso_to_ms(previous) if previous else None
    ms = iso_to_ms(state.session.last_assistant_at or "")
    if ms is None:  # no instant to count silence from: silence_wakes() finds none either
        return
    for flow, at_ms in silence_wakes(state):
        replaces = keys.silence_wake(flow.id, state.session.id, previous_ms) if previous_ms is not None else None
        state.schedule.append(ScheduleEntry.model_construct(
            key=keys.silence_wake(flow.id, state.session.id, ms), at=from_ms(at_ms), replaces=replaces))
