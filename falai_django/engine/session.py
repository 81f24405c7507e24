"""The session blob, as pydantic v2 models (what a turn returns is in `results.py`).

Attributes are snake_case; the JSON form (`to_json()`, what stores write) is the upstream v4
blob: camelCase keys, times as `toISOString()` text, optional keys **omitted** when unset
(never written as null). Times inside the blob stay ISO strings (as upstream keeps them), so
reading and writing a row never reformats them; `ScheduleEntry.at` is an aware UTC datetime.

`None` on an optional attribute means "absent": `run.suspended_at = None` removes the key from
the blob. The one nullable key that is always written is `Run.stepId`.

Speed notes for the turn:

- `Session.from_json(dict)` / `Session.from_json_text(str)` validate in pydantic-core (Rust);
  only a blob that fails that fast check goes through the slow upstream-exact checker
  (`assert_session`), which either raises `InvalidSessionError` with upstream's reason or
  normalises the blob (drops a non-true `staying`, a non-string `suspendedAt`, reads `3.0` as 3).
  What it passes always loads: below the run keys it checks, upstream trusts the blob, so an
  outcome line, `waiting`, a trigger or a counter that does not fit its model is held as read
  and written back as read (`_loose_session`). Unknown keys inside `waiting`, `trigger` and
  claim values are kept (upstream keeps those objects whole); unknown session and run keys are
  dropped (upstream rebuilds those two), and so are unknown keys on outcome lines (for speed).
  A `null` on an optional key reads as absent.
- `session.copy_deep()` is a full independent copy through the Rust serialiser (a few µs for a
  typical session); `model_copy(deep=True)` goes through `copy.deepcopy` and is several times
  slower. Build new lines with `StepOutcome.model_construct(...)` when a field set is known to
  be valid: it skips validation entirely.
- No model validates on assignment: mutate attributes and lists freely.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_serializer,
    model_validator,
    with_config,
)
from pydantic.alias_generators import to_camel
from typing_extensions import TypedDict

from .errors import InvalidSessionError
from .fields import js_json, unlike_js_numbers
from .jstime import to_iso

__all__ = [
    "END_REASONS",
    "OUTCOME_CODES",
    "OUTCOME_KINDS",
    "OUTCOME_STATUSES",
    "RUN_STATUSES",
    "TRIGGER_KINDS",
    "Claim",
    "Run",
    "Session",
    "StepOutcome",
    "Trigger",
    "Waiting",
    "assert_session",
    "assistant_message",
    "describe",
    "dumps_json",
    "user_message",
]

RunStatus = Literal["running", "asking", "waiting", "suspended"]
TriggerKind = Literal["message", "mention", "silence", "event", "start", "flow"]
OutcomeKind = Literal["prompt", "collect", "say", "do", "wait", "if", "idle"]
OutcomeStatus = Literal["ok", "skipped", "failed", "waiting", "deferred"]
EndReason = Literal["end", "flow", "reset", "skipped", "failed", "replaced"]

RUN_STATUSES: tuple[str, ...] = ("running", "asking", "waiting", "suspended")
TRIGGER_KINDS: tuple[str, ...] = ("message", "mention", "silence", "event", "start", "flow")
OUTCOME_KINDS: tuple[str, ...] = ("prompt", "collect", "say", "do", "wait", "if", "idle")
OUTCOME_STATUSES: tuple[str, ...] = ("ok", "skipped", "failed", "waiting", "deferred")
END_REASONS: tuple[str, ...] = ("end", "flow", "reset", "skipped", "failed", "replaced")
# The 38 codes of `StepOutcomeCode`, in the spec's order (engine-turn.md §2.5). The English
# sentence for each lives with the turn (one table of messages), not here.
OUTCOME_CODES: tuple[str, ...] = (
    "no-session", "duplicate-input", "stale-wake", "silence-broken", "already-claimed", "cooldown",
    "hop-limit", "already-running", "flow-gone", "step-loop", "step-gone", "customer-replied",
    "premise-changed", "silenced", "already-known", "asked-fixed", "another-reply", "already-sent",
    "branch", "max-asks", "inline-delay", "awaiting-trigger", "awaiting-event", "event-arrived",
    "no-event", "replied", "no-reply", "action-skipped", "action-failed", "action-deferred",
    "unknown-field", "bad-value", "not-in-enum", "provider-unavailable", "provider-quota",
    "provider-auth", "provider-context", "provider-invalid",
)

_BLOB_CONFIG = ConfigDict(
    alias_generator=to_camel,
    validate_by_name=True,
    validate_by_alias=True,
    strict=True,
    extra="ignore",
)
# `waiting`, `trigger` and claim values, which upstream keeps as stored objects: keys this
# model does not know are kept and written back. (Outcome lines drop them: `extra="allow"` on
# the hundred lines of a big blob costs ~15% of a load.)
_KEPT_CONFIG = ConfigDict(**{**_BLOB_CONFIG, "extra": "allow"})
_RESULT_CONFIG = ConfigDict(
    alias_generator=to_camel,
    validate_by_name=True,
    validate_by_alias=True,
    extra="ignore",
)


def _dump(model: BaseModel, warnings: bool = True) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, warnings=warnings)


class _BlobModel(BaseModel):
    model_config = _BLOB_CONFIG

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON dict, optional keys omitted when unset."""
        return _dump(self)


