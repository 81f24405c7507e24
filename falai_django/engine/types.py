"""The records passed between a turn's phases: the queued speaker, what the understand call
must judge and what it found, and what the speak call produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .flows import Flow, Step, Trigger
from .session import Run


@dataclass
class Talk:
    """The queued speaker talk step."""

    run: Run
    flow: Flow
    step: Step
    pending: list[str]
    fixed_follows: bool = False  # ruling 1: answer first, the fixed question follows verbatim


@dataclass
class Understanding:
    flows: dict[str, float] = field(default_factory=dict)
    mentions: dict[str, bool] = field(default_factory=dict)
    extract: dict[str, dict[str, Any]] = field(default_factory=dict)
    branches: dict[str, bool] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    asks: bool | None = None
    llm_calls: int = 0
    usage: dict[str, int] | None = None


@dataclass
class UnderstandRequest:
    text: str
    floor_run: Run | None
    floor_flow: Flow | None
    message_flows: list[Flow]
    mention_flows: list[tuple[Flow, Trigger]]
    branches: list[tuple[Run, Step, Any]]
    fields: list[str]
    judge_asks: bool


@dataclass
class Spoken:
    message: str
    fields: dict[str, Any]
    data: dict[str, Any]
    llm_calls: int
    usage: dict[str, int] | None = None


@dataclass
class Deferred:
    code: str
    retryable: bool
    llm_calls: int
    reset_at_ms: int | None = None
    usage: dict[str, int] | None = None


IDLE = "idle"  # the idle speaker marker returned by advance()
