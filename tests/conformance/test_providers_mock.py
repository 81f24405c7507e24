"""The scripted provider (engine-persistence-llm.md §3.4, README "Test doubles")."""

from __future__ import annotations

import asyncio
import json

import pytest

from falai_django.llm.types import GenerateInput, GenerateParameters
from falai_django.testing import mock_provider


def _input(name: str | None, prompt: str = "the prompt", system: str | None = "the system") -> GenerateInput:
    return GenerateInput(prompt=prompt, system=system, parameters=GenerateParameters(json_schema={}, schema_name=name))


def test_fifo_per_schema_name_and_no_last_entry_repetition():
    p = mock_provider(understand=[{"flows": {"a": 1}}, {"flows": {"a": 2}}], speak=[{"message": "oi"}])
    assert p.generate_message(_input("understand")).structured == {"flows": {"a": 1}}
    assert p.generate_message(_input("speak")).message == "oi"
    assert p.generate_message(_input("understand")).structured == {"flows": {"a": 2}}
    with pytest.raises(Exception) as info:
        p.generate_message(_input("understand"))
    assert str(info.value) == (
        'mockProvider: no scripted "understand" reply left for call #4. Script more replies or expect fewer calls.'
    ) or str(info.value) == (
        'mock_provider: no scripted "understand" reply left for call #4. Script more replies or expect fewer calls.'
    )


def test_dry_queue_message_counts_every_call_recorded():
    """`#<n>` is the call's number among all recorded calls (upstream `calls.length`)."""
    p = mock_provider(understand=[{}])
    p.generate_message(_input("understand"))
    with pytest.raises(Exception) as info:
        p.generate_message(_input("speak"))
    assert 'no scripted "speak" reply left for call #2. Script more replies or expect fewer calls.' in str(info.value)
    assert len(p.calls) == 2  # the failed call is recorded too


def test_callable_entries_receive_the_request():
    seen = []

    def reply(request):
        seen.append(request)
        return {"message": "echo: " + request.prompt}

    p = mock_provider(speak=[reply])
    req = _input("speak", prompt="olá")
    out = p.generate_message(req)
    assert out.message == "echo: olá"
    assert seen == [req]


def test_calls_record_schema_name_prompt_system_seen_input():
    p = mock_provider(understand=[{}], speak=[{"message": "x"}])
    a = _input("understand", prompt="P1", system="S1")
    b = _input("speak", prompt="P2", system=None)
    p.generate_message(a)
    p.generate_message(b)
    first, second = p.calls
    assert first.schema_name == "understand" and first["schemaName"] == "understand"
    assert first.schemaName == "understand" and first == "understand" and p.calls == ["understand", "speak"]
    assert (first.prompt, first.system, first.seen, first.input) == ("P1", "S1", "S1\n\nP2"[:0] + "S1\n\nP1", a)
    assert (second.prompt, second.system, second.seen, second.input) == ("P2", None, "P2", b)
    assert first["prompt"] == "P1" and first["seen"] == "S1\n\nP1" and first["input"] is a


def test_a_call_without_schema_name_is_unnamed_and_answered_by_summary():
    p = mock_provider(summary=[{"message": "resumo"}])
    out = p.generate_message(_input(None))
    assert out.message == "resumo"
    assert p.calls[0].schema_name == "(unnamed)"


def test_remaining_counts_unconsumed_replies():
    p = mock_provider(understand=[{}, {}], speak=[{"message": "a"}])
    p.generate_message(_input("understand"))
    remaining = p.remaining()
    assert remaining["understand"] == 1 and remaining["speak"] == 1


def test_message_is_the_string_message_else_the_whole_object_as_json():
    scripted = {"flows": {"a": 90}, "message": 5}
    p = mock_provider(understand=[scripted], speak=[{"message": "oi", "nome": "Ana"}])
    out = p.generate_message(_input("understand"))
    assert json.loads(out.message) == scripted
    assert out.structured is scripted  # the scripted object itself
    assert out.metadata == {"model": "mock"}
    speak = p.generate_message(_input("speak"))
    assert speak.message == "oi" and speak.structured == {"message": "oi", "nome": "Ana"}


