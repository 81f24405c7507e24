"""Random agents and random inputs for the turn fuzzer.

Everything here is deterministic given its seed, so a replay of the same input against the
same session (the host's conflict path) can be checked for identical keys:

- `FuzzProvider` answers every call from the request's own JSON schema with values drawn
  from `Random(f"{seed}:{call number}")` — valid ones mostly, wrong types, unknown keys,
  empty messages and `ProviderError`s sometimes;
- the actions decide what to do from a hash of `ctx.key`;
- `flows()` builds flows from every step kind of the authoring note (§4), with triggers of
  every kind (§5), predicates, targets of every form (§4.2), `onEnd`, anchors, `clearOnStart`.
"""

from __future__ import annotations

import json
import random
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from falai_django import ProviderError, falai
from falai_django.llm.types import BaseProvider, GenerateInput, GenerateOutput, ProviderCapabilities

# ------------------------------------------------------------------------------------ registries

FIELDS: dict[str, Any] = {
    "nome": {"type": "string", "ask": "Pergunte o nome."},
    "idade": {"type": "integer", "description": "anos"},
    "valor": {"type": "number"},
    "ok": {"type": "boolean", "ask": "Confirme."},
    "porte": {"type": "string", "enum": ["p", "m", "g"]},
    "nota": {"type": "integer", "enum": [1, 2, 3]},
    "cidade": {"type": "string", "extract": "asked"},
    "quer mais": {"type": "boolean", "extract": "anywhere"},  # a slug that needs an alias
}
SLUGS = list(FIELDS)
EVENTS: dict[str, Any] = {"pago": {"direction": "inbound"}, "enviado": {"direction": "outbound"}, "visita": {}}
EVENT_NAMES = list(EVENTS)
FLOW_IDS = ["f0", "f1", "f2"]
GONE_FLOW = "sumiu"


def _digest(*parts: Any) -> int:
    return zlib.crc32(json.dumps(parts, sort_keys=True, default=str).encode())


def _act(behaviour: str):
    def run(params: dict[str, Any], ctx: Any) -> Any:
        choice = behaviour
        if behaviour == "flaky":
            choice = ["ok", "skip", "fail", "boom", "defer", "spoke"][_digest(ctx.key) % 6]
        if choice == "ok":
            return {"ok": True, "detail": f"feito {params.get('nota', '')}".strip()}
        if choice == "spoke":
            return {"ok": True, "spoke": True}
        if choice == "skip":
            return {"skipped": "nada a fazer"}
        if choice == "fail":
            return {"failed": "o sistema recusou"}
        if choice == "boom":
            raise RuntimeError("action exploded")
        if choice == "defer":
            return {"defer": "1h", "detail": "tentar depois"}
        if choice == "baddefer":
            return {"defer": "daqui a pouco", "detail": "?"}
        if choice == "set":
            ctx.set({"nome": "Setado", "valor": 7})
            return {"ok": True}
        return None  # a handler that returns nothing

    return run


ACTION_BEHAVIOURS = ["ok", "spoke", "skip", "fail", "boom", "defer", "baddefer", "set", "flaky", "none"]
ACTIONS: dict[str, Any] = {
    name: {"parameters": {"nota": {"type": "string", "optional": True}}, "run": _act(name)}
    for name in ACTION_BEHAVIOURS
}
CONDITIONS: dict[str, Any] = {
    "vip": {"check": lambda ctx, arg: bool(isinstance(ctx.context, dict) and ctx.context.get("vip"))},
}


def _tool(args: Any, ctx: Any) -> Any:
    mode = _digest(ctx_key(ctx), args) % 3
    if mode == 0:
        return {"value": {"preco": 10}, "data": {"valor": 10}}
    if mode == 1:
        raise ValueError("tool broke")
    return "texto"


def ctx_key(ctx: Any) -> str:
    return str(getattr(ctx, "key", "") or "")


TOOLS = [{"id": "buscar", "description": "Busca preços.",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}, "handler": _tool}]


def business_hours(at: datetime, ctx: Any = None) -> datetime:
    """Snap forward to 09:00–18:00 UTC on any day (never backwards)."""
    if 9 <= at.hour < 18:
        return at
    day = at if at.hour < 9 else at + timedelta(days=1)
    return day.replace(hour=9, minute=0, second=0, microsecond=0)


# ------------------------------------------------------------------------------------ provider

PROVIDER_KINDS = ["timeout", "network", "overload", "rate", "quota", "auth", "model", "context", "content",
                  "invalid", "unknown", "aborted", "entitlement"]


