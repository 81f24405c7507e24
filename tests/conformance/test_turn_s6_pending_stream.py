"""engine-turn.md §6 (pending_wakes), §1.1 / persistence note §4 (turn_stream, aturn)."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime

import pytest

from falai_django import ProviderError

from .turn_kit import DAY, HOUR, T0_MS, World

TRI = {"id": "tri", "name": "Triagem", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "Ajude."}],
       "onEnd": "stay"}
RET = {"id": "retomar", "name": "Retomar", "on": [{"silence": "24h"}],
       "steps": [{"id": "p", "prompt": "Retome."}]}
LEM = {"id": "lem", "name": "Lembrete", "steps": [{"id": "w", "wait": "2d"}, {"id": "a", "say": "x"}]}


def test_pending_wakes_parked_then_silence():
    w = World([TRI, RET, LEM], speak=[{"message": "Oi"}])
    w.turn(message="oi", id="m1")
    w.turn(start={"flow": "lem", "key": "k1"})
    before = copy.deepcopy(w.session.to_json())
    n = len(w.provider.calls)
    wakes = w.agent.pending_wakes(session=w.session, context=None)
    assert [(e.key, e.replaces) for e in wakes] == [
        (f"lem#k1:w:{T0_MS + 2 * DAY}", None), (f"silence:retomar:s1:{T0_MS}", None)]
    assert wakes[0].at == datetime(2026, 9, 22, 10, tzinfo=UTC)
    assert wakes[1].at == datetime(2026, 9, 21, 10, tzinfo=UTC)
    assert w.session.to_json() == before
    assert len(w.provider.calls) == n


def test_pending_wakes_in_the_past_are_returned():
    w = World([TRI, RET], speak=[{"message": "Oi"}])
    w.turn(message="oi", id="m1")
    w.clock.advance("10d")
    assert [e.key for e in w.agent.pending_wakes(session=w.session, context=None)] == [
        f"silence:retomar:s1:{T0_MS}"]


def test_pending_wakes_skips_silence_when_customer_wrote_last_or_claimed():
    w = World([TRI, RET], speak=[{"message": "Oi"}])
    w.turn(message="oi", id="m1")
    s = w.session
    s.last_user_at = "2026-09-20T11:00:00.000Z"
    assert w.agent.pending_wakes(session=s, context=None) == []
    w.turn(message="oi", id="m1b")  # not used further
    s2 = World([TRI, RET], speak=[{"message": "Oi"}])
    s2.turn(message="oi", id="m1")
    assert s2.agent.pending_wakes(session=s2.session, context=None,
                                  claims={"held": {"retomar:s1:": "2026-01-01T00:00:00.000Z"}, "active": []}) == []


def test_pending_wakes_judges_if_on_context():
    ret = dict(RET, on=[{"silence": "24h", "if": lambda ctx: bool(ctx.context and ctx.context.get("ok"))}])
    w = World([TRI, ret], speak=[{"message": "Oi"}])
    w.turn(message="oi", id="m1", context={"ok": True})
    assert w.agent.pending_wakes(session=w.session, context={"ok": False}) == []
    assert len(w.agent.pending_wakes(session=w.session, context={"ok": True})) == 1


def test_pending_wakes_anchor_dedupe():
    ret = dict(RET, anchor="lead")
    w = World([TRI, ret], speak=[{"message": "Oi"}])
    w.turn(message="oi", id="m1")
    held = {"held": {"retomar:lead:9:": "2026-01-01T00:00:00.000Z"}, "active": []}
    assert w.agent.pending_wakes(session=w.session, context=None, anchors={"lead": {"key": "lead:9"}},
                                 claims=held) == []
    assert len(w.agent.pending_wakes(session=w.session, context=None, claims=held)) == 1


def test_pending_wakes_includes_retry_and_after_and_event_wait():
    ev = {"id": "pg", "name": "Pg", "on": [{"event": "novo", "after": "1h"}], "steps": [{"id": "a", "say": "x"}]}
    w = World([ev])
    w.turn(event="novo", key="e1")
    assert [e.key for e in w.agent.pending_wakes(session=w.session, context=None)] == [
        f"pg#e1:start:{T0_MS + HOUR}"]


# --------------------------------------------------------------------------- streaming

CATCH = {"id": "bv", "name": "BV", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome"]}]}


def test_turn_stream_deltas_then_done():
    w = World([CATCH], speak=[{"message": "Olá, tudo bem? Qual é o seu nome?", "nome": None}])
    chunks = list(w.agent.turn_stream(session_id="s1", message="oi", id="m1"))
    assert chunks[-1]["done"] is True
    assert all("delta" in c for c in chunks[:-1])
    deltas = [c["delta"] for c in chunks[:-1]]
    assert len(deltas) >= 2
    assert "".join(deltas) == "Olá, tudo bem? Qual é o seu nome?"
    r = chunks[-1]["result"]
    assert [m.text for m in r.messages] == ["Olá, tudo bem? Qual é o seu nome?"]
    assert r.changed is True and r.llm_calls == 1
    assert sum(1 for c in chunks if c.get("done")) == 1


def test_turn_stream_without_speaker_only_final():
    w = World([{"id": "f", "name": "F", "steps": [{"id": "s", "say": "oi"}]}])
    chunks = list(w.agent.turn_stream(session_id="s1", start={"flow": "f", "key": "k"}))
    assert len(chunks) == 1 and chunks[0]["done"] is True
    assert [m.text for m in chunks[0]["result"].messages] == ["oi"]


def test_turn_stream_same_result_as_turn():
    w1 = World([CATCH], speak=[{"message": "Qual seu nome?", "nome": None}])
    w2 = World([CATCH], speak=[{"message": "Qual seu nome?", "nome": None}])
    r1 = w1.agent.turn(session_id="s1", message="oi", id="m1")
    r2 = list(w2.agent.turn_stream(session_id="s1", message="oi", id="m1"))[-1]["result"]
    assert r1.session.to_json() == r2.session.to_json()
    assert r1.messages == r2.messages and r1.outcomes == r2.outcomes


def test_turn_stream_understand_failure_raises_before_chunks():
    fl = [{"id": "a", "name": "A", "on": [{"message": ["a"]}], "steps": [{"id": "s", "prompt": "x"}]},
          {"id": "b", "name": "B", "on": [{"message": ["b"]}], "steps": [{"id": "s", "prompt": "x"}]}]
    w = World(fl, understand=[ProviderError("mock", "network", "x")])
    it = iter(w.agent.turn_stream(session_id="s1", message="oi", id="m1"))
    with pytest.raises(ProviderError):
        next(it)


def test_turn_stream_speak_failure_finishes_with_result():
    w = World([CATCH], speak=[ProviderError("mock", "network", "x")])
    chunks = list(w.agent.turn_stream(session_id="s1", message="oi", id="m1"))
    assert chunks[-1]["done"] is True
    r = chunks[-1]["result"]
    assert r.outcomes[-1].status == "deferred" and ":retry:" in r.schedule[0].key


def test_aturn_and_aturn_stream():
    w = World([CATCH], speak=[{"message": "Nome?", "nome": None}, {"message": "Nome?", "nome": None}])

    async def go():
        r = await w.agent.aturn(session_id="s1", message="oi", id="m1")
        chunks = []
        async for c in w.agent.aturn_stream(session_id="s2", message="oi", id="m1"):
            chunks.append(c)
        return r, chunks
    r, chunks = asyncio.run(go())
    assert [m.text for m in r.messages] == ["Nome?"]
    assert chunks[-1]["done"] is True and "".join(c.get("delta", "") for c in chunks[:-1]) == "Nome?"
    assert chunks[-1]["result"].session.id == "s2"


def test_turn_stream_tool_rounds_stream_each_round_and_no_say_deltas():
    fl = {"id": "f", "name": "F", "on": [{"message": []}],
          "steps": [{"id": "s", "say": "SAY-TEXT"}, {"id": "q", "prompt": "x"}]}
    tc = {"message": "Deixa eu ver", "toolCalls": [{"toolName": "t", "arguments": {}}]}
    w = World([fl], tools=[{"id": "t", "handler": lambda a, c: {"value": 1}}],
              speak=[tc, {"message": "Pronto, achei."}])
    chunks = list(w.agent.turn_stream(session_id="s1", message="oi", id="m1"))
    deltas = "".join(c["delta"] for c in chunks[:-1])
    assert "SAY-TEXT" not in deltas
    assert deltas == "Deixa eu ver" + "Pronto, achei."
    r = chunks[-1]["result"]
    assert [m.text for m in r.messages] == ["SAY-TEXT", "Pronto, achei."]
    assert r.llm_calls == 2


def test_aturn_stream_understand_failure_raises():
    fl = [{"id": "a", "name": "A", "on": [{"message": ["a"]}], "steps": [{"id": "s", "prompt": "x"}]},
          {"id": "b", "name": "B", "on": [{"message": ["b"]}], "steps": [{"id": "s", "prompt": "x"}]}]
    w = World(fl, understand=[ProviderError("mock", "network", "x")])

    async def go():
        async for _ in w.agent.aturn_stream(session_id="s1", message="oi", id="m1"):
            pass
    with pytest.raises(ProviderError):
        asyncio.run(go())


def test_scheduler_drives_a_two_day_follow_up():
    from falai_django.testing import MemoryScheduler
    ret = {"id": "retomar", "name": "Retomar", "on": [{"silence": "24h"}],
           "steps": [{"id": "p1", "prompt": "Retome."}, {"id": "w1", "wait": "1d", "else": "end"},
                     {"id": "p2", "prompt": "Última."}]}
    w = World([TRI, ret], speak=[{"message": "Oi"}, {"message": "Sumiu?"}, {"message": "Última chance"}])
    sched = MemoryScheduler()
    r = w.turn(message="oi", id="m1")
    for e in r.schedule:
        sched.add("s1", e)
    texts = []
    for _ in range(3):
        w.clock.advance("1d")
        for entry in sched.due(w.clock.now()):
            key = entry.key if hasattr(entry, "key") else entry["key"]
            r = w.turn(wake=key)
            texts += [m.text for m in r.messages]
            for e in r.schedule:
                sched.add("s1", e)
    assert texts == ["Sumiu?", "Última chance"]
    assert w.run("retomar") is None


def test_turn_stream_deltas_decode_escapes():
    text = 'Olá "Ana"!\nLinha 2 \\ fim — ok 😀'
    w = World([], speak=[{"message": text}])
    chunks = list(w.agent.turn_stream(session_id="s1", message="oi", id="m1"))
    assert "".join(c["delta"] for c in chunks[:-1]) == text
    assert chunks[-1]["result"].messages[0].text == text
