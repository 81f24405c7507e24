"""The tiny agents the host tests drive, with a scripted zero-latency provider.

`ana()` asks for a name, waits an hour, then says goodbye:

    quem   (collect nome)  ->  espera (wait 1h: a wake)  ->  tchau (say)
"""

from __future__ import annotations

import re
from typing import Any

from falai_django import falai
from falai_django.testing import fake_clock, mock_provider

NAME = re.compile(r"meu nome (?:é|e) (\w+)", re.IGNORECASE)
ENDLESS = 100_000  # scripted replies: the list never runs dry in race tests


def understand_reply(request: Any) -> dict[str, Any]:
    found = NAME.findall(request.prompt or "")
    return {"fields": {"nome": found[-1]}} if found else {}


def speak_reply(request: Any) -> dict[str, Any]:
    found = NAME.findall(request.prompt or "")
    return {"message": f"Prazer, {found[-1]}!"} if found else {"message": "Oi! Com quem eu falo?"}


def scripted_provider(understand=None, speak=None):
    return mock_provider(
        understand=understand if understand is not None else [understand_reply] * ENDLESS,
        speak=speak if speak is not None else [speak_reply] * ENDLESS,
    )


def ana(provider=None, clock=None):
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome da pessoa."}})
    return f.agent(
        name="Ana",
        provider=provider or scripted_provider(),
        clock=clock,
        flows=[
            f.flow({
                "id": "triagem",
                "name": "Triagem",
                "on": [{"message": []}],
                "steps": [
                    {"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"]},
                    {"id": "espera", "wait": "1h"},
                    {"id": "tchau", "say": "Obrigado, {{data.nome}}! Até logo."},
                ],
            })
        ],
    )


_current: dict[str, Any] = {}


def reset(**kwargs: Any) -> Any:
    """A fresh agent (and clock) for the next test."""
    clock = kwargs.pop("clock", None) or fake_clock("2026-09-20T10:00:00Z")
    _current["clock"] = clock
    _current["agent"] = ana(clock=clock, **kwargs)
    return _current["agent"]


def use(agent: Any) -> Any:
    _current["agent"] = agent
    return agent


def current_agent() -> Any:
    return _current["agent"]


def clock() -> Any:
    return _current["clock"]


_cluster_agent: list[Any] = []


def cluster_agent() -> Any:
    """The agent a real django-q2 worker runs (wall clock; built once per process)."""
    if not _cluster_agent:
        _cluster_agent.append(ana())
    return _cluster_agent[0]
