"""The four public error classes. Messages keep the upstream shape
`[ClassName] <where>: <what>. <how to fix>.` so editors and tests can match on them."""

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


class FlowConfigurationError(FalaiError):
    """An authoring error: never retry, fix the flow. The message names flow and step."""

    def __init__(self, message: str) -> None:
        if not message.startswith("[FlowConfigurationError]"):
            message = f"[FlowConfigurationError] {message}"
        super().__init__(message)
        self.message = message


class SessionConflictError(FalaiError):
    """Another turn saved first (or the row vanished): reload and replay the same input."""

    def __init__(self, session_id: str, expected_version: int, actual_version: int | None = None) -> None:
        self.session_id = session_id
        self.expected_version = expected_version
        self.actual_version = actual_version
        if actual_version is None:
            message = (
                f'[SessionConflictError] Session "{session_id}" is gone from the store: it was at version '
                f"{expected_version} and has since been deleted or expired. Load it again; a load that finds "
                "nothing starts a new conversation."
            )
        else:
            message = (
                f'[SessionConflictError] Session "{session_id}" was modified concurrently: expected version '
                f"{expected_version}, found {actual_version}. Reload the session and retry the operation."
            )
        super().__init__(message)

    def __reduce__(self):  # picklable across processes (race tests use multiprocessing)
        return (type(self), (self.session_id, self.expected_version, self.actual_version))


class InvalidSessionError(FalaiError):
    """A stored blob is neither v4 nor a recognisable 3.x session. Never replaced by a fresh one."""

    def __init__(self, session_id: str | None, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        super().__init__(
            f'[InvalidSessionError] stored session "{session_id}" is unreadable: {reason}. '
            "Repair or delete the row; it is never replaced by a fresh conversation."
        )

    def __reduce__(self):
        return (type(self), (self.session_id, self.reason))


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
        from falai_django.providers.classify import classify_error

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
