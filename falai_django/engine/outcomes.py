"""Every outcome code and its one English sentence, in one table (engine-turn.md §2.5).

`code` is what programs switch on; `message` is this package's own prose, the same sentence
for every line with the same code. Third-party text (the host's reason, an action's words, a
field slug) goes in `detail`, never here.
"""

from __future__ import annotations

OUTCOME_MESSAGES: dict[str, str] = {
    "no-session": "The wake was ignored because there is no session to wake.",
    "duplicate-input": "The message was ignored because its id was already handled.",
    "stale-wake": "The wake was ignored because no run is waiting on it any more.",
    "silence-broken": "The silence wake was ignored because someone spoke after it was set.",
    "already-claimed": "The flow was not started because it already ran for this trigger.",
    "cooldown": "The flow was not started because it is still cooling down from its last run.",
    "hop-limit": "The flow was not started because the chain of flows reached its hop limit.",
    "already-running": "The flow was not started because a run of it is already live.",
    "flow-gone": "The flow is no longer on the agent, so nothing was run.",
    "step-loop": "The run stopped because it moved through too many steps in one turn.",
    "step-gone": "The run stopped because its step is no longer in the flow.",
    "customer-replied": "The follow-up was dropped because the customer wrote in the meantime.",
    "premise-changed": "The run stopped because the condition it depends on no longer holds.",
    "silenced": "The step was not sent because the assistant is silenced.",
    "already-known": "The step was skipped because everything it collects is already known.",
    "asked-fixed": "The step's fixed question was sent word for word.",
    "another-reply": "The step did not speak because another reply already went out this turn.",
    "already-sent": "The message was skipped because it is sent only once per session.",
    "branch": "A branch of the step matched and the run took it.",
    "max-asks": "The field was given up on after being asked the maximum number of times.",
    "inline-delay": "The short wait was added as a delay before the next message.",
    "awaiting-trigger": "The run is parked until its trigger's start time.",
    "awaiting-event": "The run is waiting for an event.",
    "event-arrived": "The awaited event arrived.",
    "no-event": "The awaited event did not arrive in time.",
    "replied": "The customer replied while the run was waiting.",
    "no-reply": "The wait ended without a reply from the customer.",
    "action-skipped": "The action chose to skip.",
    "action-failed": "The action failed.",
    "action-deferred": "The action asked to be run again later.",
    "unknown-field": "The model returned a field the agent does not declare, so it was dropped.",
    "bad-value": "The model returned a value that does not fit the field's type, so it was dropped.",
    "not-in-enum": "The model returned a value outside the field's options, so it was dropped.",
    "provider-unavailable": "The model could not be reached or gave an empty reply.",
    "provider-quota": "The model provider's usage quota is spent.",
    "provider-auth": "The model provider rejected the credentials.",
    "provider-context": "The request was too long for the model's context window.",
    "provider-invalid": "The model provider refused the request.",
}

OUTCOME_CODES: tuple[str, ...] = tuple(OUTCOME_MESSAGES)

END_REASONS: tuple[str, ...] = ("end", "flow", "reset", "skipped", "failed", "replaced")

# Input refusals: the turn writes one line but reports `changed: False` (§1.6).
IGNORING_CODES = frozenset({"no-session", "duplicate-input", "stale-wake", "silence-broken"})

# Provider failure kind → (outcome code, retryable by default) (§3.7).
PROVIDER_KIND_CODES: dict[str, tuple[str, bool]] = {
    "timeout": ("provider-unavailable", True),
    "network": ("provider-unavailable", True),
    "overload": ("provider-unavailable", True),
    "rate": ("provider-unavailable", True),
    "unknown": ("provider-unavailable", True),
    "aborted": ("provider-unavailable", False),
    "quota": ("provider-quota", False),  # retryable only with a known reset time
    "auth": ("provider-auth", False),
    "entitlement": ("provider-auth", False),
    "model": ("provider-invalid", False),
    "invalid": ("provider-invalid", False),
    "content": ("provider-invalid", False),
    "context": ("provider-context", False),
}


def message_of(code: str) -> str:
    return OUTCOME_MESSAGES[code]


assert len(OUTCOME_MESSAGES) == 38
