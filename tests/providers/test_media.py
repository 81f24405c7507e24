"""Media understanding: `transcribe` / `describe_image` and their async twins on every provider.

Real SDKs against the local fake servers: what goes on the wire (the media inline, the
instruction beside it, JSON off), the text that comes back, the shared retry policy (a 503 is
retried, a 400 is not and its error carries no API key), which providers lack which method,
the offline markers, and how `FallbackProvider` falls over.
"""

from __future__ import annotations

import asyncio
import base64

import pytest

from falai_django import AnthropicProvider, OpenAIProvider
from falai_django.engine.errors import ProviderError
from falai_django.llm.types import BaseProvider, GenerateInput, GenerateOutput
from falai_django.providers.adapter import DESCRIBE_IMAGE_PROMPT, TRANSCRIBE_PROMPT
from falai_django.providers.fallback import FallbackProvider, NoAvailableProviderError
from falai_django.providers.offline import OfflineProvider
from falai_django.providers.openai import DeepSeekProvider, OpenAICompatibleProvider, audio_filename
from falai_django.testing import fake_clock

from . import fake_vendors as fv
from .fake_gemini import error_body
from .vendor_kit import SECRET

AUDIO = b"OggS\x00\x02fake-opus-voice-note\xff\xfe" * 3
IMAGE = b"\x89PNG\r\n\x1a\nfake-png-pixels\x00\x01"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# -- Gemini -------------------------------------------------------------------------------------


def only_content(recorded) -> list[dict]:
    """The parts of the request's one user content, an inline part read as ("inline", mime, bytes).

    google-genai passes the Blob through under its Python field name and in URL-safe base64 (the
    REST API's proto-JSON reader takes either spelling and either alphabet), so both are accepted."""
    (content,) = recorded.body["contents"]
    assert content["role"] == "user"
    parts = []
    for part in content["parts"]:
        blob = part.get("inlineData")
        if blob is None:
            parts.append(part)
            continue
        assert set(part) == {"inlineData"}
        encoded = blob["data"].replace("+", "-").replace("/", "_")
        parts.append(("inline", blob.get("mimeType", blob.get("mime_type")), base64.urlsafe_b64decode(encoded)))
    return parts


def test_gemini_transcribe_sends_the_audio_inline_and_returns_the_text(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text("  Olá, quero um orçamento para amanhã.\n", pieces=3)

    text = provider.transcribe(AUDIO, "audio/ogg; codecs=opus")

    assert text == "Olá, quero um orçamento para amanhã."  # all three pieces, trimmed
    (sent,) = gemini_server.requests
    assert (sent.model, sent.method) == ("gemini-2.5-flash", "streamGenerateContent")
    assert only_content(sent) == [
        ("inline", "audio/ogg", AUDIO),  # the codecs parameter dropped
        {"text": TRANSCRIBE_PROMPT},
    ]
    config = sent.body.get("generationConfig", {})
    assert "responseMimeType" not in config and "systemInstruction" not in sent.body  # JSON off, no system


def test_gemini_describe_image_sends_the_image_inline(gemini_server, make_gemini):
    provider = make_gemini(model="gemini-3-flash")
    gemini_server.stream_text("Uma caixa de papelão amassada sobre uma mesa.")

    assert provider.describe_image(IMAGE, "image/png") == "Uma caixa de papelão amassada sobre uma mesa."
    (sent,) = gemini_server.requests
    assert sent.model == "gemini-3-flash"
    assert only_content(sent) == [("inline", "image/png", IMAGE), {"text": DESCRIBE_IMAGE_PROMPT}]


def test_the_instructions_say_what_each_call_wants():
    assert "Transcribe" in TRANSCRIBE_PROMPT and "own language" in TRANSCRIBE_PROMPT
    assert "transcription only" in TRANSCRIBE_PROMPT
    assert "one or two" in DESCRIBE_IMAGE_PROMPT and "customer" in DESCRIBE_IMAGE_PROMPT
    assert "description only" in DESCRIBE_IMAGE_PROMPT


def test_gemini_media_retries_a_503_with_the_shared_backoff(gemini_server, make_gemini, sleeps):
    provider = make_gemini()
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "The model is overloaded."))
    gemini_server.stream_text("oi")

    assert provider.transcribe(AUDIO, "audio/ogg") == "oi"
    assert len(gemini_server.requests) == 2 and len(sleeps) == 1  # one wait, then the same request again
    assert only_content(gemini_server.requests[1]) == only_content(gemini_server.requests[0])


