"""What a replay finds: `ReplayReport`, one per conversation, and its `ReplayTurn`s."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ReplayReport", "ReplayTurn"]


@dataclass
class ReplayTurn:
    """One input replayed.

    `before` is the turn as it ran (recorded), `after` the replay; each holds the five parts
    `messages`, `codes`, `data`, `schedule`, `ended` (`engine.results.turn_summary`). `diffs`
    names the parts that differ. `needs_model`: the recording could not answer a model call the
    changed agent made (that call went unanswered). `actions`: the actions the replay ran, each
    `{"action", "params"}`, against stand-ins (nothing outside was touched)."""

    index: int
    input_key: str
    kind: str
    same: bool
    needs_model: bool
    diffs: list[str]
    before: dict[str, Any]
    after: dict[str, Any]
    actions: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""  # the replayed turn raised (the replay went on from the session before it)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ReplayReport:
    """One conversation replayed. `same`: every turn the same. `first_difference`: the index (in
    `turns`) of the first turn that is not, or None. `model_calls`: calls made during the replay
    (0 with the recorded replies)."""

    session_id: str
    same: bool
    first_difference: int | None
    turns: list[ReplayTurn]
    model_calls: int = 0

    @property
    def needs_model(self) -> bool:
        return any(t.needs_model for t in self.turns)

    @property
    def status(self) -> str:
        """"same", "different" or "needs_model" (a turn the recording could not answer)."""
        if self.same:
            return "same"
        return "needs_model" if self.needs_model else "different"

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "same": self.same, "status": self.status,
                "first_difference": self.first_difference, "model_calls": self.model_calls,
                "turns": [t.to_json() for t in self.turns]}
