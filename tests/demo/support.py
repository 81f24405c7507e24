"""The demo agent as the demo tests drive it: Ana with the offline provider and a fake clock.

`FALAI["AGENT"] = "demo.support.current_agent"`, `FALAI["SENDER"] = "demo.support.record_send"`.
"""

from __future__ import annotations

from typing import Any

from falai_django.providers.offline import OfflineProvider
from falai_django.testing import fake_clock
from project.agents import build_ana

START = "2026-09-20T10:00:00Z"
# The whole triage, from "oi" to the thank-you, as a customer types it.
TRIAGE = ["oi", "João", "Acme", "umas 30 pessoas", "sim", "valeu!"]
THANKS = "Agradeça e diga que um vendedor continua daqui."

_current: dict[str, Any] = {}
sent: list[Any] = []


def reset() -> Any:
    clock = fake_clock(START)
    _current["clock"] = clock
    _current["agent"] = build_ana(provider=OfflineProvider(language="pt"), clock=clock)
    sent.clear()
    return _current["agent"]


def current_agent() -> Any:
    return _current.get("agent") or reset()


def clock() -> Any:
    return _current["clock"]


def record_send(message: Any) -> None:
    sent.append(message)
