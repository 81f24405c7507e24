"""Model providers: Gemini, OpenAI, Anthropic, the fallback pool and the offline provider, on the
contract in `falai_django.llm` (its names a provider needs are importable from here too:
`BaseProvider`, the request and response types, `envelope_of`, `StreamingMessageDecoder`,
`classify_error`, `speak_deferral`, ...).

- `GeminiProvider` (google-genai), `OpenAIProvider` / `OpenAICompatibleProvider` /
  `OpenRouterProvider` / `DeepSeekProvider` (openai), `AnthropicProvider` (anthropic) and
  `FallbackProvider` resolve lazily, so importing this package imports no SDK.
- `adapter`: the pipeline those vendor providers share (retries, backup models, redaction, the
  terminal envelope).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from falai_django._lazy import lazy_exports
from falai_django.llm.classify import classify, classify_kind
from falai_django.llm.errors import classify_error, is_retryable, speak_deferral
from falai_django.llm.jsonparse import (
    envelope_of,
    extract_embedded_json_object,
    is_json_shaped,
    is_record,
    parse_json_response,
    try_parse_json_response,
)
from falai_django.llm.streaming import StreamingMessageDecoder, extract_message_so_far
from falai_django.llm.types import (
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

if TYPE_CHECKING:
    from falai_django.providers.anthropic import AnthropicProvider
    from falai_django.providers.fallback import CooldownInfo, FallbackProvider, NoAvailableProviderError
    from falai_django.providers.gemini import GeminiProvider
    from falai_django.providers.openai import (
        DeepSeekProvider,
        OpenAICompatibleProvider,
        OpenAIProvider,
        OpenRouterProvider,
    )

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
    "GeminiProvider", "FallbackProvider", "NoAvailableProviderError", "CooldownInfo", "OpenAIProvider",
    "OpenAICompatibleProvider", "OpenRouterProvider", "DeepSeekProvider", "AnthropicProvider",
]


__getattr__ = lazy_exports(__name__, globals(), _LAZY)