def test_gemini_media_falls_to_a_backup_model(gemini_server, make_gemini):
    provider = make_gemini(retries=0, backup_models=["gemini-2.5-flash-lite"])
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "The model is overloaded."))
    gemini_server.stream_text("um gato")

    assert provider.describe_image(IMAGE, "image/jpeg") == "um gato"
    assert [r.model for r in gemini_server.requests] == ["gemini-2.5-flash", "gemini-2.5-flash-lite"]


def test_gemini_media_400_raises_provider_error_without_the_key(gemini_server, make_gemini):
    provider = make_gemini(api_key=SECRET)
    gemini_server.error(400, error_body(400, "INVALID_ARGUMENT",
                                        f"Unsupported MIME type audio/amr (request key {SECRET})"))

    with pytest.raises(ProviderError) as caught:
        provider.transcribe(AUDIO, "audio/amr")
    error = caught.value
    assert (error.provider, error.kind, error.status) == ("gemini", "invalid", 400)
    assert SECRET not in str(error) and "[redacted]" in str(error)
    assert SECRET not in str(error.body) and error.__cause__ is None  # the original (with the key) not chained
    assert len(gemini_server.requests) == 1  # not transient: never retried


def test_gemini_async_twins(gemini_server, make_gemini, sleeps):
    provider = make_gemini()
    gemini_server.error(503, error_body(503, "UNAVAILABLE", "The model is overloaded."))
    gemini_server.stream_text("Bom dia!", pieces=2)
    gemini_server.stream_text("Um recibo.")

    async def both():
        return (await provider.atranscribe(AUDIO, "audio/mpeg"),
                await provider.adescribe_image(IMAGE, "image/webp"))

    assert asyncio.run(both()) == ("Bom dia!", "Um recibo.")
    assert len(sleeps) == 1 and len(gemini_server.requests) == 3
    assert only_content(gemini_server.requests[1]) == [("inline", "audio/mpeg", AUDIO), {"text": TRANSCRIBE_PROMPT}]
    assert only_content(gemini_server.requests[2]) == [("inline", "image/webp", IMAGE),
                                                       {"text": DESCRIBE_IMAGE_PROMPT}]


def test_gemini_async_400_is_redacted(gemini_server, make_gemini):
    provider = make_gemini(api_key=SECRET)
    gemini_server.error(400, error_body(400, "INVALID_ARGUMENT", f"bad image, key {SECRET}"))
    with pytest.raises(ProviderError) as caught:
        asyncio.run(provider.adescribe_image(IMAGE, "image/png"))
    assert caught.value.kind == "invalid" and SECRET not in str(caught.value)


def test_text_calls_still_stream_after_the_refactor(gemini_server, make_gemini):
    provider = make_gemini()
    gemini_server.stream_text("Olá!", pieces=2)
    chunks = list(provider.generate_message_stream(GenerateInput(prompt="oi")))
    assert [c.delta for c in chunks] == ["Ol", "á!", ""] and chunks[-1].done
    assert gemini_server.requests[0].body["contents"] == [{"role": "user", "parts": [{"text": "oi"}]}]


# -- OpenAI and compatible ----------------------------------------------------------------------


@pytest.mark.parametrize("mime,name", [("audio/ogg", "audio.ogg"), ("audio/ogg; codecs=opus", "audio.ogg"),
                                       ("audio/mpeg", "audio.mp3"), ("audio/mp4", "audio.m4a"),
                                       ("audio/x-wav", "audio.wav"), ("audio/webm", "audio.webm")])
def test_audio_filename_follows_the_mime_type(mime, name):
    assert audio_filename(mime) == name