# ---------------------------------------------------------------------------------------------
# Session, Run and their parts (the blob)
# ---------------------------------------------------------------------------------------------


@with_config(ConfigDict(extra="allow"))
class Claim(TypedDict):
    """A claim value: `{"at": iso}` (when the run or `say once` claimed it)."""

    at: str


class Trigger(_BlobModel):
    """What started a run: `{kind, key, payload?}`."""

    model_config = _KEPT_CONFIG

    kind: str
    key: str
    payload: Any = None


class Waiting(_BlobModel):
    """Why a run is parked: `{kind: 'timer'|'event', key?, until?, setAt, event?}`."""

    model_config = _KEPT_CONFIG

    kind: str
    key: str | None = None
    until: str | None = None
    set_at: str
    event: str | None = None


class StepOutcome(_BlobModel):
    """One outcome line (engine-turn.md §2.4). Unset optional fields are left out of the JSON."""

    run_id: str | None = None
    flow_id: str | None = None
    step_id: str | None = None
    key: str | None = None
    kind: str
    status: str
    code: str | None = None
    message: str | None = None
    detail: str | None = None
    next: str | None = None
    until: str | None = None
    at: str
    llm_calls: int | None = None


# Validation context marking "this is a stored blob": every key must be present.
_BLOB: dict[str, bool] = {"blob": True}


def _is_blob(info: ValidationInfo) -> bool:
    return info.context is not None and info.context.get("blob") is True


# The attributes a stored run must carry (the blob's `flowId`, `dedupeKey`, `stepId`, `startedAt`...).
_RUN_REQUIRED_FIELDS = frozenset({"id", "flow_id", "anchor", "dedupe_key", "step_id", "status", "trigger", "hop",
                                  "started_at", "asked", "visits", "outcomes"})


