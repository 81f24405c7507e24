"""Moved to `falai_django.llm` (the engine/provider contract); this path keeps old imports working."""

from __future__ import annotations

from falai_django.llm.pump import iterate_in_thread
from falai_django.llm.types import (
    BaseProvider,
    GenerateInput,
    GenerateOutput,
    GenerateParameters,
    Provider,
    ProviderCapabilities,
    StreamChunk,
    ToolSpec,
    _Readable,
    add_usage,
    as_chunk,
    as_output,
    read_usage,
)

__all__ = [
    "BaseProvider", "GenerateInput", "GenerateOutput", "GenerateParameters", "Provider", "ProviderCapabilities",
    "StreamChunk", "ToolSpec", "_Readable", "add_usage", "as_chunk", "as_output", "iterate_in_thread", "read_usage",
]