class FuzzProvider(BaseProvider):
    """Answers from the request's JSON schema; deterministic per (seed, call number)."""

    name = "fuzz"
    capabilities = ProviderCapabilities(supports_prompt_caching=False)

    def __init__(self, failure_rate: float = 0.1, junk_rate: float = 0.15) -> None:
        self.failure_rate = failure_rate
        self.junk_rate = junk_rate
        self.seed = "0"
        self.calls = 0
        self.log: list[str] = []

    def reset(self, seed: str) -> None:
        self.seed = seed
        self.calls = 0

    def _rng(self) -> random.Random:
        self.calls += 1
        return random.Random(f"{self.seed}:{self.calls}")

    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        rng = self._rng()
        name = input.parameters.schema_name or "summary"
        self.log.append(name)
        if rng.random() < self.failure_rate:
            kind = rng.choice(PROVIDER_KINDS)
            raise ProviderError("fuzz", kind, f"fuzz {kind}", status=rng.choice([None, 429, 500, 503]),
                                reset_at_ms=rng.choice([None, 1_900_000_000_000]),
                                should_retry=rng.choice([None, None, True, False]))
        if rng.random() < 0.03:
            raise RuntimeError("an SDK error that is not a ProviderError")
        schema = input.parameters.json_schema or {}
        if not schema:
            return GenerateOutput(message="resumo da conversa")
        reply = self._value(rng, schema, depth=0)
        if rng.random() < 0.03:
            return GenerateOutput(message="isto não é JSON {", structured=None)
        if isinstance(reply, dict) and name == "speak" and input.tools and rng.random() < 0.2:
            reply = {"message": "", "toolCalls": [{"toolName": rng.choice(["buscar", "nada"]),
                                                   "arguments": {"q": "x"}}]}
        if not isinstance(reply, dict):
            reply = {"message": str(reply)}
        message = reply.get("message") if isinstance(reply.get("message"), str) else json.dumps(reply)
        return GenerateOutput(message=message, structured=reply)

    def _value(self, rng: random.Random, schema: dict[str, Any], depth: int) -> Any:
        if rng.random() < self.junk_rate and depth > 0:
            return rng.choice([None, "", "lixo", 42, 3.5, True, [], {"x": 1}, "sim", "1,5", "NaN"])
        types = schema.get("type")
        types = types if isinstance(types, list) else [types]
        if "object" in types or "properties" in schema:
            out = {}
            for key, sub in (schema.get("properties") or {}).items():
                if depth == 0 and key == "message":
                    out[key] = rng.choice(["Oi! Tudo bem?", "Qual o seu nome?", "Certo, anotado.", "", None]
                                          if rng.random() < 0.1 else ["Oi! Tudo bem?", "Qual o seu nome?"])
                elif depth == 0 and rng.random() < 0.4:
                    out[key] = None  # a field the model left out
                elif rng.random() < 0.85:
                    out[key] = self._value(rng, sub, depth + 1)
            if rng.random() < 0.05:
                out["inventado"] = "?"
            return out
        if "enum" in schema and rng.random() < 0.8:
            return rng.choice(list(schema["enum"]))
        concrete = [t for t in types if t != "null"]
        if "null" in types and rng.random() < 0.3 or not concrete:
            return None
        kind = rng.choice(concrete)
        if kind == "string":
            return rng.choice(["Oi! Tudo bem?", "Qual o seu nome?", "", "João", "p", "sim", "m", "12", "Certo."])
        if kind == "integer":
            return rng.choice([0, 1, 2, 3, 40, 55, 90, 100, 150, -3])
        if kind == "number":
            return rng.choice([0, 1.5, 99.9, -2, 1e9])
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array":
            return [self._value(rng, schema.get("items") or {"type": "string"}, depth + 1)]
        return None


# ------------------------------------------------------------------------------------ flows

PREDICATES = [
    {"equals": {"porte": "p"}}, {"equals": {"ok": True}}, {"known": ["nome"]}, {"known": ["nome", "idade"]},
    {"silenced": True}, {"silenced": False}, {"vip": True}, {}, {"equals": {"nota": 2}, "known": ["valor"]},
]


@st.composite
def targets(draw, step_ids: list[str], allow_none: bool = True) -> Any:
    options = ["end", "step", "clear", "flow"] + (["none"] * 3 if allow_none else [])
    kind = draw(st.sampled_from(options))
    if kind == "none":
        return None
    if kind == "end":
        return "end"
    if kind == "step":
        return draw(st.sampled_from(step_ids))
    if kind == "clear":
        return {"step": draw(st.sampled_from(step_ids)),
                "clear": draw(st.lists(st.sampled_from(SLUGS), max_size=2, unique=True))}
    return {"flow": draw(st.sampled_from(FLOW_IDS + [GONE_FLOW]))}


