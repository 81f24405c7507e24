"""Error classification (engine-persistence-llm.md §5.4, README ruling 9) and the speak failure
table (§6.5)."""

from __future__ import annotations

import errno

import pytest

from falai_django import ProviderError
from falai_django.providers import classify_error, classify_kind, is_retryable, speak_deferral


class Failure(Exception):
    """A vendor-ish exception: optional `status`, `status_code`, `code`."""

    def __init__(self, message="", *, status=None, status_code=None, code=None, headers=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        if status_code is not None:
            self.status_code = status_code
        if code is not None:
            self.code = code
        if headers is not None:
            self.headers = headers


class AbortError(Exception):
    pass


def kind(exc):
    return classify_kind(exc)


# --------------------------------------------------------------------------- each rule


def test_rule_1_an_existing_provider_error_keeps_its_kind_and_passes_through():
    err = ProviderError("gemini", "quota", "gemini quota: out", status=429)
    assert kind(err) == "quota"
    assert classify_error(err, "other") is err


def test_rule_2_abort():
    assert kind(AbortError("the user pressed stop")) == "aborted"
    # an abort outranks everything else it carries
    assert kind(AbortError("fetch failed 503")) == "aborted"


def test_rule_3_transport_failures_are_network():
    assert kind(ConnectionResetError("reset by peer")) == "network"
    assert kind(Failure("boom", code="ECONNRESET")) == "network"
    assert kind(Failure("boom", code="UND_ERR_SOCKET")) == "network"
    assert kind(Failure("fetch failed")) == "network"


def test_rule_3_walks_the_cause_chain_up_to_five_levels():
    def chain(depth, root):
        exc = root
        for i in range(depth):
            outer = Failure(f"wrapper {i}")
            outer.__cause__ = exc
            exc = outer
        return exc

    assert kind(chain(1, OSError(errno.ECONNRESET, "reset"))) == "network"
    assert kind(chain(4, Failure("x", code="ECONNREFUSED"))) == "network"  # the 5th level
    assert kind(chain(5, Failure("x", code="ECONNREFUSED"))) != "network"  # the 6th is too deep


def test_rule_4_timeout_error_or_408():
    assert kind(TimeoutError("deadline")) == "timeout"
    assert kind(Failure("request timeout", status=408)) == "timeout"
    assert kind(Failure("slow", status=408)) == "timeout"


@pytest.mark.parametrize("status", [None, 400, 429, 403])
def test_rule_5_body_patterns_read_before_status_for_4xx_and_no_status(status):
    assert kind(Failure("This model's maximum context length is 8192 tokens", status=status)) == "context"
    assert kind(Failure("Your plan does not include API access", status=status)) == "entitlement"
    assert kind(Failure("You exceeded your current quota, check billing", status=status)) == "quota"
    assert kind(Failure("余额不足", status=status)) == "quota"


def test_rule_5_does_not_apply_to_5xx():
    assert kind(Failure("maximum context length", status=500)) == "overload"
    assert kind(Failure("insufficient_quota", status=503)) == "overload"


def test_rule_6_model_not_found_wording():
    assert kind(Failure("models/gemini-99 is not found for API version v1beta", status=400)) == "model"
    assert kind(Failure("model not found", status=401)) == "model"  # before auth


def test_rule_7_auth_status_or_wording():
    assert kind(Failure("nope", status=401)) == "auth"
    assert kind(Failure("nope", status=403)) == "auth"
    assert kind(Failure("API key not valid. Please pass a valid API key.", status=400)) == "auth"
    assert kind(Failure("PERMISSION_DENIED")) == "auth"


def test_rules_8_to_10_statuses():
    assert kind(Failure("pay", status=402)) == "quota"
    assert kind(Failure("where", status=404)) == "model"
    assert kind(Failure("slow down", status=429)) == "rate"


def test_rule_11_content_wording_beats_server_statuses():
    assert kind(Failure("blocked by the safety filter", status=400)) == "content"
    assert kind(Failure("content_filter triggered", status=503)) == "content"


def test_rules_12_and_13_overload_statuses():
    for status in (529, 409, 425, 500, 502, 503, 504):
        assert kind(Failure("x", status=status)) == "overload", status


def test_rule_14_rate_wording():
    assert kind(Failure("RESOURCE_EXHAUSTED")) == "rate"
    assert kind(Failure("Too Many Requests")) == "rate"
    assert kind(Failure("RESOURCE_EXHAUSTED", status=400)) == "rate"  # before "other 4xx"


def test_rule_15_overload_wording():
    for text in ("UNAVAILABLE", "INTERNAL", "the model is overloaded", "no capacity right now"):
        assert kind(Failure(text)) == "overload", text


def test_rule_16_timed_out_wording():
    assert kind(Failure("the request timed out")) == "timeout"
    assert kind(Failure("the request timed out", status=400)) == "timeout"


def test_rule_17_other_4xx_is_invalid():
    assert kind(Failure("bad field", status=400)) == "invalid"
    assert kind(Failure("bad field", status=422)) == "invalid"


def test_rule_18_otherwise_unknown():
    assert kind(Exception("boom")) == "unknown"
    assert kind(RuntimeError("x is not a function")) == "unknown"
    assert kind(ValueError("")) == "unknown"


# --------------------------------------------------------------------------- README ruling 9


def test_ruling_9_status_code_attribute_and_sdk_code():
    assert kind(Failure("x", status_code=429)) == "rate"
    assert kind(Failure("x", status_code=503)) == "overload"
    assert kind(Failure("x", code=401)) == "auth"  # google-genai keeps the HTTP status in `code`


def test_ruling_9_google_genai_errors():
    from google.genai import errors

    body = {"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                      "status": "RESOURCE_EXHAUSTED"}}
    assert kind(errors.ClientError(429, body)) == "rate"
    bad_key = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                         "status": "INVALID_ARGUMENT"}}
    assert kind(errors.ClientError(400, bad_key)) == "auth"
    busy = {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                      "status": "UNAVAILABLE"}}
    assert kind(errors.ServerError(503, busy)) == "overload"
    gone = {"error": {"code": 404, "message": "models/gemini-0 is not found", "status": "NOT_FOUND"}}
    assert kind(errors.ClientError(404, gone)) == "model"


