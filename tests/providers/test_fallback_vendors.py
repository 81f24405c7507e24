"""Mixing vendors in FallbackProvider (§5.5): Gemini rate-limited falls over to OpenAI, stays
cooled while the cooldown runs, and answers again on the first call after it; and the other
way round with Anthropic behind OpenAI. Every provider is the real SDK against its fake server."""

from __future__ import annotations

import asyncio

import pytest

from falai_django import AnthropicProvider, FallbackProvider, GeminiProvider, OpenAIProvider
from falai_django.testing import fake_clock

from . import fake_vendors as fv
from .fake_gemini import FakeGemini, error_body
from .vendor_kit import envelope, speak_input


@pytest.fixture
def servers():
    gemini, vendor = FakeGemini(), fv.FakeVendor()
    yield gemini, vendor
    gemini.close()
    vendor.close()


@pytest.fixture
def pool(servers):
    gemini_server, openai_server = servers
    clock = fake_clock("2026-09-20T10:00:00Z")
    cooled = []
    gemini = GeminiProvider(api_key="g-key", base_url=gemini_server.base_url, retries=0)
    openai = OpenAIProvider(api_key="o-key", model="gpt-4.1-mini", base_url=openai_server.url("/v1"), retries=0)
    provider = FallbackProvider([gemini, openai], clock=clock, on_cooldown=cooled.append)
    yield provider, clock, cooled
    gemini.close()
    openai.close()


def _rate_limited(server: FakeGemini, retry_after_s: int | None = None) -> None:
    server.error(429, error_body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
                 {"retry-after": str(retry_after_s)} if retry_after_s else None)


def test_a_rate_limit_falls_over_to_openai_and_gemini_returns_after_the_cooldown(servers, pool):
    gemini_server, openai_server = servers
    provider, clock, cooled = pool
    assert provider.name == "fallback(gemini->openai)"

    _rate_limited(gemini_server)
    openai_server.stream(fv.responses_text(envelope("pela OpenAI")))
    first = provider.generate_message(speak_input())
    assert first.structured["message"] == "pela OpenAI" and first.metadata["model"] == "gpt-4.1-mini"
    assert [(info.candidate.name, info.kind) for info in cooled] == [("gemini", "rate")]

    clock.advance("59s")  # still cooling (rate: 60 s): Gemini is not even asked
    openai_server.stream(fv.responses_text(envelope("ainda OpenAI")))
    assert provider.generate_message(speak_input()).structured["message"] == "ainda OpenAI"
    assert len(gemini_server.requests) == 1 and len(openai_server.requests) == 2

    clock.advance("2s")  # the cooldown ran out: the next call goes back to Gemini
    gemini_server.stream_text(envelope("Gemini de volta"))
    back = provider.generate_message(speak_input())
    assert back.structured["message"] == "Gemini de volta" and back.metadata["model"] == "gemini-2.5-flash"
    assert len(gemini_server.requests) == 2 and len(openai_server.requests) == 2
    assert [(row["candidate"].name, row["retry_at_ms"]) for row in provider.status()] == [("gemini", 0), ("openai", 0)]


def test_a_retry_after_sets_the_cooldown_and_the_stream_falls_over_too(servers, pool):
    gemini_server, openai_server = servers
    provider, clock, cooled = pool
    _rate_limited(gemini_server, retry_after_s=120)
    openai_server.stream(fv.responses_text(envelope("em partes"), 5))
    chunks = list(provider.generate_message_stream(speak_input()))
    assert chunks[-1].structured["message"] == "em partes" and len(chunks) >= 5
    assert cooled[0].retry_at_ms - int(clock.now().timestamp() * 1000) == 120_000

    clock.advance("61s")  # past the default 60 s, inside the server's 120 s
    openai_server.stream(fv.responses_text(envelope("ainda esperando")))
    assert provider.generate_message(speak_input()).structured["message"] == "ainda esperando"
    assert len(gemini_server.requests) == 1

    clock.advance("60s")
    gemini_server.stream_text(envelope("voltou"))
    assert provider.generate_message(speak_input()).structured["message"] == "voltou"


def test_openai_then_anthropic_async(servers):
    _, vendor = servers
    clock = fake_clock("2026-09-20T10:00:00Z")
    openai = OpenAIProvider(api_key="o-key", model="gpt-4.1-mini", base_url=vendor.url("/v1"), retries=0)
    claude = AnthropicProvider(api_key="a-key", model="claude-sonnet-4-5", base_url=vendor.url(""), retries=0)
    provider = FallbackProvider([openai, claude], clock=clock)
    vendor.error(429, fv.openai_error("Rate limit reached", "requests", "rate_limit_exceeded"))
    vendor.stream(fv.anthropic_text(envelope("pelo Claude"), 3))
    vendor.stream(fv.anthropic_text(envelope("Claude de novo")))

    async def run():
        first = await provider.agenerate_message(speak_input())
        second = [c async for c in provider.agenerate_message_stream(speak_input())][-1]
        await openai.aclose()
        await claude.aclose()
        return first, second

    try:
        first, second = asyncio.run(run())
    finally:
        openai.close()
        claude.close()
    assert first.structured["message"] == "pelo Claude" and second.structured["message"] == "Claude de novo"
    assert [r.path for r in vendor.requests] == ["/v1/responses", "/v1/messages", "/v1/messages"]
    assert not provider.capabilities.supports_native_json_schema  # the intersection: Anthropic has none
