"""Failure classification (§5.4, README ruling 9) and the speak deferral mapping (§6.5)."""

from __future__ import annotations

import asyncio
import errno
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from falai_django.engine.errors import ProviderError
from falai_django.llm.classify import classify_kind, retry_after_ms_of
from falai_django.llm.errors import classify_error, speak_deferral


class SdkError(Exception):
    """An SDK-style error carrying whatever attributes a test gives it."""

    def __init__(self, message: str = "", **attributes):
        super().__init__(message)
        for key, value in attributes.items():
            setattr(self, key, value)


class Response:
    def __init__(self, status_code: int, headers: dict[str, str]):
        self.status_code = status_code
        self.headers = headers


def kind(exc: BaseException) -> str:
    return classify_error(exc, "p").kind


def test_provider_error_passes_through_unchanged():
    original = ProviderError("gemini", "timeout", "idle")
    assert classify_error(original, "other") is original


def test_a_plain_error_is_unknown():
    assert kind(RuntimeError("mockProvider: no scripted \"speak\" reply left for call #2.")) == "unknown"
    assert kind(ValueError("")) == "unknown"


def test_abort_is_aborted():
    assert kind(asyncio.CancelledError()) == "aborted"
    assert kind(type("AbortError", (Exception,), {})("stop")) == "aborted"


@pytest.mark.parametrize("exc", [
    ConnectionResetError(errno.ECONNRESET, "reset"),
    BrokenPipeError(errno.EPIPE, "pipe"),
    SdkError("boom", code="ECONNREFUSED"),
    SdkError("terminated", code="UND_ERR_SOCKET"),
    SdkError("fetch failed"),
    OSError(errno.ENETUNREACH, "unreachable"),
])
def test_transport_failures_are_network(exc):
    assert kind(exc) == "network"


def test_transport_cause_is_found_up_the_chain():
    try:
        try:
            raise ConnectionResetError(errno.ECONNRESET, "reset")
        except ConnectionResetError as inner:
            raise RuntimeError("request failed") from inner
    except RuntimeError as outer:
        assert kind(outer) == "network"


def test_undici_abort_code_is_not_network():
    assert kind(SdkError("aborted", code="UND_ERR_ABORTED")) == "unknown"


def test_timeouts():
    assert kind(TimeoutError("read timed out")) == "timeout"
    assert kind(SdkError("slow", status=408)) == "timeout"
    assert kind(SdkError("the upstream timed out")) == "timeout"


@pytest.mark.parametrize("attrs,message,expected", [
    ({"status": 429}, "Too many", "rate"),
    ({"status_code": 429}, "slow down", "rate"),
    ({"code": 429}, "whatever", "rate"),  # google-genai keeps the HTTP status in `code`
    ({"status": 401}, "nope", "auth"),
    ({"status": 403}, "nope", "auth"),
    ({"status": 402}, "pay", "quota"),
    ({"status": 404}, "nope", "model"),
    ({"status": 409}, "loading", "overload"),
    ({"status": 425}, "too early", "overload"),
    ({"status": 529}, "busy", "overload"),
    ({"status": 500}, "oops", "overload"),
    ({"status": 503}, "oops", "overload"),
    ({"status": 422}, "bad field", "invalid"),
    ({"status": 400}, "This model's maximum context length is 8192 tokens", "context"),
    ({"status": 429}, "Request too large: too many tokens", "context"),
    ({"status": 400}, "Your plan does not include API access", "entitlement"),
    ({"status": 429}, "You exceeded your current quota, please check your plan", "quota"),
    ({"status": 402}, "余额不足", "quota"),
    ({"status": 400}, "models/gemini-9 is not found for API version v1beta", "model"),
    ({"status": 400}, "API key not valid. Please pass a valid API key.", "auth"),
    ({"status": 400}, "The response was blocked due to SAFETY", "content"),
    ({}, "RESOURCE_EXHAUSTED", "rate"),
    ({}, "rate limit reached", "rate"),
    ({}, "UNAVAILABLE", "overload"),
    ({}, "The server is at capacity", "overload"),
    ({"status": 500}, "context window exceeded", "overload"),  # a 5xx never reads as context
])
def test_status_and_wording(attrs, message, expected):
    assert kind(SdkError(message, **attrs)) == expected


