"""Streaming (persistence-and-LLM note §4) and the async twins: deltas while the speaker
writes, then one authoritative result — the same result `turn()` gives."""

from __future__ import annotations

import asyncio

import pytest
from scenarios.kit import make_agent, triage_flow

from falai_django import ProviderError

SPEAK = {"message": "Oi! Com quem eu falo, e de qual empresa?", "nome": None, "empresa": None}


def build(**kw):
    return make_agent([triage_flow()], understand=[{"fields": {}}], speak=[dict(SPEAK)], **kw)


def test_stream_yields_real_deltas_then_the_result():
    agent, provider, _ = build()
    chunks = list(agent.turn_stream(session_id="s1", message="oi", id="m1"))
    deltas = [c["delta"] for c in chunks[:-1]]
    assert len(deltas) > 3 and all(set(c) == {"delta"} for c in chunks[:-1])
    assert "".join(deltas) == SPEAK["message"]
    done = chunks[-1]
    assert done["done"] is True
    plain_agent, _, _ = build()
    plain = plain_agent.turn(session_id="s1", message="oi", id="m1")
    assert done["result"].to_json() == plain.to_json()


def test_stream_without_a_speaker_yields_only_the_result():
    agent, provider, _ = make_agent([triage_flow()], idle="silent")
    chunks = list(agent.turn_stream(session_id="s1", message="oi", id="m1", silenced="humano"))
    assert len(chunks) == 1 and chunks[0]["done"] is True


def test_stream_understand_failure_raises_before_any_chunk():
    agent, _, _ = make_agent([triage_flow()], understand=[ProviderError("mock", "auth", "no")])
    stream = agent.turn_stream(session_id="s1", message="oi", id="m1")
    with pytest.raises(ProviderError):
        next(stream)


def test_stream_speak_failure_still_ends_with_a_deferred_result():
    agent, _, _ = make_agent([triage_flow()], understand=[{"fields": {}}],
                             speak=[ProviderError("mock", "overload", "busy")])
    chunks = list(agent.turn_stream(session_id="s1", message="oi", id="m1"))
    (done,) = chunks
    assert done["result"].outcomes[-1].code == "provider-unavailable"
    assert done["result"].outcomes[-1].status == "deferred"


def test_aturn_and_aturn_stream():
    agent, _, _ = build()
    r = asyncio.run(agent.aturn(session_id="s1", message="oi", id="m1"))
    assert [m.text for m in r.messages] == [SPEAK["message"]]

    agent2, _, _ = build()

    async def collect():
        return [c async for c in agent2.aturn_stream(session_id="s1", message="oi", id="m1")]

    chunks = asyncio.run(collect())
    assert "".join(c.get("delta", "") for c in chunks) == SPEAK["message"]
    assert chunks[-1]["result"].to_json() == r.to_json()


def test_aturn_runs_async_actions_on_the_callers_loop():
    seen = {}

    async def notify(params, ctx):
        seen["loop"] = asyncio.get_running_loop()
        await asyncio.sleep(0)
        return {"ok": True, "detail": "sent"}

    flow = {"id": "f", "name": "F", "steps": [{"id": "n", "do": "notify"}]}
    agent, _, _ = make_agent([flow], fields={}, actions={"notify": {"parameters": {}, "run": notify}})

    async def main():
        r = await agent.aturn(session_id="s1", start={"flow": "f", "key": "k"})
        return r, asyncio.get_running_loop()

    r, loop = asyncio.run(main())
    assert seen["loop"] is loop
    assert [(o.status, o.detail) for o in r.outcomes] == [("ok", "sent")]


def test_sync_turn_runs_async_actions_too():
    async def notify(params, ctx):
        return {"ok": True}

    flow = {"id": "f", "name": "F", "steps": [{"id": "n", "do": "notify"}]}
    agent, _, _ = make_agent([flow], fields={}, actions={"notify": {"parameters": {}, "run": notify}})
    r = agent.turn(session_id="s1", start={"flow": "f", "key": "k"})
    assert [o.status for o in r.outcomes] == ["ok"]
