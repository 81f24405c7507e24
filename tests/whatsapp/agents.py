"""The agent the WhatsApp tests drive: Ana with a scripted zero-latency provider and a fake clock.

    quem (collect nome) -> espera (wait 25h: a wake) -> lembra (say) -> volta (do whatsapp_template)
"""

from __future__ import annotations

import re
from typing import Any

from falai_django import falai
from falai_django.channels import whatsapp
from falai_django.testing import fake_clock, mock_provider

NAME = re.compile(r"meu nome (?:é|e) (\w+)", re.IGNORECASE)
ENDLESS = 10_000
START = "2026-09-20T10:00:00Z"


def understand_reply(request: Any) -> dict[str, Any]:
    found = NAME.findall(request.prompt or "")
    return {"fields": {"nome": found[-1]}} if found else {}


def speak_reply(request: Any) -> dict[str, Any]:
    found = NAME.findall(request.prompt or "")
    return {"message": f"Prazer, {found[-1]}!"} if found else {"message": "Oi! Com quem eu falo?"}


def ana(clock: Any) -> Any:
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome da pessoa."}})
    return f.agent(
        name="Ana",
        provider=mock_provider(understand=[understand_reply] * ENDLESS, speak=[speak_reply] * ENDLESS),
        clock=clock,
        actions={whatsapp.TEMPLATE_ACTION: f.action(**whatsapp.template_action())},
        flows=[f.flow({
            "id": "triagem",
            "name": "Triagem",
            "on": [{"message": []}],
            "steps": [
                {"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"]},
                {"id": "espera", "wait": "25h"},
                {"id": "lembra", "say": "Ainda por aí, {{data.nome}}?"},
                {"id": "volta", "do": whatsapp.TEMPLATE_ACTION,
                 "with": {"name": "retomada", "language": "pt_BR", "body": ["{{data.nome}}"]}},
            ],
        }), f.flow({
            "id": "campanha",
            "name": "Campanha",
            "steps": [{"id": "convite", "do": whatsapp.TEMPLATE_ACTION, "with": {"name": "convite"}}],
        })],
    )


_current: dict[str, Any] = {}


def reset() -> Any:
    _current["clock"] = fake_clock(START)
    _current["agent"] = ana(_current["clock"])
    return _current["agent"]


def current_agent() -> Any:
    return _current["agent"]


def clock() -> Any:
    return _current["clock"]