def test_usage_option_counts_characters():
    p = mock_provider(speak=[{"message": "abcd"}], usage=True)
    out = p.generate_message(_input("speak", prompt="12345", system="xyz"))
    assert out.metadata == {"model": "mock", "promptTokens": 8, "completionTokens": 4, "cachedInputTokens": 0}


def test_name_and_capabilities():
    p = mock_provider()
    assert p.name == "mock"
    caps = p.capabilities
    assert caps.supports_tools is True
    assert caps.supports_native_json_schema is True
    assert caps.supports_streaming is True
    assert caps.supports_streaming_tool_calls is True
    assert caps.supports_prompt_caching is False


def test_stream_delivers_the_reply_and_ends_with_one_done_chunk():
    reply = {"message": "Oi! Com quem eu falo?", "nome": None}
    p = mock_provider(speak=[reply])
    chunks = list(p.generate_message_stream(_input("speak")))
    assert chunks[-1].done is True
    assert all(c.done is False for c in chunks[:-1])
    assert chunks[-1].structured == reply
    assert chunks[-1].metadata == {"model": "mock"}
    assert "".join(c.delta for c in chunks) == chunks[-1].accumulated
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.accumulated.startswith(before.accumulated)


def test_async_generate_message_raises_when_dry():
    p = mock_provider()

    async def go():
        await p.agenerate_message(_input("speak"))

    with pytest.raises(Exception, match='no scripted "speak" reply left for call #1'):
        asyncio.run(go())


def test_a_dry_understand_escapes_the_turn_and_a_dry_speak_defers():
    from falai_django import falai
    from falai_django.testing import fake_clock

    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome."},
                        "cidade": {"type": "string", "ask": "Pergunte a cidade."}})
    flow = {"id": "t", "on": [{"message": []}], "steps": [{"id": "oi", "say": "Oi!"},
                                                         {"id": "q", "collect": ["nome", "cidade"]}]}
    agent = f.agent(name="Ana", provider=mock_provider(), flows=[f.flow(flow)], clock=fake_clock("2026-09-21T10:00:00Z"))
    with pytest.raises(Exception, match="no scripted \"understand\" reply left"):
        agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    agent2 = f.agent(name="Ana", provider=mock_provider(understand=[{}]), flows=[f.flow(flow)],
                     clock=fake_clock("2026-09-21T10:00:00Z"))
    r = agent2.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    deferred = [o for o in r.outcomes if o.status == "deferred"]
    assert [(o.step_id, o.code) for o in deferred] == [("q", "provider-unavailable")]
    assert [e.key for e in r.schedule if ":retry:" in e.key]


def test_turn_usage_is_summed_when_reported_and_absent_otherwise():
    from falai_django import falai
    from falai_django.testing import fake_clock

    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome."}})
    flow = {"id": "t", "on": [{"message": []}], "steps": [{"id": "oi", "prompt": "Cumprimente."}]}
    counted = f.agent(name="Ana", provider=mock_provider(speak=[{"message": "Oi!"}], usage=True),
                      flows=[f.flow(flow)], clock=fake_clock("2026-09-21T10:00:00Z"))
    r = counted.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    assert r.usage is not None
    assert r.usage.completion_tokens == 3 and r.usage.cached_input_tokens == 0 and r.usage.prompt_tokens > 0
    plain = f.agent(name="Ana", provider=mock_provider(speak=[{"message": "Oi!"}]), flows=[f.flow(flow)],
                    clock=fake_clock("2026-09-21T10:00:00Z"))
    assert plain.turn(session_id="s1", message="oi", id="m1", session=None, history=[]).usage is None
