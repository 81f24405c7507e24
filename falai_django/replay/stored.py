"""Replaying stored conversations: their cases read from the run log and the transcript.

- `case_of(session_id)`: the conversation as a replay case (`cases`): its finished inputs in the
  order they ran, each with its recording (`TurnRecord.recording`) and the slice of the stored
  transcript it read. A turn written before recordings were kept (or with
  `RECORD_MODEL_REPLIES = False`) replays without model replies and with what the run log says
  it did (its collected data, and every later turn's, unknown, so not compared).
- `replay(session_id, *, agent=None, live=False)`: the case replayed (`cases.run_case`) through
  the running agent or `agent`. Writes nothing, sends nothing.
- `sessions_for(...)`, `agent_with_version(...)`: what `falai_replay` picks and replays against.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from falai_django import conf
from falai_django.engine.results import apply_changes, outcome_code
from falai_django.models import History, TurnRecord

from .cases import CASE_FORMAT, run_case
from .report import ReplayReport

__all__ = ["ReplayError", "agent_with_version", "case_of", "replay", "sessions_for"]

_FINISHED = (TurnRecord.Status.DONE, TurnRecord.Status.UNCHANGED)


class ReplayError(LookupError):
    """What was asked for cannot be replayed (no such conversation, no such flow version)."""


def replay(session_id: str, *, agent: Any = None, live: bool = False) -> ReplayReport:
    """Replay a stored conversation through `agent` (default: the running agent: code flows plus
    enabled stored flows), with the recorded model replies (`live=False`) or the agent's provider.
    Raises `ReplayError` when the conversation has no turn at all."""
    return run_case(case_of(session_id), agent if agent is not None else conf.get_agent(), live=live)


def case_of(session_id: str) -> dict[str, Any]:
    """The stored conversation as a self-contained replay case (see `cases`)."""
    rows = list(TurnRecord.objects.filter(conversation_id=session_id).order_by("finished_at", "id").values(
        "id", "kind", "input_key", "input", "status", "outcomes", "schedule", "ended", "recording", "received_at"))
    if not rows:
        raise ReplayError(f"conversation {session_id!r} has no turns to replay")
    lines = list(History.objects.transcript(session_id).order_by("id").values_list("id", "role", "content", "turn_id",
                                                                               "kind"))
    transcript = _Transcript(lines)
    turns: list[dict[str, Any]] = []
    data: dict[str, Any] | None = {}  # None: unknown from here on
    for row in rows:
        if row["status"] not in _FINISHED:
            continue
        turn = _case_turn(row, transcript)
        # The collected data after each turn, from the keys each one changed; unknown (not
        # compared) from a turn without a recording on.
        changes = (row["recording"] or {}).get("data_changes")
        data = apply_changes(data, changes) if data is not None and isinstance(changes, dict) else None
        turn["before"]["data"] = data
        turns.append(turn)
    return {"format": CASE_FORMAT, "version": 1, "session_id": session_id,
            "transcript": [{"role": role, "content": content} for _, role, content, _, _ in lines],
            "turns": turns}


class _Transcript:
    """The stored transcript's lines `(id, role, content, turn_id, kind)` in id order, read once
    for every turn of a case: where each turn's history ends."""

    def __init__(self, lines: list[tuple[Any, ...]]) -> None:
        self.ids = [line[0] for line in lines]
        self.first_of: dict[int, int] = {}  # a turn's first line
        self.said: dict[int, list[str]] = {}  # a turn's sent texts
        for index, (_, role, content, turn_id, kind) in enumerate(lines):
            if turn_id is None:
                continue
            self.first_of.setdefault(turn_id, index)
            if role == History.Role.ASSISTANT and kind in ("ai", "verbatim"):
                self.said.setdefault(turn_id, []).append(content)
        self.turn_ids = sorted(line[3] for line in lines if line[3] is not None)

    def end_upto(self, row_id: int | None) -> int:
        """The history's end for a recorded turn: past the newest row it read."""
        return bisect.bisect_right(self.ids, row_id) if row_id is not None else 0

    def end_before(self, turn_id: int) -> int:
        """The history's end for a turn without a recording: before its own lines (or the lines
        of the turns before it, when it wrote none)."""
        first = self.first_of.get(turn_id)
        return first if first is not None else bisect.bisect_left(self.turn_ids, turn_id)


