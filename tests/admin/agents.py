"""The agent the admin tests drive: Ana asks for a name and a company, waits an hour, says goodbye.

    quem   (collect nome, empresa)  ->  espera (wait 1h: a wake)  ->  tchau (say)

`retoma` is a silence flow (2h after the assistant last spoke), so a human's reply — fed to the
engine as the outbound event `human_reply` — re-arms its wake. The provider is scripted: the
understand call reads "meu nome é X" and "da empresa Y" from the customer's message, and every
speak call asks the same question; `provider().calls` counts what was spent.
"""

from __future__ import annotations

import re
from typing import Any

from falai_django import falai
from falai_django.testing import fake_clock, mock_provider

NAME = re.compile(r"meu nome (?:é|e) (\w+)", re.IGNORECASE)
COMPANY = re.compile(r"da empresa (\w+)", re.IGNORECASE)
ENDLESS = 10_000
QUESTION = "Oi! Com quem eu falo, e de qual empresa?"


def fields_in(prompt: str | None) -> dict[str, Any]:
    """The fields a customer's words give away (the prompt quotes them; the latest wins)."""
    fields: dict[str, Any] = {}
    if names := NAME.findall(prompt or ""):
        fields["nome"] = names[-1]
    if companies := COMPANY.findall(prompt or ""):
        fields["empresa"] = companies[-1]
    return fields


def understand_reply(request: Any) -> dict[str, Any]:
    fields = fields_in(request.prompt)
    return {"fields": fields} if fields else {}


def speak_reply(request: Any) -> dict[str, Any]:
    return {"message": QUESTION, **fields_in(request.prompt)}


def ana(clock: Any = None) -> Any:
    f = falai().fields({
        "nome": {"type": "string", "ask": "Pergunte o nome da pessoa."},
        "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
    })
    return f.agent(
        name="Ana",
        provider=mock_provider(understand=[understand_reply] * ENDLESS, speak=[speak_reply] * ENDLESS),
        clock=clock,
        events={"human_reply": f.event(direction="outbound")},
        flows=[
            f.flow({
                "id": "triagem",
                "name": "Triagem",
                "on": [{"message": []}],
                "steps": [
                    {"id": "quem", "prompt": "Descubra quem é e de onde fala.", "collect": ["nome", "empresa"]},
                    {"id": "espera", "wait": "1h"},
                    {"id": "tchau", "say": "Obrigado, {{data.nome}}! Até logo."},
                ],
            }),
            f.flow({
                "id": "retoma",
                "name": "Retoma",
                "on": [{"silence": "2h"}],
                "steps": [{"id": "oi", "say": "Ainda por aí?"}],
            }),
        ],
    )


_current: dict[str, Any] = {}


def reset() -> Any:
    _current["clock"] = fake_clock("2026-09-20T10:00:00Z")
    _current["agent"] = ana(clock=_current["clock"])
    return _current["agent"]


def current_agent() -> Any:
    return _current["agent"]


def provider() -> Any:
    return _current["agent"].provider


def clock() -> Any:
    return _current["clock"]
