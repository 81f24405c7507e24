"""turn_stream with real envelopes and failures (engine-persistence-llm.md §4.1, §4.3)."""

from __future__ import annotations

import json

import pytest

from falai_django import ProviderError, falai
from falai_django.llm.types import BaseProvider, GenerateOutput, ProviderCapabilities, StreamChunk
from falai_django.testing import fake_clock, mock_provider

T0 = "2026-09-21T10:00:00.000Z"
FIELDS = {"nome": {"type": "string", "ask": "Pergunte o nome."}, "cidade": {"type": "string", "ask": "Cidade?"}}


class EnvelopeStreamer(BaseProvider):
    """Streams a JSON envelope char by char, optionally failing after `fail_after` chunks."""

    name = "env"
    capabilities = ProviderCapabilities(True, True, True, True, False)

    def __init__(self, envelope, fail_after=None):
        self.envelope = envelope
        self.fail_after = fail_after
        self.calls = []

    def generate_message(self, input):
        self.calls.append(input.parameters.schema_name)
        text = json.dumps(self.envelope)
        return GenerateOutput(message=text, structured=self.envelope)

    def generate_message_stream(self, input):
        self.calls.append(input.parameters.schema_name)
        text = json.dumps(self.envelope, ensure_ascii=False)
        acc = ""
        for i, ch in enumerate(text):
            if self.fail_after is not None and i == self.fail_after:
                raise ProviderError("env", "network", "env network: socket closed")
            acc += ch
            yield StreamChunk(delta=ch, accumulated=acc)
        yield StreamChunk(delta="", accumulated=acc, done=True, metadata={"model": "env"}, structured=self.envelope)


def _agent(provider, steps=None):
    f = falai().fields(FIELDS)
    flow = {"id": "t", "on": [{"message": []}], "steps": steps or [{"id": "oi", "prompt": "Cumprimente."}]}
    return f.agent(name="Ana", provider=provider, clock=fake_clock(T0), flows=[f.flow(flow)])


def test_deltas_are_the_clean_message_never_the_envelope():
    provider = EnvelopeStreamer({"nome": None, "message": "Olá! \"Tudo\" bem?\nSou a Ana."})
    chunks = list(_agent(provider).turn_stream(session_id="s1", message="oi", id="m1", session=None, history=[]))
    deltas = [c["delta"] for c in chunks[:-1]]
    assert "".join(deltas) == 'Olá! "Tudo" bem?\nSou a Ana.'
    assert all(d for d in deltas)
    assert not any("{" in d or '"message"' in d for d in deltas)
    result = chunks[-1]["result"]
    assert [m.text for m in result.messages] == ['Olá! "Tudo" bem?\nSou a Ana.']
    assert provider.calls == ["speak"]


def test_a_failure_mid_stream_still_finishes_with_done_and_a_retry_wake():
    provider = EnvelopeStreamer({"message": "Olá, tudo bem com você?"}, fail_after=20)
    chunks = list(_agent(provider).turn_stream(session_id="s1", message="oi", id="m1", session=None, history=[]))
    assert chunks[-1]["done"] is True
    partial = "".join(c["delta"] for c in chunks[:-1])
    assert partial and "Olá, tudo bem com você?".startswith(partial)
    result = chunks[-1]["result"]
    assert result.messages == []  # the done chunk is authoritative
    assert [o.code for o in result.outcomes if o.status == "deferred"] == ["provider-unavailable"]
    assert [e.key for e in result.schedule] and ":retry:" in result.schedule[0].key
    assert result.changed is True


def test_an_understand_failure_raises_before_any_chunk():
    steps = [{"id": "oi", "say": "Oi!"}, {"id": "q", "collect": ["nome", "cidade"]}]
    stream = _agent(mock_provider(), steps).turn_stream(session_id="s1", message="oi", id="m1", session=None,
                                                        history=[])
    with pytest.raises(ProviderError):
        next(iter(stream))


def test_say_steps_give_no_delta():
    steps = [{"id": "oi", "say": "Oi, eu sou a Ana!"}]
    chunks = list(_agent(mock_provider(), steps).turn_stream(session_id="s1", message="oi", id="m1", session=None,
                                                             history=[]))
    assert len(chunks) == 1
    assert [m.text for m in chunks[0]["result"].messages] == ["Oi, eu sou a Ana!"]


def test_async_stream_twin():
    import asyncio

    provider = mock_provider(speak=[{"message": "Oi, tudo bem?"}])

    async def collect():
        return [c async for c in _agent(provider).aturn_stream(session_id="s1", message="oi", id="m1", session=None,
                                                               history=[])]

    chunks = asyncio.run(collect())
    assert chunks[-1]["done"] is True
    assert "".join(c["delta"] for c in chunks[:-1]) == "Oi, tudo bem?"
