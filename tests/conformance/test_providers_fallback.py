"""FallbackProvider (engine-persistence-llm.md §5.5, README "Providers")."""

from __future__ import annotations

import time

import pytest

from falai_django import FallbackProvider, ProviderError
from falai_django.llm.types import (
    GenerateInput,
    GenerateOutput,
    GenerateParameters,
    ProviderCapabilities,
    StreamChunk,
)
from falai_django.testing import fake_clock


class Scripted:
    """A provider whose calls follow a script: an exception to raise, or a text to answer."""

    def __init__(self, name, *script, caps=None, emit_then_fail=None):
        self.name = name
        self.capabilities = caps or ProviderCapabilities(True, True, True, True, True)
        self.script = list(script)
        self.calls = 0
        self.emit_then_fail = emit_then_fail

    def _next(self):
        self.calls += 1
        step = self.script.pop(0) if self.script else "ok from " + self.name
        if isinstance(step, BaseException):
            raise step
        return step

    def generate_message(self, input):
        text = self._next()
        return GenerateOutput(message=text, metadata={"model": self.name}, structured={"message": text})

    def generate_message_stream(self, input):
        if self.emit_then_fail is not None:
            self.calls += 1
            yield StreamChunk(delta="Oi", accumulated="Oi")
            raise self.emit_then_fail
        text = self._next()
        yield StreamChunk(delta=text, accumulated=text)
        yield StreamChunk(delta="", accumulated=text, done=True, metadata={}, structured={"message": text})

    async def agenerate_message(self, input):
        return self.generate_message(input)


REQ = GenerateInput(prompt="oi", parameters=GenerateParameters(json_schema={}, schema_name="speak"))


def perr(kind, **kw):
    return ProviderError("p", kind, f"p {kind}", **kw)


def test_empty_providers_throws():
    with pytest.raises(Exception, match=r"providers is empty: there is nothing to call"):
        FallbackProvider(providers=[])


def test_name_and_capability_intersection():
    a = Scripted("gemini", caps=ProviderCapabilities(True, True, True, True, True))
    b = Scripted("mock", caps=ProviderCapabilities(True, True, True, True, False))
    fb = FallbackProvider(providers=[a, b])
    assert fb.name == "fallback(gemini->mock)"
    caps = fb.capabilities
    assert (caps.supports_tools, caps.supports_native_json_schema, caps.supports_streaming,
            caps.supports_streaming_tool_calls, caps.supports_prompt_caching) == (True, True, True, True, False)


def test_first_healthy_candidate_answers_alone():
    a, b = Scripted("a"), Scripted("b")
    out = FallbackProvider(providers=[a, b]).generate_message(REQ)
    assert out.message == "ok from a" and (a.calls, b.calls) == (1, 0)


DEFAULTS = {"rate": 60_000, "quota": 3_600_000, "timeout": 30_000, "network": 30_000, "overload": 30_000,
            "auth": 3_600_000, "entitlement": 3_600_000, "model": 3_600_000}


@pytest.mark.parametrize("kind", sorted(DEFAULTS))
def test_cooldown_kinds_fall_back_and_cool_for_the_default_interval(kind):
    clock = fake_clock("2026-09-21T10:00:00Z")
    start_ms = int(clock.now().timestamp() * 1000)
    infos = []
    a, b = Scripted("a", perr(kind)), Scripted("b")
    fb = FallbackProvider(providers=[a, b], on_cooldown=infos.append, clock=clock)
    assert fb.generate_message(REQ).message == "ok from b"
    assert len(infos) == 1
    info = infos[0]
    assert info.candidate is a and info.kind == kind and info.retry_at_ms == start_ms + DEFAULTS[kind]
    assert isinstance(info.error, ProviderError)
    # while cooling, a is skipped
    assert fb.generate_message(REQ).message == "ok from b" and a.calls == 1
    clock.advance(DEFAULTS[kind] - 1)
    fb.generate_message(REQ)
    assert a.calls == 1
    clock.advance(1)
    assert fb.generate_message(REQ).message == "ok from a"  # the probe succeeds and clears it
    assert a.calls == 2


@pytest.mark.parametrize("kind", ["invalid", "context", "content", "unknown", "aborted"])
def test_kinds_without_cooldown_rethrow_without_fallback(kind):
    a, b = Scripted("a", perr(kind)), Scripted("b")
    with pytest.raises(ProviderError) as info:
        FallbackProvider(providers=[a, b]).generate_message(REQ)
    assert info.value.kind == kind and b.calls == 0


def test_plain_exception_is_unknown_and_rethrown_as_is():
    boom = RuntimeError("bug")
    a, b = Scripted("a", boom), Scripted("b")
    with pytest.raises(RuntimeError) as info:
        FallbackProvider(providers=[a, b]).generate_message(REQ)
    assert info.value is boom and b.calls == 0


