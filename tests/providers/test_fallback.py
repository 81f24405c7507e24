"""FallbackProvider: order, cooldowns, probes and streaming commitment (§5.5)."""

from __future__ import annotations

import asyncio
import json

import pytest

from falai_django.engine.errors import ProviderError
from falai_django.llm.types import (
    BaseProvider,
    GenerateInput,
    GenerateOutput,
    GenerateParameters,
    ProviderCapabilities,
    StreamChunk,
)
from falai_django.providers.fallback import CooldownInfo, FallbackProvider, NoAvailableProviderError
from falai_django.testing import fake_clock

from .fake_gemini import error_body

REQUEST = GenerateInput(prompt="oi")


class Scripted(BaseProvider):
    """Answers from a list: a string is a reply, an exception is raised; records each call."""

    def __init__(self, name: str, *script, capabilities: ProviderCapabilities | None = None):
        self.name = name
        self.script = list(script)
        self.calls = 0
        if capabilities is not None:
            self.capabilities = capabilities

    def _next(self):
        self.calls += 1
        item = self.script.pop(0) if self.script else f"{self.name} ok"
        if isinstance(item, BaseException):
            raise item
        return item

    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        return GenerateOutput(message=self._next(), metadata={"model": self.name})

    def generate_message_stream(self, input: GenerateInput):
        item = self._next()
        if isinstance(item, tuple):  # (text emitted, then this error)
            text, error = item
            yield StreamChunk(delta=text, accumulated=text)
            raise error
        yield StreamChunk(delta=item, accumulated=item)
        yield StreamChunk(delta="", accumulated=item, done=True, metadata={"model": self.name})


def overload(name="p"):
    return ProviderError(name, "overload", "busy")


@pytest.fixture
def clock():
    return fake_clock("2026-09-20T10:00:00Z")


def test_empty_providers_is_refused():
    with pytest.raises(ValueError, match=r"^\[FallbackProvider\] providers is empty: "):
        FallbackProvider(providers=[])


def test_name_and_capabilities_are_the_intersection():
    a = Scripted("gemini")
    b = Scripted("other", capabilities=ProviderCapabilities(supports_tools=False))
    pool = FallbackProvider(providers=[a, b])
    assert pool.name == "fallback(gemini->other)"
    assert pool.capabilities.supports_tools is False
    assert pool.capabilities.supports_streaming is True


def test_primary_answers_when_healthy():
    primary, backup = Scripted("a"), Scripted("b")
    pool = FallbackProvider(providers=[primary, backup])
    assert pool.generate_message(REQUEST).message == "a ok"
    assert backup.calls == 0


def test_switches_to_backup_and_back_after_cooldown(clock):
    primary = Scripted("a", overload("a"))
    backup = Scripted("b")
    seen: list[CooldownInfo] = []
    pool = FallbackProvider(providers=[primary, backup], on_cooldown=seen.append, clock=clock)

    assert pool.generate_message(REQUEST).message == "b ok"
    [info] = seen
    assert (info.candidate, info.kind) == (primary, "overload")
    assert info.retry_at_ms == int(clock.now().timestamp() * 1000) + 30_000

    clock.advance("29s")
    assert pool.generate_message(REQUEST).message == "b ok"  # still cooling: primary skipped
    assert primary.calls == 1

    clock.advance("2s")
    assert pool.generate_message(REQUEST).message == "a ok"  # the probe succeeds
    assert pool.generate_message(REQUEST).message == "a ok"
    assert primary.calls == 3 and pool.status()[0]["retry_at_ms"] == 0


def test_failed_probe_cools_again(clock):
    primary = Scripted("a", overload("a"), overload("a"))
    pool = FallbackProvider(providers=[primary, Scripted("b")], clock=clock)
    pool.generate_message(REQUEST)
    clock.advance("31s")
    assert pool.generate_message(REQUEST).message == "b ok"
    assert primary.calls == 2
    clock.advance("20s")
    pool.generate_message(REQUEST)
    assert primary.calls == 2  # a fresh 30 s from the probe's failure


def test_cooldown_per_kind_and_overrides(clock):
    primary = Scripted("a", ProviderError("a", "rate", "slow"), ProviderError("a", "auth", "key"))
    pool = FallbackProvider(providers=[primary, Scripted("b")], cooldown_ms={"rate": 5_000}, clock=clock)
    pool.generate_message(REQUEST)
    clock.advance("6s")
    pool.generate_message(REQUEST)  # the probe fails with auth: one hour
    clock.advance("59m")
    pool.generate_message(REQUEST)
    assert primary.calls == 2


def test_server_retry_after_overrides_the_interval(clock):
    primary = Scripted("a", ProviderError("a", "rate", "slow", retry_after_ms=5_000))
    pool = FallbackProvider(providers=[primary, Scripted("b")], clock=clock)
    pool.generate_message(REQUEST)
    clock.advance("6s")
    assert pool.generate_message(REQUEST).message == "a ok"


