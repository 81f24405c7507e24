"""falai_django: the @falai/agent v4 conversational-agent framework in Python, as a Django app.

The engine (everything importable from this module) needs no Django settings:
`import falai_django` works in a plain Python process. Names resolve lazily so that
importing the package stays cheap and never touches Django.
"""

from __future__ import annotations

from falai_django._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # authoring
    "falai": "falai_django.engine.toolkit",
    "Agent": "falai_django.engine.agent",
    "from_spec": "falai_django.engine.spec",
    "to_spec": "falai_django.engine.spec",
    "validate_flow": "falai_django.engine.spec",
    "flow_spec_schema": "falai_django.engine.spec",
    "parse_duration": "falai_django.engine.durations",
    # sessions
    "Session": "falai_django.engine.session",
    "Run": "falai_django.engine.session",
    "StepOutcome": "falai_django.engine.session",
    "OutboundMessage": "falai_django.engine.results",
    "ScheduleEntry": "falai_django.engine.results",
    "TurnResult": "falai_django.engine.results",
    "user_message": "falai_django.engine.session",
    "assistant_message": "falai_django.engine.session",
    "migrate_session": "falai_django.engine.migrate",
    "OUTCOME_MESSAGES": "falai_django.engine.outcomes",  # code -> its one sentence (upstream exports it too)
    # stores
    "Store": "falai_django.stores.base",
    "MemoryStore": "falai_django.stores.memory",
    "PostgresStore": "falai_django.stores.postgres",
    "SQLiteStore": "falai_django.stores.sqlite",
    "RedisStore": "falai_django.stores.redis",
    # errors
    "SessionConflictError": "falai_django.engine.errors",
    "InvalidSessionError": "falai_django.engine.errors",
    "FlowConfigurationError": "falai_django.engine.errors",
    "ProviderError": "falai_django.engine.errors",
    # providers
    "GeminiProvider": "falai_django.providers.gemini",
    "FallbackProvider": "falai_django.providers.fallback",
    "OpenAIProvider": "falai_django.providers.openai",
    "OpenAICompatibleProvider": "falai_django.providers.openai",
    "OpenRouterProvider": "falai_django.providers.openai",
    "DeepSeekProvider": "falai_django.providers.openai",
    "AnthropicProvider": "falai_django.providers.anthropic",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