def test_string_code_and_status_are_kept():
    error = classify_error(SdkError("429 RESOURCE_EXHAUSTED", code=429, status="RESOURCE_EXHAUSTED"), "gemini")
    assert (error.kind, error.status, error.code) == ("rate", 429, "RESOURCE_EXHAUSTED")
    assert error.provider == "gemini" and error.__cause__ is not None


def test_body_on_the_exception_is_searched():
    exc = SdkError("400 Bad Request", code=400, details={"error": {"message": "prompt is too long"}})
    assert kind(exc) == "context"
    assert "prompt is too long" in classify_error(exc, "p").body


def test_retry_after_sources():
    assert retry_after_ms_of(SdkError("x", retry_after_ms=1500)) == 1500
    assert retry_after_ms_of(SdkError('{"retryDelay": "52s"}')) == 52_000
    assert retry_after_ms_of(SdkError("x", details={"details": [{"retryDelay": "0.25s"}]})) == 250
    assert retry_after_ms_of(SdkError("x", response=Response(429, {"retry-after": "3"}))) == 3000
    assert retry_after_ms_of(SdkError("x", headers={"Retry-After-Ms": "120"})) == 120
    later = datetime.now(UTC) + timedelta(seconds=30)
    from_date = retry_after_ms_of(SdkError("x", headers={"retry-after": format_datetime(later, usegmt=True)}))
    assert 25_000 <= from_date <= 30_000
    assert retry_after_ms_of(SdkError("x")) is None


def test_should_retry_header():
    exc = SdkError("x", status=500, response=Response(500, {"x-should-retry": "false"}))
    assert classify_error(exc, "p").should_retry is False


def test_in_stream_unknown_is_floored_to_overload():
    assert classify_error(SdkError("stream error: no reason given"), "p", in_stream=True).kind == "overload"
    assert classify_error(SdkError("bad", status=401), "p", in_stream=True).kind == "auth"


def test_classify_kind_from_status_and_body_alone():
    assert classify_kind(None, 429, "") == "rate"
    assert classify_kind(None, None, "") == "unknown"


@pytest.mark.parametrize("error,expected", [
    (ProviderError("p", "rate", "x"), {"code": "provider-unavailable", "retryable": True, "reset_at_ms": None}),
    (ProviderError("p", "unknown", "x"), {"code": "provider-unavailable", "retryable": True, "reset_at_ms": None}),
    (ProviderError("p", "aborted", "x"), {"code": "provider-unavailable", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "quota", "x"), {"code": "provider-quota", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "quota", "x", reset_at_ms=5), {"code": "provider-quota", "retryable": True, "reset_at_ms": 5}),
    (ProviderError("p", "auth", "x"), {"code": "provider-auth", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "entitlement", "x"), {"code": "provider-auth", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "content", "x"), {"code": "provider-invalid", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "model", "x"), {"code": "provider-invalid", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "context", "x"), {"code": "provider-context", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "overload", "x", should_retry=False),
     {"code": "provider-unavailable", "retryable": False, "reset_at_ms": None}),
    (ProviderError("p", "invalid", "x", should_retry=True),
     {"code": "provider-invalid", "retryable": True, "reset_at_ms": None}),
    (RuntimeError("no scripted reply"), {"code": "provider-unavailable", "retryable": True, "reset_at_ms": None}),
])
def test_speak_deferral(error, expected):
    assert speak_deferral(error) == expected


def test_transport_wording_in_a_server_answer_is_not_network():
    exc = SdkError("503 upstream: connection reset by peer", status=503)
    assert kind(exc) == "overload"