@pytest.mark.parametrize("error", [
    ProviderError("a", "invalid", "bad request"),
    ProviderError("a", "context", "too long"),
    ProviderError("a", "content", "blocked"),
    ProviderError("a", "aborted", "stop"),
    RuntimeError("a bug"),  # classifies as unknown
])
def test_kinds_without_cooldown_rethrow_without_fallback(error):
    backup = Scripted("b")
    pool = FallbackProvider(providers=[Scripted("a", error), backup])
    with pytest.raises(type(error)) as caught:
        pool.generate_message(REQUEST)
    assert caught.value is error and backup.calls == 0


def test_null_cooldown_disables_fallback_for_that_kind():
    backup = Scripted("b")
    pool = FallbackProvider(providers=[Scripted("a", overload()), backup], cooldown_ms={"overload": None})
    with pytest.raises(ProviderError):
        pool.generate_message(REQUEST)
    assert backup.calls == 0


def test_every_candidate_failing_raises_the_last_error_then_none_available(clock):
    pool = FallbackProvider(providers=[Scripted("a", overload("a")), Scripted("b", overload("b"))], clock=clock)
    with pytest.raises(ProviderError) as caught:
        pool.generate_message(REQUEST)
    assert caught.value.provider == "b"
    with pytest.raises(NoAvailableProviderError) as none:
        pool.generate_message(REQUEST)
    now_ms = int(clock.now().timestamp() * 1000)
    assert none.value.kind == "rate"
    assert none.value.reset_at_ms == now_ms + 30_000 and none.value.retry_after_ms == 30_000


def test_stream_switches_before_output_but_never_after():
    backup = Scripted("b")
    pool = FallbackProvider(providers=[Scripted("a", overload("a")), backup])
    assert [c.accumulated for c in pool.generate_message_stream(REQUEST)] == ["b ok", "b ok"]

    late = ProviderError("c", "network", "dropped")
    primary = Scripted("c", ("partial", late))
    backup = Scripted("d")
    pool = FallbackProvider(providers=[primary, backup])
    stream = pool.generate_message_stream(REQUEST)
    assert next(stream).delta == "partial"
    with pytest.raises(ProviderError) as caught:
        list(stream)
    assert caught.value is late and backup.calls == 0
    assert pool.status()[0]["retry_at_ms"] > 0  # still cooled for the next call


def test_async_twins_fall_back_too():
    pool = FallbackProvider(providers=[Scripted("a", overload("a"), overload("a")), Scripted("b")])

    async def run():
        out = await pool.agenerate_message(REQUEST)
        chunks = [c async for c in pool.agenerate_message_stream(REQUEST)]
        return out, chunks

    out, chunks = asyncio.run(run())
    assert out.message == "b ok" and chunks[-1].done and chunks[-1].accumulated == "b ok"


def test_two_gemini_providers_over_the_wire(gemini_server, make_gemini, clock):
    primary = make_gemini(retries=0)
    backup = make_gemini(retries=0, model="gemini-2.5-flash-lite")
    pool = FallbackProvider(providers=[primary, backup], clock=clock)
    schema = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
    request = GenerateInput(prompt="oi", parameters=GenerateParameters(json_schema=schema, schema_name="speak"))

    gemini_server.error(503, error_body(503, "UNAVAILABLE", "The model is overloaded."))
    gemini_server.stream_text(json.dumps({"message": "do backup"}))
    assert pool.generate_message(request).structured == {"message": "do backup"}

    clock.advance("31s")
    gemini_server.stream_text(json.dumps({"message": "de volta"}))
    assert pool.generate_message(request).structured == {"message": "de volta"}
    assert [r.model for r in gemini_server.requests] == ["gemini-2.5-flash", "gemini-2.5-flash-lite",
                                                         "gemini-2.5-flash"]


def test_only_one_probe_is_admitted_while_it_is_in_flight(clock):
    import threading

    release = threading.Event()
    entered = threading.Event()

    class Slow(Scripted):
        def generate_message(self, input):
            if self.calls == 1:  # the probe: hold it open
                entered.set()
                release.wait(5)
            return super().generate_message(input)

    primary, backup = Slow("a", overload("a")), Scripted("b")
    pool = FallbackProvider(providers=[primary, backup], clock=clock)
    pool.generate_message(REQUEST)  # primary fails and cools
    clock.advance("31s")

    probe_result = []
    probe = threading.Thread(target=lambda: probe_result.append(pool.generate_message(REQUEST).message))
    probe.start()
    assert entered.wait(5)
    assert pool.generate_message(REQUEST).message == "b ok"  # the probe is in flight: skip the primary
    release.set()
    probe.join(5)
    assert probe_result == ["a ok"]
    assert pool.generate_message(REQUEST).message == "a ok"  # the probe cleared the cooldown
