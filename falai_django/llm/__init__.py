"""The contract between the engine and model providers: a leaf both sides import.

- `types`: the request / response dataclasses, stream chunks, `Provider`, `BaseProvider`,
  `read_usage` / `add_usage` (persistence-and-LLM note §5.1).
- `classify`: reading any failure: its `ProviderError` kind, status, body, retry hints (§5.4).
- `errors`: `ProviderError` and its kinds (the `FalaiError` base lives here too); `classify_error`
  (any failure as a `ProviderError`) and `speak_deferral` (§6.5).
- `jsonparse`: the lenient JSON envelope reader (§6.3).
- `streaming`: `StreamingMessageDecoder`, the `"message"` deltas of a streamed envelope (§4.2).
- `pump`: `iterate_in_thread`, a sync stream consumed from an event loop.
- `calling`: `call_provider` / `stream_provider` and `HOME_LOOP` (how a sync turn calls out).
- `guidelines`: the engine's built-in speak guidelines, which a provider may recognise.

Imports nothing else from `falai_django`, and no Django.
"""

from __future__ import annotations

from .calling import HOME_LOOP, call_provider, resolve_awaitable, stream_provider
from .classify import classify, classify_kind
from .errors import ERROR_KINDS, FalaiError, ProviderError, classify_error, is_retryable, speak_deferral
from .guidelines import DEFAULT_ANSWER, DEFAULT_COLLECT
from .jsonparse import (
    envelope_of,
    extract_embedded_json_object,
    is_json_shaped,
    is_record,
    parse_json_response,
    try_parse_json_response,
)
from .pump import iterate_in_thread
from .streaming import StreamingMessageDecoder, extract_message_so_far
from .types import (
    BaseProvider,
    GenerateInput,
    GenerateOutput,
    GenerateParameters,
    Provider,
    ProviderCapabilities,
    StreamChunk,
    ToolSpec,
    add_usage,
    as_chunk,
    as_output,
    read_usage,
)

__all__ = [
    "BaseProvider", "GenerateInput", "GenerateOutput", "GenerateParameters", "Provider",
    "ProviderCapabilities", "StreamChunk", "ToolSpec", "add_usage", "as_chunk", "as_output", "read_usage",
    "ERROR_KINDS", "FalaiError", "ProviderError",
    "classify", "classify_error", "classify_kind", "is_retryable", "speak_deferral",
    "envelope_of", "extract_embedded_json_object", "is_json_shaped", "is_record",
    "parse_json_response", "try_parse_json_response",
    "StreamingMessageDecoder", "extract_message_so_far",
    "iterate_in_thread", "HOME_LOOP", "call_provider", "resolve_awaitable", "stream_provider",
    "DEFAULT_ANSWER", "DEFAULT_COLLECT",
]
