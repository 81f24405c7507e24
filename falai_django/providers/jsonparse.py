"""Moved to `falai_django.llm.jsonparse`; this path keeps old imports working."""

from __future__ import annotations

from falai_django.llm.jsonparse import (
    envelope_of,
    extract_embedded_json_object,
    is_json_shaped,
    is_record,
    parse_json_response,
    try_parse_json_response,
)

__all__ = ["envelope_of", "extract_embedded_json_object", "is_json_shaped", "is_record", "parse_json_response",
           "try_parse_json_response"]
