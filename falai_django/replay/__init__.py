"""Replaying real conversations through a changed agent, with the model's recorded answers.

    from falai_django.replay import replay
    report = replay("5511999990000")           # the running agent, the recorded replies
    report.same, report.first_difference, report.turns[3].diffs

- `report`   `ReplayReport` and `ReplayTurn`: what a replay finds, turn by turn
- `cassette` the outside world played back: the model answered from the recording, actions and
             tools as stand-ins that touch nothing, the clock pinned to each turn's time
- `cases`    a conversation as a self-contained case (plain JSON) and `run_case` / `replay_case`,
             which replay one with no database
- `stored`   `replay(session_id)` and the cases read from the run log and the transcript; which
             conversations `falai_replay` picks, and a stored flow version as the agent

The recording itself is the host's (`host.turns` keeps `llm.recording`'s tape on the run-log row
when `FALAI["RECORD_MODEL_REPLIES"]` is on). A replay writes nothing, sends nothing and runs no
action's side effect.

It imports `engine/`, `llm/`, `models/`, `flows/` (a stored flow version) and the settings; the
`falai_replay` command imports it, and `falai_django.testing.replay_case` imports its pure part
(`cases`, `cassette`, `report`). `host/` never does. Names resolve on first use, so importing
the pure part needs no Django.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from falai_django._lazy import lazy_exports

if TYPE_CHECKING:
    from .cases import CASE_FORMAT, load_case, replay_case, run_case
    from .report import ReplayReport, ReplayTurn
    from .stored import ReplayError, agent_with_version, case_of, replay, sessions_for

__all__ = ["CASE_FORMAT", "ReplayError", "ReplayReport", "ReplayTurn", "agent_with_version", "case_of",
           "load_case", "replay", "replay_case", "run_case", "sessions_for"]

_LAZY = {
    "CASE_FORMAT": "falai_django.replay.cases", "load_case": "falai_django.replay.cases",
    "replay_case": "falai_django.replay.cases", "run_case": "falai_django.replay.cases",
    "ReplayReport": "falai_django.replay.report", "ReplayTurn": "falai_django.replay.report",
    "ReplayError": "falai_django.replay.stored", "agent_with_version": "falai_django.replay.stored",
    "case_of": "falai_django.replay.stored", "replay": "falai_django.replay.stored",
    "sessions_for": "falai_django.replay.stored",
}

__getattr__ = lazy_exports(__name__, globals(), _LAZY)
