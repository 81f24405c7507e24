"""The provider failure contract: `ProviderError` and its kinds (persistence-and-LLM note §5.4);
`classify_error` (any failure as a `ProviderError`, read by `classify`) and `speak_deferral`.

`FalaiError`, the base of every error this package raises on purpose, lives here so the
leaf owns the class providers raise; `falai_django.engine.errors` re-exports both.
"""

from __future__ import annotations

from typing import Any

from falai_django.llm.classify import (
    BACKUP_ELIGIBLE_KINDS,
    BODY_LIMIT,
    ERROR_KINDS,
    TRANSIENT_KINDS,
    body_text_of,
    classify_kind,
    code_of,
    message_of,
    retry_after_ms_of,
    should_retry_of,
    status_of,
    with_codes,
)

# the kinds are named here too: `engine.errors` and `falai_django.llm` re-export them from this module
__all__ = [
    "BACKUP_ELIGIBLE_KINDS", "ERROR_KINDS", "OUTCOME_CODE_OF_KIND", "TRANSIENT_KINDS", "FalaiError", "ProviderError",
    "classify_error", "is_retryable", "speak_deferral",
]


class FalaiError(Exception):
    """Base class of every error this package raises on purpose."""

    @property
    def name(self) -> str:
        """The class name, as upstream's `error.name` (`"SessionConflictError"`, …)."""
        return type(self).__name__


class ProviderError(FalaiError):
    """A model call failed; `kind` is one of ERROR_KINDS."""

    classified = True  # `classify.is_provider_error`: passed through, never classified again

    def __init__(
        self,
        provider: str,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        retry_after_ms: int | None = None,
        reset_at_ms: int | None = None,
        window: str | None = None,
        should_retry: bool | None = None,
        body: Any = None,
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"ProviderError kind must be one of {', '.join(ERROR_KINDS)}; got {kind!r}")
        self.provider = provider
        self.kind = kind
        self.status = status
        self.code = code
        self.retry_after_ms = retry_after_ms
        self.reset_at_ms = reset_at_ms
        self.window = window
        self.should_retry = should_retry
        self.body = body
        super().__init__(message)

    @property
    def is_transient(self) -> bool:
        return self.kind in TRANSIENT_KINDS

    @property
    def is_backup_eligible(self) -> bool:
        return self.kind in BACKUP_ELIGIBLE_KINDS

    @classmethod
    def from_(cls, provider: str, error: BaseException) -> ProviderError:
        """Upstream's static `ProviderError.from(provider, err)`: any failure as a classified
        `ProviderError` (persistence-and-LLM note §5.4); an existing one passes through unchanged."""
        return classify_error(error, provider)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_provider_error,
            (self.provider, self.kind, str(self), self.status, self.code, self.retry_after_ms,
             self.reset_at_ms, self.window, self.should_retry, self.body),
        )


def _rebuild_provider_error(provider: str, kind: str, message: str, status: int | None, code: str | None,
                            retry_after_ms: int | None, reset_at_ms: int | None, window: str | None,
                            should_retry: bool | None, body: Any) -> ProviderError:
    return ProviderError(provider, kind, message, status=status, code=code, retry_after_ms=retry_after_ms,
                         reset_at_ms=reset_at_ms, window=window, should_retry=should_retry, body=body)


# -- any failure as a ProviderError (§5.4), and what a failed speak call becomes (§6.5) ----------

def classify_error(exc: BaseException, provider_name: str, *, in_stream: bool = False) -> ProviderError:
    """`exc` as a classified `ProviderError` (an existing one passes through unchanged).

    `in_stream=True` marks a failure reported inside an already-open (HTTP 200) stream: a
    kind of `unknown` is then floored to `overload`, since such a failure is an upstream fault.
    """
    if isinstance(exc, ProviderError):
        return exc
    status = status_of(exc)
    body = body_text_of(exc)
    kind = classify_kind(exc, status, with_codes(body, exc))
    if in_stream and kind == "unknown":
        kind = "overload"
    error = ProviderError(
        provider_name,
        kind,
        f"{provider_name} {kind}: {message_of(exc)}",
        status=status,
        code=code_of(exc),
        retry_after_ms=retry_after_ms_of(exc, body),
        should_retry=should_retry_of(exc),
        body=body[:BODY_LIMIT] or None,
    )
    error.__cause__ = exc
    return error


# -- what a failed speak call becomes (§6.5) -----------------------------------------------

OUTCOME_CODE_OF_KIND = {
    "aborted": "provider-unavailable", "timeout": "provider-unavailable", "network": "provider-unavailable",
    "overload": "provider-unavailable", "rate": "provider-unavailable", "unknown": "provider-unavailable",
    "quota": "provider-quota",
    "entitlement": "provider-auth", "auth": "provider-auth",
    "model": "provider-invalid", "invalid": "provider-invalid", "content": "provider-invalid",
    "context": "provider-context",
}
_RETRYABLE_KINDS = frozenset({"timeout", "network", "overload", "rate", "unknown"})


def is_retryable(error: ProviderError) -> bool:
    """§6.5: `should_retry` wins both ways; else transient kinds, unknown, and quota with a known reset."""
    if error.should_retry is not None:
        return error.should_retry
    if error.kind in _RETRYABLE_KINDS:
        return True
    return error.kind == "quota" and error.reset_at_ms is not None


def speak_deferral(exc: BaseException, provider_name: str = "provider") -> dict[str, Any]:
    """The speak deferral for any failure: `{"code", "retryable", "reset_at_ms"}` (§6.5 table)."""
    error = classify_error(exc, provider_name)
    return {
        "code": OUTCOME_CODE_OF_KIND[error.kind],
        "retryable": is_retryable(error),
        "reset_at_ms": error.reset_at_ms,
    }
