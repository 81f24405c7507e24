"""Phase 8, finish (engine-turn.md §1.5-§1.6): the `TurnResult`, with `changed` computed from
what the turn did, and the `debug=True` summary line."""

from __future__ import annotations

import logging

from .results import TurnResult, Usage
from .state import TurnState


def finish(state: TurnState) -> TurnResult:
    """Phase 8: the result (§1.5), `changed` computed as §1.6 says."""
    usage = state.usage
    result = TurnResult.model_construct(
        session=state.session,
        changed=state.changed(),
        messages=state.messages,
        schedule=state.schedule,
        outcomes=state.outcomes,
        started=state.started,
        ended=state.ended,
        skipped=state.skipped,
        llm_calls=state.llm_calls,
        usage=None if usage is None else Usage.model_construct(
            prompt_tokens=usage.get("promptTokens", 0), completion_tokens=usage.get("completionTokens", 0),
            cached_input_tokens=usage.get("cachedInputTokens", 0)),
    )
    log = state.agent.logger
    if log.isEnabledFor(logging.DEBUG):  # `debug=True`: one line per turn, built only when wanted
        log.debug(
            "turn %s %s key=%s changed=%s llm_calls=%d messages=%s schedule=%s outcomes=%s",
            state.session.id, state.kind, state.trigger_key,
            result.changed, result.llm_calls, [m.key for m in result.messages],
            [e.key for e in result.schedule],
            [f"{o.step_id or '-'}:{o.kind}/{o.status}{'/' + o.code if o.code else ''}" for o in result.outcomes],
        )
    return result
