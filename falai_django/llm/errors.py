"""The provider failure contract: `ProviderError` and its kinds (persistence-and-LLM note §5.4).

`FalaiError`, the base of every error this package raises on purpose, lives here so the
leaf owns the class providers raise; `falai_django.engine.errors` re-exports both.
"""

from __future__ import annotations

from typing import Any

ERROR_KINDS = (
    "aborted", "timeout", "network", "overload", "rate", "quota", "entitlement",
    "auth", "model", "context", "content", "invalid", "unknown",
)
TRANSIENT_KINDS = frozenset({"timeout", "network", "overload", "rate"})
BACKUP_ELIGIBLE_KINDS = frozenset({"overload", "rate"})


class FalaiError(Exception):
    """Base class of every error this package raises on purpose."""

    @property
    def name(self) -> str:
        """The class name, as upstream's `error.name` (`"SessionConflictError"`, …)."""
        return type(self).__name__


class ProviderError(FalaiError):
    """A model call failed; `kind` is one of ERROR_KINDS."""

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
        from .classify import classify_error  # classify imports this module

        return classify_error(error, provider)

    def __reduce__(self):
        return (
            _rebuild_provider_error,
            (self.provider, self.kind, str(self), self.status, self.code, self.retry_after_ms,
             self.reset_at_ms, self.window, self.should_retry, self.body),
        )


def _rebuild_provider_error(provider, kind, message, status, code, retry_after_ms, reset_at_ms, window,
                            should_retry, body) -> ProviderError:
    return ProviderError(provider, kind, message, status=status, code=code, retry_after_ms=retry_after_ms,
                         reset_at_ms=reset_at_ms, window=window, should_retry=should_retry, body=body)
