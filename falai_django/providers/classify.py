"""Moved to `falai_django.llm.classify`; this path keeps old imports working."""

from __future__ import annotations

from falai_django.llm.classify import (
    OUTCOME_CODE_OF_KIND,
    body_text_of,
    classify,
    classify_error,
    classify_kind,
    code_of,
    is_abort,
    is_retryable,
    is_transport_failure,
    message_of,
    retry_after_ms_of,
    speak_deferral,
    status_of,
)

__all__ = [
    "OUTCOME_CODE_OF_KIND", "body_text_of", "classify", "classify_error", "classify_kind", "code_of", "is_abort",
    "is_retryable", "is_transport_failure", "message_of", "retry_after_ms_of", "speak_deferral", "status_of",
]
