"""Model providers: Gemini, the fallback pool and the offline provider, on the contract in
`falai_django.llm` (re-exported here; `base`, `classify`, `jsonparse` and `streaming` are
old paths kept for imports; importing through them keeps `providers.classify` the function, not
the submodule of that name).

- `jsonparse`: lenient envelope parsing (`envelope_of`, `try_parse_json_response`, ...), §6.3.
- `streaming`: `StreamingMessageDecoder` / `extract_message_so_far`, §4.2.
- `classify`: `classify_error(exc, provider_name) -> ProviderError`, `speak_deferral`, §5.4 / §6.5.
- `GeminiProvider` (google-genai), `OpenAIProvider` / `OpenAICompatibleProvider` /
  `OpenRouterProvider` / `DeepSeekProvider` (openai), `AnthropicProvider` (anthropic) and
  `FallbackProvider` resolve lazily, so importing this package imports no SDK.
- `adapter`: the pipeline those vendor providers share (retries, backup models, redaction, the
  terminal envelope).
"""

from __future__ import annotations

from falai_django._lazy import lazy_exports
from falai_django.providers.base import (
    BaseProvider,
    GenerateInput,
    GenerateOutput,
    GenerateParameters,
    Provider,
    ProviderCapabilities,
    StreamChunk,
    ToolSpec,
    as_chunk,
    as_output,
    read_usage,
)
from falai_django.providers.classify import (
    classify,
    classify_error,
    classify_kind,
    is_retryable,
    speak_deferral,
)
from falai_django.providers.jsonparse import (
    envelope_of,
    extract_embedded_json_object,
    is_json_shaped,
    is_record,
    parse_json_response,
    try_parse_json_response,
)
from falai_django.providers.streaming import StreamingMessageDecoder, extract_message_so_far

_LAZY = {
    "GeminiProvider": "falai_django.providers.gemini",
    "FallbackProvider": "falai_django.providers.fallback",
    "NoAvailableProviderError": "falai_django.providers.fallback",
    "CooldownInfo": "falai_django.providers.fallback",
    "OpenAIProvider": "falai_django.providers.openai",
    "OpenAICompatibleProvider": "falai_django.providers.openai",
    "OpenRouterProvider": "falai_django.providers.openai",
    "DeepSeekProvider": "falai_django.providers.openai",
    "AnthropicProvider": "falai_django.providers.anthropic",
}

__all__ = [
    "BaseProvider", "GenerateInput", "GenerateOutput", "GenerateParameters", "Provider",
    "ProviderCapabilities", "StreamChunk", "ToolSpec", "as_chunk", "as_output", "read_usage",
    "classify", "classify_error", "classify_kind", "is_retryable", "speak_deferral",
    "envelope_of", "extract_embedded_json_object", "is_json_shaped", "is_record",
    "parse_json_response", "try_parse_json_response",
    "StreamingMessageDecoder", "extract_message_so_far",
    *_LAZY,
]


__getattr__ = lazy_exports(__name__, globals(), _LAZY)