def test_classify_error_builds_a_provider_error_with_status_code_and_retry_after():
    exc = Failure('quota hit {"retryDelay": "52s"}', status=429)
    err = classify_error(exc, "gemini")
    assert isinstance(err, ProviderError)
    assert (err.provider, err.kind, err.status) == ("gemini", "rate", 429)
    assert err.retry_after_ms == 52_000
    assert err.is_transient and err.is_backup_eligible


def test_retry_after_header_seconds_and_should_retry_header():
    exc = Failure("slow", status=429, headers={"retry-after": "7", "x-should-retry": "false"})
    err = classify_error(exc, "p")
    assert err.retry_after_ms == 7000
    assert err.should_retry is False


def test_transient_and_backup_eligible_kinds():
    for k in ("timeout", "network", "overload", "rate"):
        assert ProviderError("p", k, "m").is_transient
    for k in ("quota", "auth", "model", "invalid", "unknown", "aborted", "content", "context", "entitlement"):
        assert not ProviderError("p", k, "m").is_transient
    assert {k for k in ("overload", "rate", "model", "timeout") if ProviderError("p", k, "m").is_backup_eligible} == {
        "overload", "rate"}


# --------------------------------------------------------------------------- §6.5 speak failures

TABLE = {
    "aborted": "provider-unavailable", "timeout": "provider-unavailable", "network": "provider-unavailable",
    "overload": "provider-unavailable", "rate": "provider-unavailable", "unknown": "provider-unavailable",
    "quota": "provider-quota", "entitlement": "provider-auth", "auth": "provider-auth",
    "model": "provider-invalid", "invalid": "provider-invalid", "content": "provider-invalid",
    "context": "provider-context",
}
RETRYABLE = {"timeout", "network", "overload", "rate", "unknown"}


@pytest.mark.parametrize("k", sorted(TABLE))
def test_speak_failure_table(k):
    deferral = speak_deferral(ProviderError("p", k, "m"))
    assert deferral["code"] == TABLE[k]
    assert deferral["retryable"] is (k in RETRYABLE)


def test_quota_is_retryable_only_with_a_known_reset():
    assert is_retryable(ProviderError("p", "quota", "m")) is False
    assert is_retryable(ProviderError("p", "quota", "m", reset_at_ms=1_790_000_000_000)) is True


def test_should_retry_wins_both_ways():
    assert is_retryable(ProviderError("p", "overload", "m", should_retry=False)) is False
    assert is_retryable(ProviderError("p", "invalid", "m", should_retry=True)) is True


def test_a_plain_exception_from_a_mock_is_unknown_and_retryable():
    assert speak_deferral(RuntimeError("mock broke")) ["code"] == "provider-unavailable"
    assert speak_deferral(RuntimeError("mock broke"))["retryable"] is True


def test_provider_error_from_wraps_once_and_passes_existing_through():
    existing = ProviderError("gemini", "rate", "r")
    assert ProviderError.from_("other", existing) is existing
    wrapped = ProviderError.from_("gemini", Failure("nope", status=401))
    assert isinstance(wrapped, ProviderError) and wrapped.kind == "auth" and wrapped.provider == "gemini"
    assert wrapped.status == 401


def test_classify_takes_an_explicit_status_and_body():
    from falai_django.providers import classify

    assert classify(None, 429, "") == "rate"
    assert classify(None, 400, "This model's maximum context length is 8192 tokens") == "context"
    assert classify(None, None, "RESOURCE_EXHAUSTED") == "rate"
    assert classify(None) == "unknown"


def test_ruling_9_string_codes_are_read_too():
    assert kind(Failure("Request failed", status=429, code="insufficient_quota")) == "quota"
    assert kind(Failure("Request failed", code="RESOURCE_EXHAUSTED")) == "rate"
    assert kind(Failure("Request failed", status="UNAVAILABLE")) == "overload"
    assert kind(Failure("Request failed", status=400, code="context_length_exceeded")) == "context"
    assert classify_error(Failure("Request failed", status=429, code="insufficient_quota"), "p").kind == "quota"