def test_openai_transcribe_posts_the_audio_to_the_transcription_endpoint(server, make_vendor):
    provider = make_vendor(OpenAIProvider)
    server.push(fv.transcription(" Quero falar com o financeiro. "))

    assert provider.transcribe(AUDIO, "audio/ogg; codecs=opus") == "Quero falar com o financeiro."
    (sent,) = server.requests
    assert sent.path == "/v1/audio/transcriptions"
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.body["model"] == "gpt-4o-mini-transcribe"  # not the chat model
    assert sent.body["file"] == {"filename": "audio.ogg", "content_type": "audio/ogg", "data": AUDIO}


def test_openai_transcription_model_option_and_retry(server, make_vendor, sleeps):
    provider = make_vendor(OpenAICompatibleProvider, model="llama3.3", transcription_model="whisper-large-v3")
    server.error(503, fv.openai_error("overloaded", "server_error"))
    server.push(fv.transcription("oi"))

    assert provider.transcribe(AUDIO, "audio/mpeg") == "oi"
    assert [r.body["model"] for r in server.requests] == ["whisper-large-v3", "whisper-large-v3"]
    assert server.requests[1].body["file"]["filename"] == "audio.mp3" and len(sleeps) == 1


def test_openai_transcribe_failure_is_classified_and_redacted(server, make_vendor):
    provider = make_vendor(OpenAIProvider)
    server.error(400, fv.openai_error(f"Invalid file format. (key {SECRET})", "invalid_request_error"))

    with pytest.raises(ProviderError) as caught:
        provider.transcribe(AUDIO, "audio/amr")
    error = caught.value
    assert (error.provider, error.kind, error.status) == ("openai", "invalid", 400)
    assert SECRET not in str(error) and SECRET not in str(error.body) and error.__cause__ is None
    assert len(server.requests) == 1


def test_openai_atranscribe(server, make_vendor, sleeps):
    provider = make_vendor(OpenAIProvider)
    server.error(429, fv.openai_error("slow down", "rate_limit_error"), headers={"retry-after-ms": "5"})
    server.push(fv.transcription("tudo certo"))

    assert asyncio.run(provider.atranscribe(AUDIO, "audio/webm")) == "tudo certo"
    assert sleeps == [5.0]  # the server's hint, through the same backoff
    assert server.requests[1].body["file"] == {"filename": "audio.webm", "content_type": "audio/webm", "data": AUDIO}


def test_openai_describe_image_on_the_responses_api(server, make_vendor):
    provider = make_vendor(OpenAIProvider)
    server.stream(fv.responses_text("Um boleto bancário.", pieces=2))

    assert provider.describe_image(IMAGE, "image/png") == "Um boleto bancário."
    (sent,) = server.requests
    assert sent.path == "/v1/responses" and sent.body["model"] == "gpt-4.1-mini"
    assert sent.body["input"] == [{"role": "user", "content": [
        {"type": "input_text", "text": DESCRIBE_IMAGE_PROMPT},
        {"type": "input_image", "image_url": f"data:image/png;base64,{b64(IMAGE)}"},
    ]}]
    assert "text" not in sent.body and "instructions" not in sent.body  # JSON off, no system text


def test_compatible_describe_image_on_chat_completions(server, make_vendor):
    provider = make_vendor(OpenAICompatibleProvider, model="llava")
    server.stream(fv.chat_text("Uma foto de um carro vermelho.", pieces=3, model="llava"))

    assert asyncio.run(provider.adescribe_image(IMAGE, "image/jpeg")) == "Uma foto de um carro vermelho."
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": DESCRIBE_IMAGE_PROMPT},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64(IMAGE)}"}},
    ]}]
    assert "response_format" not in sent.body


def test_openai_describe_image_empty_reply_is_an_error_after_retries(server, make_vendor, sleeps):
    provider = make_vendor(OpenAIProvider, retries=1)
    server.stream(fv.responses_text(""))
    server.stream(fv.responses_text(""))
    with pytest.raises(ProviderError) as caught:
        provider.describe_image(IMAGE, "image/png")
    assert caught.value.kind == "overload" and len(server.requests) == 2 and len(sleeps) == 1


