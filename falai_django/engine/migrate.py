"""`migrate_session`: read a stored blob as a v4 session, converting a 3.x one (persistence note §2).

    session = migrate_session(blob, session_id=sid, flow_id_of=lambda old: old)

- A blob with a `v` key is checked as v4 and passed through (`Session.from_json`).
- A blob without `v` is read as a 3.x `SessionState`: its cursor becomes one run at the same
  step, and every completed flow and every fired 3.x signal becomes a claim, so nothing
  fires twice. The result has `version` 0: the host's first save into the new table is the
  insert (`store.save(session, 0)`).
- Anything else raises `InvalidSessionError`; a broken row is never a fresh conversation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from .errors import InvalidSessionError
from .jstime import UTC, ms_to_iso, to_iso, try_parse_iso, utc_now
from .session import Run, Session, Trigger, describe

__all__ = ["migrate_session"]

_DATE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}", re.ASCII)
LEGACY_TRIGGER_KEY = "legacy"
_MISSING = object()


def migrate_session(
    blob: Any,
    *,
    session_id: str,
    flow_id_of: Callable[[str], str] | None = None,
    now: datetime | str | None = None,
) -> Session:
    """A v4 `Session` from a stored blob (v4 passed through checked, 3.x converted), version 0 for 3.x.

    `flow_id_of(old_id)` maps a 3.x flow id or signal key to the v4 flow id (pass identity
    when the ids were kept; left out, the ids are kept). `now` stamps runs and claims that
    carry no date of their own.
    """
    if flow_id_of is None:
        flow_id_of = _same_id
    if not isinstance(blob, dict):
        raise InvalidSessionError(session_id, f"expected an object, got {describe(blob)}")
    if "v" in blob:
        return Session.from_json(blob, session_id)
    return _from_legacy(blob, session_id, flow_id_of, now)


def _from_legacy(blob: dict[str, Any], session_id: str, flow_id_of: Callable[[str], str],
                 now: datetime | str | None) -> Session:
    def fail(reason: str) -> InvalidSessionError:
        return InvalidSessionError(session_id, reason)

    def optional(key: str, kind: type, expected: str) -> Any:
        # present-but-null counts as present (JS `!== undefined`); only a missing key is absent
        value = blob.get(key, _MISSING)
        if value is not _MISSING and not isinstance(value, kind):
            raise fail(f"{key} is {describe(value)}, expected {expected}")
        return value

    data = blob.get("data", _MISSING)
    if not isinstance(data, dict):
        raise fail(f"data is {_describe(data)}, expected an object; not a 3.x session either")
    metadata = optional("metadata", dict, "an object")
    history = optional("history", list, "a list")
    flow_history = optional("flowHistory", list, "a list")
    signals = optional("signals", dict, "an object")
    triggers = signals.get("triggers") if isinstance(signals, dict) else None
    if triggers is None:
        triggers = {}
    if not isinstance(triggers, dict):
        raise fail(f"signals.triggers is {describe(triggers)}, expected an object")
    flow_ref = _legacy_ref(blob.get("currentFlow"), "currentFlow", fail)
    step_ref = _legacy_ref(blob.get("currentStep"), "currentStep", fail)

    fallback = _fallback_iso(now)

    def claim_key(old_id: str) -> str:
        return f"{flow_id_of(old_id)}:{session_id}:"

    claims: dict[str, dict[str, str]] = {}
    for i, entry in enumerate(flow_history if isinstance(flow_history, list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("flowId"), str):
            raise fail(f"flowHistory[{i}] is not a flow entry")
        if entry.get("completed") is True:
            at = _iso_or_none(entry.get("exitedAt")) or _iso_or_none(entry.get("enteredAt")) or fallback
            claims[claim_key(entry["flowId"])] = {"at": at}
    for key, state in triggers.items():
        if not isinstance(state, dict):
            raise fail(f"signals.triggers.{key} is not a trigger state")
        # the last firing, so a cooldown counts from when the signal last fired
        at = _iso_or_none(state.get("lastTriggeredAt")) or _iso_or_none(state.get("firstTriggeredAt")) or fallback
        claims[claim_key(key)] = {"at": at}

    runs: list[Run] = []
    if flow_ref is not None:
        flow_id = flow_id_of(flow_ref[0])
        started_at = _iso_or_none(flow_ref[1]) or fallback
        step_id = step_ref[0] if step_ref is not None else None
        dedupe = f"{flow_id}:{session_id}:"
        runs.append(Run.model_construct(
            id=f"{flow_id}#{LEGACY_TRIGGER_KEY}", flow_id=flow_id, anchor=session_id, dedupe_key=dedupe,
            step_id=step_id, status="running" if step_id is None else "asking",
            trigger=Trigger.model_construct(kind="message", key=LEGACY_TRIGGER_KEY, payload=None),
            input=None, hop=0, started_at=started_at, suspended_at=None, staying=None, waiting=None,
            asked={}, visits={}, outcomes=[],
        ))
        claims[dedupe] = {"at": started_at}  # written last: a run never exists without its claim

    return Session.model_construct(
        id=session_id, v=4, version=0, data=data, runs=runs, claims=claims, inputs=[],
        metadata=_dates_to_iso(metadata if isinstance(metadata, dict) else {}),
        last_user_at=None, last_assistant_at=None,
        history=history if isinstance(history, list) else None,
    )


def _same_id(old_id: str) -> str:
    return old_id


def _describe(value: Any) -> str:
    return "missing" if value is _MISSING else describe(value)


def _legacy_ref(value: Any, name: str, fail: Callable[[str], InvalidSessionError]) -> tuple[str, Any] | None:
    """A 3.x cursor (`currentFlow` / `currentStep`): `(id, enteredAt)`, or None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return (value, None)
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return (value["id"], value.get("enteredAt"))
    raise fail(f"{name} is {describe(value)}, expected {{ id }} or text")


def _fallback_iso(now: datetime | str | None) -> str:
    if now is None:
        return to_iso(utc_now())
    if isinstance(now, datetime):
        return to_iso(now)
    parsed = try_parse_iso(now)
    if parsed is None:
        raise ValueError(f'migrate_session now="{now}" is not a date: pass a datetime or ISO text')
    return to_iso(parsed)


def _iso_or_none(value: Any) -> str | None:
    """Upstream `toIso`: a date → ISO; epoch ms → ISO; text starting YYYY-MM-DD → ISO; else None."""
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, date):
        return to_iso(datetime(value.year, value.month, value.day, tzinfo=UTC))
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return ms_to_iso(value)
        except (OverflowError, ValueError):
            return None
    if isinstance(value, str) and _DATE_PREFIX.match(value):
        parsed = try_parse_iso(value)
        return None if parsed is None else to_iso(parsed)
    return None


def _dates_to_iso(value: Any) -> Any:
    """Datetimes anywhere inside (nested dicts and lists too) become ISO text; the rest is kept."""
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, date):
        return to_iso(datetime(value.year, value.month, value.day, tzinfo=UTC))
    if isinstance(value, dict):
        return {k: _dates_to_iso(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dates_to_iso(v) for v in value]
    return value