@st.composite
def steps(draw, n: int) -> list[dict[str, Any]]:
    ids = [f"s{i}" for i in range(n)]
    out = []
    for sid in ids:
        kind = draw(st.sampled_from(["talk", "talk", "say", "do", "wait", "waitEvent", "if"]))
        step: dict[str, Any] = {"id": sid}
        then = draw(targets(ids))
        if kind == "talk":
            collect = draw(st.lists(st.sampled_from(SLUGS), max_size=3, unique=True))
            if collect:
                step["collect"] = collect
                if draw(st.booleans()):
                    step["prompt"] = "Pergunte com calma."
                if draw(st.integers(0, 3)) == 0:
                    step["question"] = "Qual é o seu {{data.nome}}?"
                if draw(st.booleans()):
                    step["maxAsks"] = draw(st.integers(1, 3))
            else:
                step["prompt"] = "Responda {{context.tom}} e {{input.origem}}."
            branches = []
            for _ in range(draw(st.integers(0, 2))):
                if draw(st.booleans()):
                    branches.append({"when": "o cliente quer sair", "then": draw(targets(ids, allow_none=False))})
                else:
                    branches.append({"if": draw(st.sampled_from(PREDICATES)),
                                     "then": draw(targets(ids, allow_none=False))})
            if branches:
                step["branches"] = branches
            if draw(st.integers(0, 4)) == 0:
                step["tools"] = ["buscar"]
        elif kind == "say":
            step["say"] = draw(st.sampled_from(["Oi {{data.nome}}!", "Até logo.", "Valor: {{data.valor}}",
                                                "{{input.origem}}"]))
            if draw(st.booleans()):
                step["once"] = True
            if draw(st.integers(0, 4)) == 0:
                step["media"] = {"slug": "catalogo"}
        elif kind == "do":
            step["do"] = draw(st.sampled_from(ACTION_BEHAVIOURS))
            if draw(st.booleans()):
                step["with"] = {"nota": "{{data.nome}}"}
            if draw(st.booleans()):
                step["onFail"] = draw(targets(ids, allow_none=False))
        elif kind == "wait":
            step["wait"] = draw(st.sampled_from(["3s", "10s", "11s", "1h", "1d", "0.5h"]))
            if draw(st.booleans()):
                step["else"] = draw(targets(ids, allow_none=False))
                if draw(st.booleans()):
                    step["branches"] = [{"if": draw(st.sampled_from(PREDICATES)),
                                         "then": draw(targets(ids, allow_none=False))}]
            if draw(st.integers(0, 3)) == 0:
                step["businessHours"] = True
        elif kind == "waitEvent":
            wait: dict[str, Any] = {"event": draw(st.sampled_from(EVENT_NAMES))}
            if draw(st.booleans()):
                wait["upTo"] = draw(st.sampled_from(["1h", "2d"]))
            step["wait"] = wait
            if draw(st.booleans()):
                step["else"] = draw(targets(ids, allow_none=False))
        else:
            step["if"] = draw(st.sampled_from(PREDICATES))
            step["else"] = draw(targets(ids, allow_none=False))  # a backward `then` needs one
        if then is not None:
            step["then"] = then
        out.append(step)
    return out


@st.composite
def triggers(draw) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["catchall", "message", "mention", "mention-code", "silence", "event"]))
        if kind == "catchall":
            trig: dict[str, Any] = {"message": []}
        elif kind == "message":
            trig = {"message": draw(st.sampled_from([["preço"], ["preço", "!spam"], ["suporte", "ajuda"]]))}
        elif kind == "mention":
            trig = {"mention": ["reclamação"]}
            if draw(st.booleans()):
                trig["extract"] = {"motivo": {"type": "string"}, "pedido": {"type": "integer", "optional": True}}
        elif kind == "mention-code":
            trig = {"mention": [], "if": draw(st.sampled_from(PREDICATES[:7]))}
        elif kind == "silence":
            trig = {"silence": draw(st.sampled_from(["1h", "1d"]))}
            if draw(st.booleans()):
                trig["businessHours"] = True
        else:
            trig = {"event": draw(st.sampled_from(EVENT_NAMES))}
            if draw(st.booleans()):
                trig["after"] = draw(st.sampled_from(["1m", "2h"]))
            if draw(st.integers(0, 3)) == 0:
                trig["businessHours"] = True
        repeat = draw(st.sampled_from([None, None, "once", "always", {"cooldown": "1h"}]))
        if repeat is not None:
            trig["repeat"] = repeat
        if kind != "mention-code" and draw(st.integers(0, 4)) == 0:
            trig["if"] = draw(st.sampled_from(PREDICATES))
        out.append(trig)
    return out