def test_deepseek_has_no_media_methods(make_vendor):
    provider = make_vendor(DeepSeekProvider, model="deepseek-chat")
    for method in ("transcribe", "atranscribe", "describe_image", "adescribe_image"):
        assert not hasattr(provider, method) and not hasattr(DeepSeekProvider, method)
    with pytest.raises(AttributeError, match="no transcription endpoint"):
        provider.transcribe(AUDIO, "audio/ogg")
    assert hasattr(make_vendor(OpenAICompatibleProvider, model="llava"), "transcribe")


# -- Anthropic ----------------------------------------------------------------------------------


def test_anthropic_describe_image_sends_a_base64_image_block(server, make_vendor):
    provider = make_vendor(AnthropicProvider, path="", model="claude-sonnet-4-5")
    server.stream(fv.anthropic_text("Uma nota fiscal.", pieces=2))
    server.stream(fv.anthropic_text("Um print de tela."))

    assert provider.describe_image(IMAGE, "image/png") == "Uma nota fiscal."
    assert asyncio.run(provider.adescribe_image(IMAGE, "image/gif")) == "Um print de tela."
    first, second = server.requests
    assert first.path == "/v1/messages" and first.body["model"] == "claude-sonnet-4-5"
    assert first.body["messages"] == [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(IMAGE)}},
        {"type": "text", "text": DESCRIBE_IMAGE_PROMPT},
    ]}]
    assert "system" not in first.body  # no envelope schema block: JSON off
    assert second.body["messages"][0]["content"][0]["source"]["media_type"] == "image/gif"


def test_anthropic_has_no_transcribe(make_vendor):
    provider = make_vendor(AnthropicProvider, path="", model="claude-sonnet-4-5")
    assert not hasattr(provider, "transcribe") and not hasattr(provider, "atranscribe")
    assert hasattr(provider, "describe_image") and hasattr(provider, "adescribe_image")


# -- offline ------------------------------------------------------------------------------------


def test_offline_markers_name_the_type_and_the_size():
    provider = OfflineProvider()
    assert provider.transcribe(AUDIO, "audio/ogg; codecs=opus") == \
        f"[transcription: audio/ogg; codecs=opus, {len(AUDIO)} bytes]"
    assert provider.describe_image(b"12345", "image/jpeg") == "[image description: image/jpeg, 5 bytes]"
    assert asyncio.run(provider.atranscribe(b"", "audio/mpeg")) == "[transcription: audio/mpeg, 0 bytes]"
    assert asyncio.run(provider.adescribe_image(IMAGE, "image/png")) == \
        f"[image description: image/png, {len(IMAGE)} bytes]"


# -- FallbackProvider ---------------------------------------------------------------------------


class Seer(BaseProvider):
    """Describes images (and transcribes, unless `hears` is False) from a script; records each call."""

    def __init__(self, name: str, *script, hears: bool = True, text_error: Exception | None = None):
        self.name = name
        self.script = list(script)
        self.text_error = text_error
        self.calls: list[tuple[str, str]] = []
        if hears:
            self.transcribe = lambda data, mime_type: self._next("transcribe", mime_type)

    def _next(self, method: str, mime_type: str) -> str:
        self.calls.append((method, mime_type))
        item = self.script.pop(0) if self.script else f"{self.name} {method}"
        if isinstance(item, BaseException):
            raise item
        return item

    def describe_image(self, data: bytes, mime_type: str) -> str:
        return self._next("describe_image", mime_type)

    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        if self.text_error is not None:
            raise self.text_error
        return GenerateOutput(message=f"{self.name} ok")


def test_fallback_falls_over_on_provider_error_and_sets_no_cooldown():
    primary = Seer("a", ProviderError("a", "invalid", "unsupported format", status=400))
    backup = Seer("b")
    pool = FallbackProvider([primary, backup])

    assert pool.describe_image(IMAGE, "image/heic") == "b describe_image"
    assert primary.calls == [("describe_image", "image/heic")] == backup.calls
    assert [row["retry_at_ms"] for row in pool.status()] == [0, 0]  # a media failure cools nobody
    assert pool.describe_image(IMAGE, "image/png") == "a describe_image"  # the primary again


