"""The bench agent: Ana's triage with a zero-latency scripted provider that never runs dry."""

from __future__ import annotations

import re
from typing import Any

from falai_django import falai
from falai_django.providers.base import BaseProvider, GenerateOutput, StreamChunk

NAME = re.compile(r"meu nome (?:é|e) (\w+)", re.IGNORECASE)


class ZeroLatencyProvider(BaseProvider):
    """Answers at once: understand picks up a name, speak asks for it (or greets)."""

    name = "zero"

    def _reply(self, request) -> dict[str, Any]:
        found = NAME.findall(request.prompt or "")
        if request.parameters.schema_name == "understand":
            return {"fields": {"nome": found[-1]}} if found else {}
        return {"message": f"Prazer, {found[-1]}!" if found else "Oi! Com quem eu falo?"}

    def generate_message(self, request):
        import json

        reply = self._reply(request)
        return GenerateOutput(message=json.dumps(reply, ensure_ascii=False), structured=reply)

    def generate_message_stream(self, request):
        import json

        reply = self._reply(request)
        text = json.dumps(reply)
        yield StreamChunk(delta=text, accumulated=text, done=True, structured=reply)


def _build():
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome da pessoa."}})
    return f.agent(
        name="Ana",
        provider=ZeroLatencyProvider(),
        flows=[
            f.flow({
                "id": "triagem",
                "name": "Triagem",
                "on": [{"message": []}],
                "steps": [
                    {"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"], "maxAsks": 1000000},
                    {"id": "espera", "wait": "1h"},
                    {"id": "tchau", "say": "Obrigado, {{data.nome}}! Até logo."},
                ],
            })
        ],
    )


agent = _build()


def null_sender(message) -> None:
    return None