@st.composite
def flows(draw) -> list[dict[str, Any]]:
    out = []
    for fid in FLOW_IDS[: draw(st.integers(1, len(FLOW_IDS)))]:
        n = draw(st.integers(1, 5))
        flow: dict[str, Any] = {"id": fid, "name": f"Fluxo {fid}", "description": "Atende {{context.tom}}.",
                                "on": draw(triggers()), "steps": draw(steps(n))}
        if draw(st.integers(0, 3)) == 0:
            flow["onEnd"] = draw(st.sampled_from(["end", "stay", "reset"]))
        if draw(st.integers(0, 4)) == 0:
            flow["anchor"] = draw(st.sampled_from(["session", "lead"]))
        if draw(st.integers(0, 4)) == 0:
            flow["clearOnStart"] = draw(st.lists(st.sampled_from(SLUGS), max_size=2, unique=True))
        if draw(st.integers(0, 5)) == 0:
            flow["while"] = draw(st.sampled_from(PREDICATES))
        if draw(st.integers(0, 4)) == 0:
            flow["collect"] = draw(st.lists(st.sampled_from(SLUGS), max_size=3, unique=True))
        out.append(flow)
    return out


def build_agent(flow_dicts: list[dict[str, Any]], provider: FuzzProvider, clock: Any, *, idle: Any,
                with_business_hours: bool, compaction: Any = None) -> Any:
    f = falai().fields(FIELDS)
    return f.agent(name="Ana", provider=provider, flows=flow_dicts, actions=ACTIONS, events=EVENTS,
                   conditions=CONDITIONS, tools=TOOLS, idle=idle, clock=clock,
                   business_hours=business_hours if with_business_hours else None, max_tool_loops=2,
                   compaction=compaction)


# ------------------------------------------------------------------------------------ inputs

TEXTS = ["oi", "quero saber o preço", "meu nome é João", "tenho 30 anos", "sim", "não", "reclamação!",
         "", "   ", "🙂 ação", "x" * 2000]
SILENCED = [None, None, None, None, "humano assumiu", {"reason": "janela fechada", "skip": True},
            {"reason": "só ouvindo", "understand": True}, {"reason": "pausa"}]
CLAIMS_HELD = {"held": {"f0:5511999990000:": "2026-09-19T00:00:00.000Z"}, "active": []}
CLAIMS_ACTIVE = {"held": {}, "active": ["f1:5511999990000", "f2:lead:1"]}
ADVANCES = [0, 1_000, 60_000, 3_600_000, 86_400_000, 3 * 86_400_000]


@st.composite
def inputs(draw, count: int) -> list[dict[str, Any]]:
    """`count` abstract inputs; wakes pick among what is scheduled at run time (by index)."""
    out = []
    for _ in range(count):
        kind = draw(st.sampled_from(["message"] * 4 + ["wake"] * 3 + ["event", "start"]))
        item: dict[str, Any] = {"kind": kind, "advance": draw(st.sampled_from(ADVANCES)),
                                "silenced": draw(st.sampled_from(SILENCED)),
                                "context": {"vip": draw(st.booleans()), "tom": "gentil"},
                                "anchors": draw(st.sampled_from([None, {"lead": {"key": "lead:1"}},
                                                                 {"lead": {"key": "lead:1",
                                                                           "lastInboundAt":
                                                                               "2026-09-20T12:00:00.000Z"}}])),
                                "claims": draw(st.sampled_from([None, None, None, CLAIMS_HELD, CLAIMS_ACTIVE]))}
        if kind == "message":
            item["text"] = draw(st.sampled_from(TEXTS))
            item["id"] = draw(st.sampled_from(["new", "new", "new", "repeat", "none"]))
            item["at"] = draw(st.sampled_from([None, None, "2026-09-20T10:00:00Z", "not a date"]))
        elif kind == "wake":
            item["pick"] = draw(st.integers(0, 50))
            item["which"] = draw(st.sampled_from(["scheduled"] * 4 + ["pending", "stale", "silence-stale"]))
        elif kind == "event":
            item["name"] = draw(st.sampled_from(EVENT_NAMES + ["desconhecido"]))
            item["key"] = draw(st.sampled_from(["new", "new", "repeat"]))
            item["payload"] = draw(st.sampled_from([None, {"origem": "site"}, {"origem": None}, [1, 2], "texto"]))
            item["hop"] = draw(st.sampled_from([0, 0, 4, 5]))
        else:
            item["flow"] = draw(st.sampled_from(FLOW_IDS + [GONE_FLOW]))
            item["key"] = draw(st.sampled_from(["new", "new", "repeat"]))
            item["input"] = draw(st.sampled_from([None, {"origem": "campanha"}]))
            item["hop"] = draw(st.sampled_from([0, 0, 4, 5]))
        out.append(item)
    return out


def aware_utc(at: Any) -> bool:
    return isinstance(at, datetime) and at.tzinfo is not None and at.utcoffset() == timedelta(0)


UTC_START = datetime(2026, 9, 20, 10, 0, tzinfo=UTC)
