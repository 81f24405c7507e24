"""Phase 4, decide (engine-turn.md §3.4.3-§3.5): routing a message to a flow, mention runs,
the understood fields and the asking step's branches."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from falai_django.llm.types import add_usage

from . import keys
from .fields import UNSET, Drop, coerce_field
from .flows import Flow, Next, Step, Trigger
from .runs import follow, start_run
from .session import Run
from .state import TurnState
from .types import Understanding

ROUTE_MIN = 40
ROUTE_STICKY = 15


def eligible_flows(state: TurnState) -> list[tuple[Flow, Trigger]]:
    return list(message_triggered(state, state.index.message_trigger))


def catch_all(state: TurnState) -> tuple[Flow, Trigger] | None:
    return next(message_triggered(state, state.index.catch_all_trigger), None)


def message_triggered(state: TurnState, triggers: Mapping[str, Trigger | None]) -> Iterator[tuple[Flow, Trigger]]:
    """Each flow, in order, whose trigger in `triggers` this message may fire: `if` holds, repeat allows."""
    tk = state.trigger_key
    for flow in state.index.flows:
        trigger = triggers[flow.id]
        if trigger is None:
            continue
        if trigger.if_ is not None and not state.judge(trigger.if_, state.draft_run(flow, "message", tk), None):
            continue
        if state.repeat_allows(flow, trigger, "message", tk):
            yield flow, trigger


def lone_flow_shortcut(state: TurnState, eligible: list[Any]) -> bool:
    return len(eligible) == 1 and state.agent.idle.silent and catch_all(state) is None


def decide(state: TurnState, understanding: Understanding | None) -> None:
    if state.ignored or state.kind != "message":
        return
    u = understanding or Understanding()
    state.understanding = u
    state.llm_calls += u.llm_calls
    state.usage = add_usage(state.usage, u.usage)
    asker = state.asker()
    route: tuple[Flow, Trigger] | None = None
    if not state.floor_from_ingest:
        eligible = eligible_flows(state)
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
        elif lone_flow_shortcut(state, eligible):
            route = eligible[0]
        else:
            top, top_score = best(eligible)
            route = top if top is not None and top_score >= ROUTE_MIN else catch_all(state)
    # mention runs, in agent order
    for flow in state.index.flows:
        trigger = state.index.mention_trigger[flow.id]
        if trigger is None:
            continue
        if not trigger.phrases:
            start_run(state, flow, "mention", state.trigger_key, trigger)
        elif u.mentions.get(flow.id) is True:
            start_run(state, flow, "mention", state.trigger_key, trigger, u.extract.get(flow.id, UNSET))
    if route is not None:
        flow, trigger = route
        suspended = next((r for r in state.session.runs if r.flow_id == flow.id and r.status == "suspended"), None)
        if suspended is not None:
            suspended = state.own(suspended)
            suspended.status = "running"
            suspended.suspended_at = None
            state.floor_run_id = suspended.id
        else:
            run = start_run(state, flow, "message", state.trigger_key, trigger)
            if run is not None:
                state.floor_run_id = run.id
    elif asker is not None and not state.floor_from_ingest:
        state.floor_run_id = asker.id
    for slug, value in u.fields.items():
        write_field(state, slug, value)
    if asker is not None:
        asker = state.current(asker)
    if asker is not None and state.is_live(asker) and asker.status == "asking":
        place = state.place(asker)
        if place is not None and place[1].kind == "talk":
            fire_branch(state, asker, *place, u)


def write_field(state: TurnState, slug: str, value: Any) -> None:
    """The validated write (§3.5 step 7) shared by understand and the speak envelope."""
    if value is None or value is UNSET:
        return
    definition = state.agent.fields.get(slug)
    if definition is None:
        state.line(None, "collect", "skipped", "unknown-field", detail=slug)
        return
    coerced = coerce_field(definition, value)
    if isinstance(coerced, Drop):
        state.line(None, "collect", "skipped", coerced.code, detail=slug)
        return
    state.session.data[slug] = coerced


def already_run(state: TurnState, run: Run, target: Next) -> bool:
    if target.kind == "end":
        return True
    if target.kind == "step":
        return target.step is not None and run.visits.get(target.step, 0) > 0
    return False


def fire_branch(state: TurnState, run: Run, flow: Flow, step: Step, u: Understanding | None) -> bool:
    """§3.5.2: the first holding branch of an asking talk step."""
    for branch in step.branches:
        if branch.if_ is not None:
            hit = state.judge(branch.if_, run)
            if hit and run.staying and already_run(state, run, branch.then):
                hit = False
        else:
            hit = u is not None and u.branches.get(keys.branch_key(run.id, step.id, branch.index)) is True
        if hit:
            run = state.own(run)
            state.line(run, step.outcome_kind, "ok", "branch", key=state.step_key(run, step.id),
                      next=state.label(branch.then), step_id=step.id)
            run.status = "running"
            follow(state, run, flow, step, branch.then)
            return True
    return False
