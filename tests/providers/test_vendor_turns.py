"""A whole streamed turn through the engine on each vendor provider (real SDK, fake server): the
understand call and the streamed speak call reach the wire in that vendor's dialect, and the
customer sees the `message` field arrive as deltas."""

from __future__ import annotations

import json

import pytest

from falai_django import falai
from falai_django.testing import fake_clock

from . import fake_vendors as fv
from .vendor_kit import flavors

FLAVORS = {f.id: f for f in flavors()}
MESSAGE = "Oi! Aqui é a Ana, da loja. Posso te ajudar com preços, prazos e entregas."


def _is_speak(recorded: fv.Recorded) -> bool:
    # the speak envelope is the schema with a "message" string; the understand one has none
    # (in text.format / response_format, or written into the system prompt as JSON text)
    return '"properties": {"message"' in json.dumps(recorded.body).replace('\\"', '"')


@pytest.mark.parametrize("flavor_id", ["openai", "compatible-json_object", "anthropic"])
def test_turn_stream_over_each_vendor(flavor_id):
    flavor = FLAVORS[flavor_id]

    def respond(recorded: fv.Recorded) -> fv.Reply:
        if _is_speak(recorded):
            return fv.Reply(events=flavor.text(json.dumps({"message": MESSAGE}, ensure_ascii=False), 15))
        return fv.Reply(events=flavor.text(json.dumps({"flows": {"atendimento": 100}})))

    server = fv.FakeVendor(responder=respond)
    provider = flavor.make(server, retries=0)
    f = falai().fields({})
    agent = f.agent(
        name="Ana", provider=provider, clock=fake_clock("2026-09-20T10:00:00Z"),
        flows=[f.flow({"id": "atendimento", "name": "Atendimento", "on": [{"message": []}],
                       "steps": [{"id": "responder", "prompt": "Responda com educação."}]})],
    )
    try:
        items = list(agent.turn_stream(session_id="5511999990000", message="oi", id="m1", session=None,
                                       history=[]))
    finally:
        provider.close()
        server.close()
    deltas = [item["delta"] for item in items if "delta" in item]
    assert "".join(deltas) == MESSAGE and len([d for d in deltas if d]) >= 5
    assert any(_is_speak(r) for r in server.requests)
    assert all(r.path == flavor.endpoint for r in server.requests)
    result = items[-1]["result"]
    assert [m.text for m in result.messages] == [MESSAGE]
