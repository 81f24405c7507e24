"""What a turn returns: `TurnResult` and its parts (messages, schedule entries, started and
ended runs, skipped triggers, usage). Plain data; `to_json()` writes upstream's camelCase."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from .jstime import to_iso
from .session import _BLOB_CONFIG, _RESULT_CONFIG, EndReason, Run, Session, StepOutcome


class _ResultModel(BaseModel):
    model_config = _RESULT_CONFIG

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON (datetimes as `toISOString()` text), unset optional keys omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class OutboundMessage(_ResultModel):
    """A message to send. `kind` is 'ai' (phrased by the model) or 'verbatim'."""

    text: str
    kind: Literal["ai", "verbatim"]
    media: dict[str, Any] | None = None
    after_ms: int = 0
    key: str
    run_id: str | None = None
    step_id: str | None = None


class ScheduleEntry(_ResultModel):
    """A wake to enqueue: `key`, `at` (aware UTC datetime), and `replaces` on silence wakes."""

    key: str
    at: datetime
    replaces: str | None = None

    @field_validator("at", mode="after")
    @classmethod
    def _at_is_utc(cls, at: datetime) -> datetime:
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)

    @field_serializer("at")
    def _at_iso(self, at: datetime) -> str:
        return to_iso(at)


class StartedRun(_ResultModel):
    """`result.started` item: a run started this turn (it may also have ended)."""

    run_id: str
    flow_id: str
    anchor: str
    dedupe_key: str


class EndedRun(Run):
    """`result.ended` item: the run's last state plus why it left `session.runs`."""

    model_config = ConfigDict(**{**_BLOB_CONFIG, "strict": False})

    reason: EndReason

    @classmethod
    def of(cls, run: Run, reason: str) -> EndedRun:
        """The ended entry for `run` (shares its nested values; the run is gone from the session)."""
        return cls.model_construct(**{name: getattr(run, name) for name in Run.model_fields}, reason=reason)


class SkippedTrigger(_ResultModel):
    """`result.skipped` item: a trigger that matched but started nothing."""

    flow_id: str
    anchor: str
    trigger_key: str
    code: str
    message: str


class Usage(_ResultModel):
    """Summed provider token counts."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_input_tokens: int = 0


class TurnResult(_ResultModel):
    """What `agent.turn()` returns (engine-turn.md §1.5). `session.version` is unchanged."""

    session: Session
    changed: bool
    messages: list[OutboundMessage] = Field(default_factory=list)
    schedule: list[ScheduleEntry] = Field(default_factory=list)
    outcomes: list[StepOutcome] = Field(default_factory=list)
    started: list[StartedRun] = Field(default_factory=list)
    ended: list[EndedRun] = Field(default_factory=list)
    skipped: list[SkippedTrigger] = Field(default_factory=list)
    llm_calls: int = 0
    usage: Usage | None = None


SUMMARY_PARTS: tuple[str, ...] = ("messages", "codes", "data", "schedule", "ended")


def turn_summary(result: TurnResult, *, data: bool = True) -> dict[str, Any]:
    """What a turn did, in the five parts a replay compares (`SUMMARY_PARTS`): the message texts,
    the outcome codes (a line without a code as `kind:status`), the collected data after the turn
    (left out with `data=False`), the wake keys it scheduled and the reasons of the runs it ended.
    Plain JSON."""
    summary: dict[str, Any] = {
        "messages": [m.text for m in result.messages],
        "codes": [outcome_code(o.code, o.kind, o.status) for o in result.outcomes],
        "schedule": [e.key for e in result.schedule],
        "ended": [e.reason for e in result.ended],
    }
    if data:
        summary["data"] = session_data(result.session)
    return summary


def outcome_code(code: str | None, kind: str | None, status: str | None) -> str:
    """An outcome line as `turn_summary` lists it: its code, or `kind:status` when it has none."""
    return code or f"{kind}:{status}"


def session_data(session: Session | None) -> dict[str, Any]:
    """The session's collected data as plain JSON ({} without a session)."""
    return session.model_dump(mode="json", include={"data"}).get("data", {}) if session is not None else {}


def data_changes(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """The keys of `after` that are new or changed since `before`, and None for the keys it lost:
    `apply_changes(before, data_changes(before, after)) == after`. A recording keeps these rather
    than the whole data on every turn."""
    before = before or {}
    changes = {key: value for key, value in after.items() if key not in before or before[key] != value}
    changes.update((key, None) for key in before if key not in after)
    return changes


def apply_changes(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`data` with `changes` (from `data_changes`) applied, as a new dict."""
    out = {**data, **changes}
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
    return out
