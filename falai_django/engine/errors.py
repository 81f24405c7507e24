"""The four public error classes. Messages keep the upstream shape
`[ClassName] <where>: <what>. <how to fix>.` so editors and tests can match on them.

`ProviderError` (and the `FalaiError` base) belong to the provider contract in
`falai_django.llm`; they are re-exported here so both import paths give the same class."""

from __future__ import annotations

from typing import Any

from falai_django.llm.errors import (
    BACKUP_ELIGIBLE_KINDS,
    ERROR_KINDS,
    TRANSIENT_KINDS,
    FalaiError,
    ProviderError,
    _rebuild_provider_error,  # noqa: F401  (pickles written before the move name it here)
)

__all__ = [
    "BACKUP_ELIGIBLE_KINDS", "ERROR_KINDS", "TRANSIENT_KINDS", "FalaiError", "FlowConfigurationError",
    "InvalidSessionError", "ProviderError", "SessionConflictError",
]


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

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes (race tests use multiprocessing)
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

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.session_id, self.reason))
