"""Every key format of engine-turn.md §4, in one module.

All keys are deterministic functions of the input and the session, so a replay of the same
input against the same session version mints the same ids and keys (invariant I4).
"""

from __future__ import annotations

SILENCE_PREFIX = "silence:"


def run_id(flow_id: str, trigger_key: str) -> str:
    return f"{flow_id}#{trigger_key}"


def step_key(run_id_: str, step_id: str, visit: int) -> str:
    """Message key, action `ctx.key` and step-outcome key."""
    return f"{run_id_}:{step_id}:{visit}"


def idle_key(trigger_key: str) -> str:
    return f"idle:{trigger_key}"


def timer_wake(run_id_: str, step_id: str, at_ms: int) -> str:
    """Timer `wait`, event-wait timeout and deferred `do` wakes."""
    return f"{run_id_}:{step_id}:{at_ms}"


def start_wake(run_id_: str, at_ms: int) -> str:
    """A trigger `after` (or business-hours snapped start) wake."""
    return f"{run_id_}:start:{at_ms}"


def retry_wake(run_id_: str, step_id: str, visit: int, at_ms: int) -> str:
    return f"{run_id_}:{step_id}:{visit}:retry:{at_ms}"


def silence_wake(flow_id: str, session_id: str, at_ms: int) -> str:
    return f"{SILENCE_PREFIX}{flow_id}:{session_id}:{at_ms}"


def is_silence_wake(key: str) -> bool:
    return key.startswith(SILENCE_PREFIX)


def parse_silence_wake(key: str, session_id: str) -> tuple[str, str]:
    """`(flow_id, ms_text)` of a silence wake key, cut at the session id (§3.2.3).

    Flow ids may contain `:`, so the flow id is what precedes the last `:<session_id>:`;
    without the session id in the key, the part before the first `:`.
    """
    rest = key[len(SILENCE_PREFIX):]
    ms = rest.rpartition(":")[2]
    idx = rest.rfind(f":{session_id}:")
    flow_id = rest[:idx] if idx >= 0 else rest.split(":", 1)[0]
    return flow_id, ms


def dedupe_key(flow_id: str, anchor: str, nonce: str) -> str:
    return f"{flow_id}:{anchor}:{nonce}"


def say_once_claim(flow_id: str, step_id: str, session_id: str) -> str:
    return f"{flow_id}:{step_id}:{session_id}"


def live_pair(flow_id: str, anchor: str) -> str:
    """The `claims.active` entry of a live run elsewhere."""
    return f"{flow_id}:{anchor}"


def branch_key(run_id_: str, step_id: str, index: int) -> str:
    """Internal key of a `when` branch in the understand call (sent as `q<n>`)."""
    return f"{run_id_}/{step_id}/{index}"