class Run(_BlobModel):
    """A live run (engine-turn.md §2.2). `step_id` is the one nullable key always written."""

    id: str
    flow_id: str
    anchor: str
    dedupe_key: str
    step_id: str | None = None
    status: RunStatus
    trigger: Trigger
    input: Any = None
    hop: int = Field(default=0, ge=0)
    started_at: str
    suspended_at: str | None = None
    staying: Literal[True] | None = None
    waiting: Waiting | None = None
    asked: dict[str, int] = Field(default_factory=dict)
    visits: dict[str, int] = Field(default_factory=dict)
    outcomes: list[StepOutcome] = Field(default_factory=list)

    @model_validator(mode="after")
    def _blob_keys_present(self, info: ValidationInfo) -> Run:
        # A stored blob must carry every key; Python callers may rely on the defaults. Checked
        # after the fields, from the keys that were given: a "before" check would make
        # pydantic-core build the whole run as Python objects and validate it a second time.
        if _is_blob(info):
            given = self.__pydantic_fields_set__
            if not given.issuperset(_RUN_REQUIRED_FIELDS):
                raise ValueError("a run blob lacks a required key")
            if self.waiting is None and "waiting" in given:
                raise ValueError("waiting is null")
        return self

    @model_serializer(mode="wrap")
    def _keep_null_step(self, handler: Any) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.step_id is None and isinstance(out, dict) and "stepId" not in out and "step_id" not in out:
            key = "stepId" if "flowId" in out else "step_id"
            out = _insert_after(out, "dedupeKey" if key == "stepId" else "dedupe_key", key, None)
        return out


def _holds_float(session: Session) -> bool:
    """Whether a float sits anywhere a validated session can hold one: its free-form values
    (`data`, `metadata`, `history`, claim values, a run's `input`, `trigger.payload`) and the
    unknown keys `trigger` and `waiting` keep. The typed fields are strict str / int."""
    if _any_float(session.data) or _any_float(session.metadata) or _any_float(session.history):
        return True
    if any(_any_float(claim) for claim in session.claims.values()):
        return True
    for run in session.runs:
        if _any_float(run.input) or _any_float(run.trigger.payload) or _any_float(run.trigger.model_extra):
            return True
        if run.waiting is not None and _any_float(run.waiting.model_extra):
            return True
    return False


def _any_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_any_float(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_any_float(v) for v in value)
    # A model or other object inside a free-form value: its text decides (the slow, exact way).
    return value is not None and not isinstance(value, (str, int))


