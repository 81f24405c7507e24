"""The conversation page's sections as plain data for its template: the live runs and the
outcomes timeline read from the run log (`TurnRecord`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from falai_django.engine.jstime import try_parse_iso
from falai_django.models import TurnRecord

TIMELINE_TURNS = 100  # run-log rows read for the outcomes timeline


def as_time(value: Any) -> datetime | None:
    return try_parse_iso(value) if isinstance(value, str) else None


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def compact_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def runs_of(session: Any) -> list[dict[str, Any]]:
    runs = []
    for run in session.runs:
        waiting = run.waiting
        runs.append({
            "id": run.id,
            "flow": run.flow_id,
            "step": run.step_id,
            "status": run.status,
            "waiting_until": as_time(waiting.until) if waiting else None,
            "waiting_for": (waiting.event or waiting.kind) if waiting else "",
            "asked": sorted(run.asked.items()),
            "visits": sorted(run.visits.items()),
            "started_at": as_time(run.started_at),
            "trigger": f"{run.trigger.kind}:{run.trigger.key}",
        })
    return runs


def outcomes_timeline(conversation_id: str, turns: int = TIMELINE_TURNS) -> list[dict[str, Any]]:
    """Every outcome line (and skipped trigger) of the last `turns` inputs, newest first."""
    records = TurnRecord.objects.filter(conversation_id=conversation_id).order_by("-id").only(
        "id", "kind", "input_key", "status", "received_at", "outcomes", "skipped", "llm_calls", "error"
    )[:turns]
    lines: list[dict[str, Any]] = []
    for record in records:
        source = f"{record.kind}:{record.input_key}"
        entries: list[dict[str, Any]] = []
        for outcome in record.outcomes or []:
            entries.append({
                "at": as_time(outcome.get("at")) or record.received_at,
                "flow": outcome.get("flowId") or "",
                "step": outcome.get("stepId") or "",
                "kind": outcome.get("kind") or "",
                "status": outcome.get("status") or "",
                "code": outcome.get("code") or "",
                "message": outcome.get("message") or "",
                "detail": outcome.get("detail") or "",
                "next": outcome.get("next") or "",
                "until": as_time(outcome.get("until")),
                "source": source,
            })
        for skipped in record.skipped or []:
            entries.append({
                "at": record.received_at,
                "flow": skipped.get("flowId") or "",
                "step": "",
                "kind": "trigger",
                "status": "skipped",
                "code": skipped.get("code") or "",
                "message": skipped.get("message") or "",
                "detail": skipped.get("triggerKey") or "",
                "next": "",
                "until": None,
                "source": source,
            })
        if record.error:
            entries.append({
                "at": record.received_at, "flow": "", "step": "", "kind": "turn", "status": record.status,
                "code": record.status, "message": record.error, "detail": "", "next": "", "until": None,
                "source": source,
            })
        lines.extend(reversed(entries))  # within one turn, the last line is the newest
    return lines