def test_fallback_skips_a_provider_without_the_method():
    deaf = Seer("deaf", hears=False)
    hearing = Seer("hearing")
    pool = FallbackProvider([deaf, hearing])
    assert pool.transcribe(AUDIO, "audio/ogg") == "hearing transcribe"
    assert deaf.calls == [] and hearing.calls == [("transcribe", "audio/ogg")]


def test_fallback_without_any_provider_having_the_method_raises_not_implemented():
    pool = FallbackProvider([Seer("x", hears=False), Seer("y", hears=False)])
    with pytest.raises(NotImplementedError, match=r"no provider in fallback\(x->y\) has transcribe\(\)"):
        pool.transcribe(AUDIO, "audio/ogg")
    with pytest.raises(NotImplementedError):
        asyncio.run(pool.atranscribe(AUDIO, "audio/ogg"))


def test_fallback_reraises_the_last_failure_and_aborted_at_once():
    pool = FallbackProvider([Seer("a", ProviderError("a", "overload", "busy")),
                             Seer("b", ProviderError("b", "auth", "bad key"))])
    with pytest.raises(ProviderError) as caught:
        pool.describe_image(IMAGE, "image/png")
    assert (caught.value.provider, caught.value.kind) == ("b", "auth")

    second = Seer("b")
    pool = FallbackProvider([Seer("a", ProviderError("a", "aborted", "cancelled")), second])
    with pytest.raises(ProviderError, match="cancelled"):
        pool.describe_image(IMAGE, "image/png")
    assert second.calls == []


def test_fallback_skips_a_candidate_cooling_from_a_text_failure():
    clock = fake_clock("2026-09-20T10:00:00.000Z")
    primary, backup = Seer("a", text_error=ProviderError("a", "rate", "slow down")), Seer("b")
    pool = FallbackProvider([primary, backup], clock=clock)
    assert pool.generate_message(GenerateInput(prompt="oi")).message == "b ok"  # the primary cools 60 s

    assert pool.transcribe(AUDIO, "audio/ogg") == "b transcribe" and primary.calls == []
    clock.advance("61s")
    assert pool.transcribe(AUDIO, "audio/ogg") == "a transcribe"  # cooled down: asked again


def test_fallback_with_every_able_candidate_cooling_says_when_to_retry():
    clock = fake_clock("2026-09-20T10:00:00.000Z")
    only = Seer("a", text_error=ProviderError("a", "rate", "slow down", retry_after_ms=5_000))
    pool = FallbackProvider([only, Seer("deaf", hears=False)], clock=clock)
    assert pool.generate_message(GenerateInput(prompt="oi")).message == "deaf ok"  # "a" cools 5 s
    with pytest.raises(NoAvailableProviderError) as caught:
        pool.transcribe(AUDIO, "audio/ogg")
    assert caught.value.retry_after_ms == 5_000 and only.calls == []  # the deaf one's "now" does not count


def test_fallback_async_twins_over_sync_only_candidates():
    primary = Seer("a", ProviderError("a", "overload", "busy"))
    pool = FallbackProvider([primary, Seer("b")])

    async def both():
        return await pool.atranscribe(AUDIO, "audio/ogg"), await pool.adescribe_image(IMAGE, "image/png")

    assert asyncio.run(both()) == ("b transcribe", "a describe_image")


def test_fallback_over_real_vendors(gemini_server, make_gemini, server, make_vendor):
    claude = make_vendor(AnthropicProvider, path="", model="claude-sonnet-4-5")
    gemini = make_gemini(api_key=SECRET)
    gemini_server.error(400, error_body(400, "INVALID_ARGUMENT", "Unsupported MIME type."))
    pool = FallbackProvider([claude, gemini, OfflineProvider()])

    assert pool.transcribe(AUDIO, "audio/amr") == f"[transcription: audio/amr, {len(AUDIO)} bytes]"
    assert server.requests == [] and len(gemini_server.requests) == 1  # Claude skipped, Gemini failed once

    gemini_server.stream_text("Três parafusos.")
    assert asyncio.run(pool.atranscribe(AUDIO, "audio/ogg")) == "Três parafusos."