def _insert_after(mapping: dict[str, Any], after: str, key: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in mapping.items():
        out[k] = v
        if k == after:
            out[key] = value
    if key not in out:
        out[key] = value
    return out


# A number pydantic writes unlike JSON.stringify: a whole float ("1.0", "-0.0"), or an
# exponent form JavaScript writes in plain digits ("1e+16", "1e-6"). Rare, so only then is
# the slower exact encoder used.

_SESSION_REQUIRED_FIELDS = frozenset({"id", "v", "version", "data", "runs", "claims", "inputs", "metadata"})
_ABSENT_NOT_NULL = ("last_user_at", "last_assistant_at", "history")


class Session(_BlobModel):
    """The whole conversation state, stored as one blob (engine-turn.md §2.1).

    `Session.fresh(session_id)` is a first turn's session. `Session.from_json(blob,
    session_id=...)` checks a stored blob exactly as upstream's `assertSession` does and raises
    `InvalidSessionError` with its reason; `to_json()` writes it back.
    """

    id: str
    v: Literal[4] = 4
    version: int = Field(default=0, ge=0)
    data: dict[str, Any] = Field(default_factory=dict)
    runs: list[Run] = Field(default_factory=list)
    claims: dict[str, Claim] = Field(default_factory=dict)
    inputs: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    last_user_at: str | None = None
    last_assistant_at: str | None = None
    history: list[Any] | None = None

    # False on a session holding stored parts that do not fit their models (`_LooseSession`):
    # they are written back as read, which pydantic would otherwise warn about.
    _dump_warnings: ClassVar[bool] = True

    @model_validator(mode="after")
    def _blob_keys_present(self, info: ValidationInfo) -> Session:
        # In a stored blob every key is there, and absent differs from null: a null
        # lastUserAt / lastAssistantAt / history fails. (After the fields, as on `Run`.)
        if _is_blob(info):
            given = self.__pydantic_fields_set__
            if not given.issuperset(_SESSION_REQUIRED_FIELDS):
                raise ValueError("a session blob lacks a required key")
            if any(getattr(self, name) is None and name in given for name in _ABSENT_NOT_NULL):
                raise ValueError("null where a key must be absent")
        return self

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def fresh(cls, session_id: str) -> Session:
        """A first turn's session: `{id, v: 4, version: 0, data: {}, runs: [], claims: {}, inputs: [], metadata: {}}`."""
        return cls.model_construct(id=session_id, v=4, version=0, data={}, runs=[], claims={}, inputs=[], metadata={},
                                   last_user_at=None, last_assistant_at=None, history=None)

    @classmethod
    def from_json(cls, blob: Any, session_id: str | None = None) -> Session:
        """Build a session from its JSON dict, checked; a bad blob raises `InvalidSessionError`.

        With `session_id` the blob's `id` must equal it (what a store passes); without it the
        blob's own id is used and only has to be text.
        """
        if isinstance(blob, dict):
            try:
                session = cls.model_validate(blob, context=_BLOB, by_name=False)
            except ValidationError:
                return cls._from_checked(blob, session_id)
            if session_id is not None and session.id != session_id:
                assert_session(blob, session_id)  # raises the upstream id reason
            return session
        return cls._from_checked(blob, session_id)

    @classmethod
    def from_json_text(cls, text: str | bytes | bytearray, session_id: str | None = None) -> Session:
        """Like `from_json` for JSON text (what MemoryStore, SQLite and Redis hold)."""
        try:
            session = cls.model_validate_json(text, context=_BLOB, by_name=False)
        except ValidationError:
            try:
                blob = json.loads(text)
            except (ValueError, TypeError, RecursionError):  # nested past the decoder's stack: unreadable too
                raise InvalidSessionError(session_id, "blob is not valid JSON") from None
            return cls._from_checked(blob, session_id)
        if session_id is not None and session.id != session_id:
            raise InvalidSessionError(session_id, f"id is {describe(session.id)}, expected {describe(session_id)}")
        return session

    @classmethod
    def _from_checked(cls, blob: Any, session_id: str | None) -> Session:
        normalised = assert_session(blob, session_id)
        try:
            return cls.model_validate(normalised, context=_BLOB, by_name=False)
        except ValidationError:  # deeper content upstream trusts unchecked: take it as it is
            return _loose_session(normalised)

    # -- output ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The upstream v4 blob: camelCase, optional keys omitted, times as stored ISO text."""
        return _dump(self, warnings=self._dump_warnings)

    def to_json_text(self) -> str:
        """Compact JSON text of `to_json()` (non-ASCII kept), as `JSON.stringify` writes it."""
        text = self.model_dump_json(by_alias=True, exclude_none=True, warnings=self._dump_warnings)
        # Only a float can be written unlike JavaScript (`1.0`, `1e+16`: it writes `1`, `1000…`).
        # Typed fields hold no floats, so the free-form parts are looked at first: cheaper than
        # scanning the text of a big blob, which is only done when one of them holds a float.
        if (not self._dump_warnings or _holds_float(self)) and unlike_js_numbers(text):
            return js_json(self.to_json())
        return text

    def to_blob(self, version: int) -> dict[str, Any]:
        """What a store writes: `to_json()` with `version` set to the new version."""
        out = _dump(self, warnings=self._dump_warnings)
        out["version"] = version
        return out

    def copy_deep(self) -> Session:
        """An independent deep copy (what `turn()` works on); cheaper than `model_copy(deep=True)`."""
        if not self._dump_warnings:  # parts held as read would not validate again
            return copy.deepcopy(self)
        return type(self).model_validate(self.model_dump())

    def with_version(self, version: int) -> Session:
        """A deep copy stamped with `version` (what a successful store save returns)."""
        copy = self.copy_deep()
        copy.version = version
        return copy


# ---------------------------------------------------------------------------------------------
# assertSession: the exact upstream check and its reasons
# ---------------------------------------------------------------------------------------------

_MISSING = object()


def describe(value: Any = _MISSING) -> str:
    """How upstream names a bad value in a reason: missing, null, a list, "text", 3, an object."""
    if value is _MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _js_number(value)
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _js_number(value: float | int) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer():
            return str(int(value))
    return repr(value)


def _whole(value: Any) -> int | None:
    """A JS whole number as an int (3 and 3.0 both), else None. Booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _get(blob: dict[str, Any], key: str) -> Any:
    return blob.get(key, _MISSING)


def assert_session(blob: Any, session_id: str | None) -> dict[str, Any]:
    """Upstream `assertSession`: raise `InvalidSessionError(session_id, reason)` or return the
    normalised blob (only session keys; optional ones only when present). `session_id=None`
    accepts any text id."""
    sid = session_id

    def fail(reason: str) -> InvalidSessionError:
        return InvalidSessionError(sid if sid is not None else _id_of(blob), reason)

    if not isinstance(blob, dict):
        raise fail(f"expected an object, got {describe(blob)}")
    v = _get(blob, "v")
    if isinstance(v, bool) or v != 4 or not isinstance(v, int | float):
        raise fail(f"v is {describe(v)}, expected 4")
    blob_id = _get(blob, "id")
    if session_id is not None:
        if blob_id != session_id or not isinstance(blob_id, str):
            raise fail(f"id is {describe(blob_id)}, expected {describe(session_id)}")
    elif not isinstance(blob_id, str):
        raise fail(f"id is {describe(blob_id)}, expected text")
    version = _whole(_get(blob, "version"))
    if version is None or version < 0:
        raise fail(f"version is {describe(_get(blob, 'version'))}, expected a whole number")
    data = _get(blob, "data")
    if not isinstance(data, dict):
        raise fail(f"data is {describe(data)}, expected an object")
    runs = _get(blob, "runs")
    if not isinstance(runs, list):
        raise fail(f"runs is {describe(runs)}, expected a list")
    claims = _get(blob, "claims")
    if not isinstance(claims, dict) or not all(
        isinstance(c, dict) and isinstance(c.get("at"), str) for c in claims.values()
    ):
        raise fail("claims is not a map of { at }")
    inputs = _get(blob, "inputs")
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
        raise fail("inputs is not a list of ids")
    metadata = _get(blob, "metadata")
    if not isinstance(metadata, dict):
        raise fail(f"metadata is {describe(metadata)}, expected an object")
    history = _get(blob, "history")
    if history is not _MISSING and not isinstance(history, list):
        raise fail(f"history is {describe(history)}, expected a list")
    for key in ("lastUserAt", "lastAssistantAt"):
        value = _get(blob, key)
        if value is not _MISSING and not isinstance(value, str):
            raise fail(f"{key} is not text")
    checked_runs = [_check_run(run, i, fail) for i, run in enumerate(runs)]

    out: dict[str, Any] = {
        "id": blob_id, "v": 4, "version": version, "data": data, "runs": checked_runs,
        "claims": claims, "inputs": inputs, "metadata": metadata,
    }
    for key in ("lastUserAt", "lastAssistantAt", "history"):
        if key in blob:
            out[key] = blob[key]
    return out


def _id_of(blob: Any) -> str | None:
    if isinstance(blob, dict) and isinstance(id_ := blob.get("id"), str):
        return id_
    return None


def _check_run(run: Any, i: int, fail: Any) -> dict[str, Any]:
    where = f"runs[{i}]"
    if not isinstance(run, dict):
        raise fail(f"{where} is {describe(run)}, expected an object")
    status = _get(run, "status")
    if not isinstance(status, str):
        raise fail(f"{where}.status is {describe(status)}, expected text")
    if status not in RUN_STATUSES:
        raise fail(f"{where}.status is {describe(status)}")
    step_id = _get(run, "stepId")
    if step_id is not None and not isinstance(step_id, str):
        raise fail(f"{where}.stepId is {describe(step_id)}, expected text or null")
    hop = _whole(_get(run, "hop"))
    if hop is None or hop < 0:
        raise fail(f"{where}.hop is {describe(_get(run, 'hop'))}, expected a whole number")
    outcomes = _get(run, "outcomes")
    if not isinstance(outcomes, list):
        raise fail(f"{where}.outcomes is {describe(outcomes)}, expected a list")
    trigger = _get(run, "trigger")
    # one reason for a missing, non-object or incomplete trigger, as upstream words it
    if not isinstance(trigger, dict) or not isinstance(trigger.get("kind"), str) or not isinstance(trigger.get("key"), str):
        raise fail(f"{where}.trigger needs kind and key")
    waiting = _get(run, "waiting")
    if waiting is not _MISSING and not isinstance(waiting, dict):
        raise fail(f"{where}.waiting is {describe(waiting)}, expected an object")
    for key in ("id", "flowId", "anchor", "dedupeKey", "startedAt"):
        if not isinstance(_get(run, key), str):
            raise fail(f"{where}.{key} is {describe(_get(run, key))}, expected text")
    for key in ("asked", "visits"):
        if not isinstance(_get(run, key), dict):
            raise fail(f"{where}.{key} is {describe(_get(run, key))}, expected an object")

    out: dict[str, Any] = {
        "id": run["id"], "flowId": run["flowId"], "anchor": run["anchor"], "dedupeKey": run["dedupeKey"],
        "stepId": step_id, "status": status, "trigger": trigger, "hop": hop, "startedAt": run["startedAt"],
        "asked": {k: _whole(n) if _whole(n) is not None else n for k, n in run["asked"].items()},
        "visits": {k: _whole(n) if _whole(n) is not None else n for k, n in run["visits"].items()},
        "outcomes": outcomes,
    }
    if "input" in run:
        out["input"] = run["input"]
    if waiting is not _MISSING:
        out["waiting"] = waiting
    if isinstance(run.get("suspendedAt"), str):
        out["suspendedAt"] = run["suspendedAt"]
    if run.get("staying") is True:
        out["staying"] = True
    return out


def _loose_part(model: type[_BlobModel], raw: dict[str, Any]) -> Any:
    """A stored part upstream keeps unchecked (an outcome line, `waiting`, `trigger`), as its
    model when it fits, else held as read: a missing key reads None (and stays absent), a value
    of another type is kept and written back as it is."""
    try:
        return model.model_validate(raw, context=_BLOB, by_name=False)
    except ValidationError:
        values = {name: None for name, info in model.model_fields.items() if info.is_required()}
        values.update(raw)
        return model.model_construct(**values)


def _loose_session(blob: dict[str, Any]) -> Session:
    """A blob that passed `assert_session` but whose trusted parts do not fit the models: built
    without validation (upstream checks nothing below the run keys `assert_session` checks)."""
    runs = []
    for raw in blob["runs"]:
        values = {**raw, "trigger": _loose_part(Trigger, raw["trigger"]),
                  "outcomes": [_loose_part(StepOutcome, line) if isinstance(line, dict) else line
                               for line in raw["outcomes"]]}
        if "waiting" in raw:
            values["waiting"] = _loose_part(Waiting, raw["waiting"])
        runs.append(Run.model_construct(**values))
    return _LooseSession.model_construct(**{**blob, "runs": runs})


class _LooseSession(Session):
    """A session `_loose_session` built: parts held as read are written back as read."""

    _dump_warnings: ClassVar[bool] = False


# ---------------------------------------------------------------------------------------------
# History items and JSON text
# ---------------------------------------------------------------------------------------------


def user_message(text: str) -> dict[str, str]:
    """A history item for something the customer said: `{"role": "user", "content": text}`."""
    return {"role": "user", "content": text}


def assistant_message(text: str) -> dict[str, str]:
    """A history item for something the assistant said: `{"role": "assistant", "content": text}`."""
    return {"role": "assistant", "content": text}


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps_json(value: Any) -> str:
    """Compact JSON text as `JSON.stringify` writes it: no spaces, non-ASCII kept, datetimes as ISO."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)
