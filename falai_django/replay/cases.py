"""Replaying a case: a conversation's inputs with their recordings, as plain JSON data.

    case = {"format": CASE_FORMAT, "version": 1, "session_id": "5511...",
            "transcript": [{"role", "content"}, ...],          # the stored transcript, oldest first
            "turns": [{"input_key", "kind", "turn": {...},      # the input as `turn()` takes it
                       "anchors"?, "claims"?, "at", "silenced", "context",
                       "history": [start, end],                 # the transcript slice it read
                       "replies": [...], "effects": [...],      # the recording (`llm.recording`)
                       "before": {...}}, ...]}                  # what the turn did (`turn_summary`)

`falai_django.replay.stored` builds one from the database (and `falai_replay --export` prints
it); `run_case` replays it through an agent with no database at all: from an empty session, each
input at its recorded time with the history it read, the model answered from the recording
(`cassette`). `replay_case` is the same for a team's own tests (a dict or a path to the JSON).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from os import PathLike
from typing import Any

from falai_django.engine.results import SUMMARY_PARTS, session_data, turn_summary
from falai_django.llm import recording

from .cassette import ReplayDeck
from .report import ReplayReport, ReplayTurn

__all__ = ["CASE_FORMAT", "load_case", "replay_case", "run_case"]

CASE_FORMAT = "falai_django.replay-case"


def load_case(case: Mapping[str, Any] | str | PathLike[str]) -> dict[str, Any]:
    """A case as a dict: given as one, or read from a JSON file. A file or dict that is not a
    case is a ValueError saying what it is."""
    if not isinstance(case, Mapping):
        with open(case, encoding="utf-8") as handle:
            case = json.load(handle)
    if not isinstance(case, Mapping) or case.get("format") != CASE_FORMAT:
        raise ValueError(f"not a replay case: expected a JSON object with \"format\": \"{CASE_FORMAT}\" "
                         "(write one with `manage.py falai_replay --export SESSION_ID`)")
    if not isinstance(case.get("turns"), list) or not isinstance(case.get("session_id"), str):
        raise ValueError("not a replay case: it needs \"session_id\" (text) and \"turns\" (a list)")
    return dict(case)


def replay_case(case: Mapping[str, Any] | str | PathLike[str], agent: Any) -> ReplayReport:
    """Replay an exported case (a dict, or a path to its JSON) through `agent` with the recorded
    model replies: no database, no model, no sender, no action's side effect."""
    return run_case(load_case(case), agent)


def run_case(case: Mapping[str, Any], agent: Any, *, live: bool = False) -> ReplayReport:
    """Replay `case` through `agent` (see the module docstring). `live=True` calls the agent's
    own provider instead of the recording."""
    session_id = case["session_id"]
    transcript = list(case.get("transcript") or [])
    deck = ReplayDeck(agent, live=live)
    session: Any = None
    turns: list[ReplayTurn] = []
    model_calls = 0
    for index, turn in enumerate(case["turns"]):
        deck.load(turn)
        kwargs = _turn_kwargs(session_id, turn, session, transcript)
        error = ""
        with recording.tape() as taped:
            try:
                result = deck.agent.turn(**kwargs)
            except Exception as exc:  # noqa: BLE001 - the changed agent broke here: reported, not raised
                result, error = None, f"{type(exc).__name__}: {exc}"
        if live:
            model_calls += len(taped.replies)
        if result is not None:
            after = turn_summary(result)
            if result.changed:
                version = session.version if session is not None else 0
                session = result.session.model_copy(update={"version": version + 1})
        else:
            after = {"messages": [], "codes": [], "data": session_data(session), "schedule": [], "ended": []}
        before = dict(turn.get("before") or {})
        diffs = [part for part in SUMMARY_PARTS if before.get(part) is not None and before.get(part) != after[part]]
        if error:
            diffs = diffs or ["codes"]
        needs_model = deck.needs_model
        turns.append(ReplayTurn(index=index, input_key=str(turn.get("input_key") or ""), kind=str(turn.get("kind")),
                                same=not diffs and not needs_model, needs_model=needs_model, diffs=diffs,
                                before=before, after=after, actions=deck.calls, error=error))
    first = next((t.index for t in turns if not t.same), None)
    return ReplayReport(session_id=session_id, same=first is None, first_difference=first, turns=turns,
                        model_calls=model_calls)


def _turn_kwargs(session_id: str, turn: Mapping[str, Any], session: Any, transcript: list[Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = dict(turn.get("turn") or {})
    start, end = turn.get("history") or (0, 0)
    kwargs.update(session_id=session_id, session=session, history=[dict(item) for item in transcript[start:end]],
                  context=turn.get("context"))
    if turn.get("silenced") is not None:
        kwargs["silenced"] = turn["silenced"]
    for name in ("anchors", "claims"):
        if turn.get(name):
            kwargs[name] = turn[name]
    return kwargs
