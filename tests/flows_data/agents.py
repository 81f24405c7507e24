"""The agent the flows-as-data tests drive: the code agent supplies the registries and one code
flow; the database adds or replaces flows.

    code flow "triagem":  quem (collect nome) -> tchau (say)

The provider is the offline one (deterministic, no network), so a conversation's words are
known in advance: it asks for the missing field with its `ask` and takes a free-text answer.
"""

from __future__ import annotations

from typing import Any

from falai_django import falai
from falai_django.providers.offline import OfflineProvider

f = falai().fields({
    "nome": {"type": "string", "ask": "Ask for the person's name."},
    "empresa": {"type": "string", "ask": "Ask which company they are from."},
    "cidade": {"type": "string", "ask": "Ask which city they live in."},
})

TRIAGEM = {
    "id": "triagem",
    "name": "Triagem",
    "on": [{"message": []}],
    "steps": [
        {"id": "quem", "collect": ["nome"]},
        {"id": "tchau", "say": "Code flow: thanks, {{data.nome}}!"},
    ],
}


def notify(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"ok": True}


def build(clock: Any = None) -> Any:
    return f.agent(
        name="Ana",
        clock=clock,
        provider=OfflineProvider(language="en"),
        flows=[f.flow(TRIAGEM)],
        actions={"notify": f.action(parameters={"message": {"type": "string"}}, run=notify)},
        events={"pedido": f.event()},
        conditions={"vip": f.condition(lambda ctx, arg: False)},
        tools=[f.tool(id="lookup", handler=lambda args, ctx: {"value": "ok"})],
    )


_current: dict[str, Any] = {}


def current_agent() -> Any:
    """What `FALAI["AGENT"]` points at: one agent per test (see `reset`)."""
    if "agent" not in _current:
        _current["agent"] = build(_current.get("clock"))
    return _current["agent"]


def reset(clock: Any = None) -> Any:
    """A fresh agent (on `clock`, a `fake_clock`, when given)."""
    _current.clear()
    if clock is not None:
        _current["clock"] = clock
    return current_agent()


def spec(flow_id: str = "boas_vindas", **overrides: Any) -> dict[str, Any]:
    """A valid FlowSpec the tests start from (a message flow collecting `empresa`)."""
    out: dict[str, Any] = {
        "id": flow_id,
        "name": "Boas-vindas",
        "on": [{"message": []}],
        "steps": [
            {"id": "empresa", "kind": "collect", "collect": ["empresa"]},
            {"id": "fim", "kind": "say", "say": "Database flow: thanks, {{data.empresa}}!"},
        ],
    }
    out.update(overrides)
    return out
