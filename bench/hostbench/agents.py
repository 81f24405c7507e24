"""The bench agent: Ana's triage with a zero-latency scripted provider that never runs dry.

`FALAI_BENCH_WAKE_DELAY_MS` (> 0; bench/wakes.py's `--wake-delay-ms`) turns the step after the
wait into a model-phrased goodbye (a `prompt` step, so a wake turn makes one speak call) and makes
that call take that long, as a real model would; 0 (the default) keeps the verbatim `say`.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from falai_django import falai
from falai_django.llm.types import BaseProvider, GenerateOutput, StreamChunk

NAME = re.compile(r"meu nome (?:é|e) (\w+)", re.IGNORECASE)
WAKE_MARK = "[bench-wake-step]"


def wake_delay_s() -> float:
    try:
        return max(0.0, float(os.environ.get("FALAI_BENCH_WAKE_DELAY_MS", "0") or 0)) / 1000
    except ValueError:
        return 0.0


class ZeroLatencyProvider(BaseProvider):
    """Answers at once: understand picks up a name, speak asks for it (or greets)."""

    name = "zero"

    def __init__(self, wake_delay_s: float = 0.0) -> None:
        self.wake_delay_s = wake_delay_s

    def _reply(self, request) -> dict[str, Any]:
        if self.wake_delay_s and WAKE_MARK in f"{request.prompt or ''}{request.system or ''}":
            time.sleep(self.wake_delay_s)  # the model call of a wake turn
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
    delay = wake_delay_s()
    goodbye = ({"id": "tchau", "prompt": f"Agradeça pelo nome e se despeça. {WAKE_MARK}"} if delay
               else {"id": "tchau", "say": "Obrigado, {{data.nome}}! Até logo."})
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome da pessoa."}})
    return f.agent(
        name="Ana",
        provider=ZeroLatencyProvider(delay),
        flows=[
            f.flow({
                "id": "triagem",
                "name": "Triagem",
                "on": [{"message": []}],
                "steps": [
                    {"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"], "maxAsks": 1000000},
                    {"id": "espera", "wait": "1h"},
                    goodbye,
                ],
            })
        ],
    )


agent = _build()


def null_sender(message) -> None:
    return None
