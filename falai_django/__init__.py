"""falai_django: the @falai/agent v4 conversational-agent framework in Python, as a Django app.

The engine (everything importable from this module) needs no Django settings:
`import falai_django` works in a plain Python process. Names resolve lazily so that
importing the package stays cheap and never touches Django.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from falai_django._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers see; at run time each name resolves on first use
    from falai_django.engine.agent import Agent
    from falai_django.engine.durations import parse_duration
    from falai_django.engine.errors import (
        FlowConfigurationError,
        InvalidSessionError,
        ProviderError,
        SessionConflictError,
    )
    from falai_django.engine.migrate import migrate_session
    from falai_django.engine.outcomes import OUTCOME_MESSAGES
    from falai_django.engine.results import OutboundMessage, ScheduleEntry, TurnResult
    from falai_django.engine.session import Run, Session, StepOutcome, assistant_message, user_message
    from falai_django.engine.spec import (
        flow_authoring_schema,
        flow_spec_schema,
        from_spec,
        to_spec,
        validate_flow,
    )
    from falai_django.engine.toolkit import falai
    from falai_django.providers.anthropic import AnthropicProvider
    from falai_django.providers.fallback import FallbackProvider
    from falai_django.providers.gemini import GeminiProvider
    from falai_django.providers.openai import (
        DeepSeekProvider,
        OpenAICompatibleProvider,
        OpenAIProvider,
        OpenRouterProvider,
    )
    from falai_django.stores.base import Store
    from falai_django.stores.memory import MemoryStore
    from falai_django.stores.mongo import MongoStore
    from falai_django.stores.opensearch import OpenSearchStore
    from falai_django.stores.postgres import PostgresStore
    from falai_django.stores.prisma import PrismaStore
    from falai_django.stores.redis import RedisStore
    from falai_django.stores.sqlite import SQLiteStore

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # authoring
    "falai": "falai_django.engine.toolkit",
    "Agent": "falai_django.engine.agent",
    "from_spec": "falai_django.engine.spec",
    "to_spec": "falai_django.engine.spec",
    "validate_flow": "falai_django.engine.spec",
    "flow_spec_schema": "falai_django.engine.spec",
    "flow_authoring_schema": "falai_django.engine.spec",
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
    "MongoStore": "falai_django.stores.mongo",
    "PrismaStore": "falai_django.stores.prisma",
    "OpenSearchStore": "falai_django.stores.opensearch",
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

__all__ = [
    "Agent", "AnthropicProvider", "DeepSeekProvider", "FallbackProvider", "FlowConfigurationError",
    "GeminiProvider", "InvalidSessionError", "MemoryStore", "MongoStore", "OUTCOME_MESSAGES",
    "OpenAICompatibleProvider", "OpenAIProvider", "OpenSearchStore", "OpenRouterProvider", "OutboundMessage",
    "PostgresStore", "PrismaStore", "ProviderError", "RedisStore", "Run", "SQLiteStore", "ScheduleEntry", "Session",
    "SessionConflictError", "StepOutcome", "Store", "TurnResult", "assistant_message", "falai",
    "flow_authoring_schema", "flow_spec_schema", "from_spec", "migrate_session", "parse_duration", "to_spec",
    "user_message", "validate_flow",
]


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
