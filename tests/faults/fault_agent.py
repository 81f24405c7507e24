"""The agent, provider, clock and channel of the fault-test subprocesses (env-configured).

- Clock: the wall clock sped up `FAULT_CLOCK_SPEED` times from `FAULT_CLOCK_EPOCH` (the same in
  every process), so a "5m" wait, the speak-retry ladder (1m … 6h) and wakes pass in real
  seconds, and every process agrees on what is due.
- Provider: scripted from the prompt, failing `FAULT_FAIL_RATE` of calls at random with a
  retryable `ProviderError` (network), understand and speak alike.
- Flows (`FAULT_FLOW`): "chat" answers every message (a staying talk step); "wake" asks the
  name, waits 5m (a durable wake), runs a slow action, then says goodbye.
- Channel (`channel_send`): appends `begin` before and `delivered` after a slow send
  (`FAULT_SEND_DELAY`) to the JSONL file `FAULT_SENT_LOG`; a process killed in between never
  delivered. The channel drops a repeated idempotency key, as a real one does.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from falai_django import ProviderError, falai
from falai_django.llm.types import BaseProvider, GenerateInput, GenerateOutput, ProviderCapabilities

EPOCH = float(os.environ.get("FAULT_CLOCK_EPOCH", "0") or time.time())
SPEED = float(os.environ.get("FAULT_CLOCK_SPEED", "1"))
FAIL_RATE = float(os.environ.get("FAULT_FAIL_RATE", "0"))
SEND_DELAY = float(os.environ.get("FAULT_SEND_DELAY", "0"))
ACTION_DELAY = float(os.environ.get("FAULT_ACTION_DELAY", "0"))
SENT_LOG = os.environ.get("FAULT_SENT_LOG", "")
FLOW = os.environ.get("FAULT_FLOW", "chat")
NAME = re.compile(r"meu nome (?:é|e) (\w+)", re.IGNORECASE)
_rng = random.Random(f"{os.getpid()}:{time.time_ns()}")
_lock = threading.Lock()


def fast_clock() -> datetime:
    now = time.time()
    return datetime.fromtimestamp(EPOCH + (now - EPOCH) * SPEED, tz=UTC)


class FlakyProvider(BaseProvider):
    name = "flaky"
    capabilities = ProviderCapabilities(supports_prompt_caching=False)

    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        with _lock:
            fail = _rng.random() < FAIL_RATE
        if fail:
            raise ProviderError("flaky", "network", "the model provider is unreachable (injected)")
        prompt = input.prompt or ""
        names = NAME.findall(prompt)
        if input.parameters.schema_name == "understand":
            reply: dict[str, Any] = {"fields": {"nome": names[-1]}} if names else {}
            return GenerateOutput(message=json.dumps(reply), structured=reply)
        quoted = re.findall(r"#(\d+)", prompt)
        text = f"Prazer, {names[-1]}!" if names else f"Resposta {quoted[-1] if quoted else ''}".strip()
        reply = {"message": text}
        return GenerateOutput(message=text, structured=reply)


def _slow_mark(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _append({"event": "action", "key": ctx.key, "pid": os.getpid()})
    if ACTION_DELAY:
        time.sleep(ACTION_DELAY)
    return {"ok": True}


def build() -> Any:
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome da pessoa."}})
    if FLOW == "wake":
        steps = [
            {"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"]},
            {"id": "espera", "wait": "5m"},
            {"id": "marca", "do": "marca"},
            {"id": "tchau", "say": "Obrigado, {{data.nome}}! Até logo."},
        ]
        flow = {"id": "triagem", "name": "Triagem", "on": [{"message": []}], "steps": steps}
    else:
        flow = {"id": "conversa", "name": "Conversa", "on": [{"message": []}], "onEnd": "stay",
                "steps": [{"id": "responde", "prompt": "Responda ao cliente."}]}
    return f.agent(name="Ana", provider=FlakyProvider(), flows=[f.flow(flow)], clock=fast_clock,
                   actions={"marca": {"parameters": {}, "run": _slow_mark}})


agent = build()


def _append(record: dict[str, Any]) -> None:
    if not SENT_LOG:
        return
    line = json.dumps(record, ensure_ascii=False) + "\n"
    with _lock:
        fd = os.open(SENT_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def channel_send(message: Any) -> str:
    _append({"event": "begin", "key": message.idempotency_key, "sid": message.session_id, "pid": os.getpid()})
    if SEND_DELAY:
        time.sleep(SEND_DELAY)
    _append({"event": "delivered", "key": message.idempotency_key, "sid": message.session_id,
             "text": message.text, "pid": os.getpid()})
    return f"ch-{message.idempotency_key[:8]}"


def agent_time(seconds_from_now: float = 0.0) -> datetime:
    return fast_clock() + timedelta(seconds=seconds_from_now * SPEED)