def test_a_kind_configured_null_rethrows_and_a_configured_interval_is_used():
    a, b = Scripted("a", perr("rate")), Scripted("b")
    with pytest.raises(ProviderError):
        FallbackProvider(providers=[a, b], cooldown_ms={"rate": None}).generate_message(REQ)
    assert b.calls == 0
    clock = fake_clock("2026-09-21T10:00:00Z")
    infos = []
    a2 = Scripted("a", perr("invalid"))
    fb = FallbackProvider(providers=[a2, Scripted("b")], cooldown_ms={"invalid": 5_000}, on_cooldown=infos.append,
                          clock=clock)
    assert fb.generate_message(REQ).message == "ok from b"  # adding a kind opts it into fallback
    assert infos[0].retry_at_ms - int(clock.now().timestamp() * 1000) == 5_000


def test_server_retry_after_or_reset_overrides_the_interval():
    clock = fake_clock("2026-09-21T10:00:00Z")
    now = int(clock.now().timestamp() * 1000)
    infos = []
    a = Scripted("a", perr("rate", retry_after_ms=5_000))
    fb = FallbackProvider(providers=[a, Scripted("b")], on_cooldown=infos.append, clock=clock)
    fb.generate_message(REQ)
    assert infos[-1].retry_at_ms == now + 5_000
    c = Scripted("c", perr("quota", reset_at_ms=now + 7_200_000, window="5h"))
    fb2 = FallbackProvider(providers=[c, Scripted("d")], on_cooldown=infos.append, clock=clock)
    fb2.generate_message(REQ)
    assert infos[-1].retry_at_ms == now + 7_200_000
    assert infos[-1].window == "5h"


def test_every_candidate_cooling_raises_no_available_provider_error():
    clock = fake_clock("2026-09-21T10:00:00Z")
    now = int(clock.now().timestamp() * 1000)
    a, b = Scripted("a", perr("overload")), Scripted("b", perr("rate"))
    fb = FallbackProvider(providers=[a, b], clock=clock)
    with pytest.raises(ProviderError) as first:
        fb.generate_message(REQ)
    assert first.value.kind == "rate"  # the last failure is rethrown
    with pytest.raises(ProviderError) as info:
        fb.generate_message(REQ)
    err = info.value
    assert type(err).__name__ == "NoAvailableProviderError"
    assert err.kind == "rate"
    assert err.reset_at_ms == now + 30_000
    assert err.retry_after_ms == 30_000


def test_a_failure_after_output_cools_but_rethrows():
    infos = []
    a = Scripted("a", emit_then_fail=perr("overload"))
    b = Scripted("b")
    fb = FallbackProvider(providers=[a, b], on_cooldown=infos.append)
    seen = []
    with pytest.raises(ProviderError):
        for chunk in fb.generate_message_stream(REQ):
            seen.append(chunk.delta)
    assert seen == ["Oi"] and b.calls == 0
    assert [i.kind for i in infos] == ["overload"]
    # the next call skips the cooling candidate
    assert [c.accumulated for c in fb.generate_message_stream(REQ)][-1] == "ok from b"


def test_a_failure_before_output_moves_the_stream_to_the_next_candidate():
    a, b = Scripted("a", perr("network")), Scripted("b")
    chunks = list(FallbackProvider(providers=[a, b]).generate_message_stream(REQ))
    assert chunks[-1].done and chunks[-1].accumulated == "ok from b"


def test_cooldowns_are_per_instance_state_with_real_time():
    a, b = Scripted("a", perr("rate"), perr("rate")), Scripted("b")
    fb = FallbackProvider(providers=[a, b], cooldown_ms={"rate": 50})
    fb.generate_message(REQ)
    fb.generate_message(REQ)
    assert a.calls == 1
    other = FallbackProvider(providers=[a, b], cooldown_ms={"rate": 50})
    other.generate_message(REQ)
    assert a.calls == 2  # a fresh instance knows no cooldowns
    time.sleep(0.06)
    assert fb.generate_message(REQ).message == "ok from a"


def test_only_one_probe_is_admitted_after_expiry():
    clock = fake_clock("2026-09-21T10:00:00Z")
    fb_holder = {}

    class Reentrant(Scripted):
        def generate_message(self, input):
            self.calls += 1
            if self.calls == 1:
                raise perr("overload")
            # while this probe is in flight, a concurrent call must skip a
            inner = fb_holder["fb"].generate_message(input)
            assert inner.message == "ok from b"
            return GenerateOutput(message="probe ok")

    a, b = Reentrant("a"), Scripted("b")
    fb = FallbackProvider(providers=[a, b], clock=clock)
    fb_holder["fb"] = fb
    fb.generate_message(REQ)
    clock.advance(30_000)
    assert fb.generate_message(REQ).message == "probe ok"
    assert a.calls == 2


def test_async_twin_falls_back_too():
    import asyncio

    a, b = Scripted("a", perr("overload")), Scripted("b")
    out = asyncio.run(FallbackProvider(providers=[a, b]).agenerate_message(REQ))
    assert out.message == "ok from b"


def test_on_cooldown_info_reads_under_upstream_names():
    infos = []
    a = Scripted("a", perr("rate"))
    FallbackProvider(providers=[a, Scripted("b")], on_cooldown=infos.append).generate_message(REQ)
    info = infos[0]
    assert info["candidate"] is a and info["kind"] == "rate" and info["retryAtMs"] == info.retry_at_ms
    assert info["window"] is None and isinstance(info["error"], ProviderError)
