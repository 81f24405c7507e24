from __future__ import annotations

import pytest

from . import fake_vendors
from .fake_gemini import FakeGemini
from .vendor_kit import SECRET


@pytest.fixture
def gemini_server():
    server = FakeGemini()
    yield server
    server.close()


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays (ms) a provider asked for; pass `sleep=sleeps.append`."""
    return []


@pytest.fixture
def make_gemini(gemini_server, sleeps):
    from falai_django.providers.gemini import GeminiProvider

    made = []

    def make(**options):
        options.setdefault("api_key", "test-key")
        options.setdefault("base_url", gemini_server.base_url)
        options.setdefault("sleep", sleeps.append)
        options.setdefault("backoff_base_ms", 1)
        options.setdefault("backoff_cap_ms", 30_000)
        provider = GeminiProvider(**options)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.close()


@pytest.fixture
def server():
    """A fake OpenAI / Anthropic server (fake_vendors.FakeVendor)."""
    server = fake_vendors.FakeVendor()
    yield server
    server.close()


@pytest.fixture
def make_vendor(server, sleeps):
    """build(cls, path="/v1", **options): a vendor provider against `server`, closed afterwards."""
    made = []

    def build(cls, path="/v1", **options):
        options.setdefault("api_key", SECRET)
        options.setdefault("model", "gpt-4.1-mini")
        options.setdefault("base_url", server.url(path))
        options.setdefault("sleep", sleeps.append)
        options.setdefault("backoff_base_ms", 1)
        provider = cls(**options)
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.close()
