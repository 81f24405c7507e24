"""Moved to `falai_django.llm.streaming`; this path keeps old imports working."""

from __future__ import annotations

from falai_django.llm.streaming import Pushed, StreamingMessageDecoder, extract_message_so_far

__all__ = ["Pushed", "StreamingMessageDecoder", "extract_message_so_far"]