def _case_turn(row: Mapping[str, Any], transcript: _Transcript) -> dict[str, Any]:
    stored = row["input"] or {}
    kept = row["recording"]
    turn: dict[str, Any] = {"input_key": row["input_key"], "kind": row["kind"], "turn": dict(stored.get("turn") or {})}
    for name in ("anchors", "claims"):
        if stored.get(name):
            turn[name] = stored[name]
    if kept:
        history = kept.get("history") or {}
        end, count = transcript.end_upto(history.get("upto")), int(history.get("n") or 0)
        turn.update(at=kept.get("at"), silenced=kept.get("silenced"), context=kept.get("context"),
                    history=[max(0, end - count), end], replies=kept.get("replies") or [],
                    effects=kept.get("effects") or [], before=dict(kept.get("before") or {}))
        return turn
    # No recording: the run log and the transcript say what the turn did; the history it read is
    # the transcript before its own lines.
    end = transcript.end_before(row["id"])
    limit = int(conf.get("HISTORY_LIMIT"))
    turn.update(at=(stored.get("turn") or {}).get("at") or _iso(row["received_at"]), silenced=stored.get("silenced"),
                context=stored.get("context"), history=[max(0, end - limit), end], replies=[], effects=[],
                before={"messages": transcript.said.get(row["id"], []),
                        "codes": [outcome_code(o.get("code"), o.get("kind"), o.get("status"))
                                  for o in row["outcomes"] or []],
                        "schedule": [e.get("key") for e in row["schedule"] or []],
                        "ended": [e.get("reason") for e in row["ended"] or []]})
    return turn


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def sessions_for(*, flow: str | None = None, since: datetime | None = None, limit: int = 50) -> list[str]:
    """The latest `limit` conversations (newest turn first) that ran `flow` (a run of it started),
    or any conversation when `flow` is None; only turns received at or after `since` count."""
    rows = TurnRecord.objects.order_by("-id")
    if since is not None:
        rows = rows.filter(received_at__gte=since)
    found: list[str] = []
    for conversation, started in rows.values_list("conversation_id", "started").iterator(chunk_size=2000):
        if conversation in found:
            continue
        if flow is None or any(isinstance(s, dict) and s.get("flowId") == flow for s in started or []):
            found.append(conversation)
            if len(found) >= limit:
                break
    return found


def agent_with_version(flow_id: str, version: int, code_agent: Any = None) -> Any:
    """The running agent with flow `flow_id` as it was at `version` (a stored `FlowVersion`) in its
    place (added when no running flow has that id). Raises `ReplayError` when there is no such
    version, and `FlowConfigurationError` when it no longer fits the code agent."""
    from falai_django.flows.running import StoredFlow, check_spec, merged_agent, stored_flows
    from falai_django.models import FlowVersion

    row = FlowVersion.objects.filter(flow_id=flow_id, version=version).values("spec", "position").first()
    if row is None:
        raise ReplayError(f"flow {flow_id!r} has no version {version}")
    code_agent = code_agent if code_agent is not None else conf.get_code_agent()
    others = [s for s in (stored_flows() if conf.get("FLOWS_DB") else ()) if s.id != flow_id]
    check_spec(flow_id, row["spec"], code_agent, [s.id for s in others])  # loud, where merging would skip it
    chosen = StoredFlow(id=flow_id, spec=row["spec"], position=row["position"], version=version)
    return merged_agent(code_agent, [*others, chosen])
