"""The interface the engine needs from a model provider (persistence-and-LLM note §5.1).

Plain dataclasses, so the engine stays free of any SDK. A provider implements the sync
pair (`generate_message`, `generate_message_stream`); the async twins default to running
the sync ones in a thread, and a provider with a native async client may override them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from .errors import ProviderError
from .pump import iterate_in_thread


class _Readable:
    """Dict-style reads of a dataclass under its field names or upstream's camelCase ones, so a
    provider written against the TypeScript shapes (`input["parameters"]["schemaName"]`) works."""

    _ALIASES: dict[str, str] = {}
    if TYPE_CHECKING:  # the dataclass this is mixed into has them
        __dataclass_fields__: ClassVar[dict[str, Any]]

    def __getitem__(self, key: str) -> Any:
        name = self._ALIASES.get(key, key)
        if name not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, name)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        fields = self.__dataclass_fields__
        return isinstance(key, str) and self._ALIASES.get(key, key) in fields


@dataclass
class ProviderCapabilities:
    supports_tools: bool = True
    supports_native_json_schema: bool = True
    supports_streaming: bool = True
    supports_streaming_tool_calls: bool = False
    supports_prompt_caching: bool = False


@dataclass
class ToolSpec(_Readable):
    """A tool offered to the model: `name` falls back to `id`."""

    id: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


@dataclass
class GenerateParameters(_Readable):
    json_schema: dict[str, Any] = field(default_factory=dict)  # {} means "no JSON mode"
    schema_name: str | None = None  # "understand", "speak", or None (compaction summary)
    max_output_tokens: int | None = None
    reasoning: dict[str, Any] | None = None

    _ALIASES = {"jsonSchema": "json_schema", "schemaName": "schema_name", "maxOutputTokens": "max_output_tokens"}


@dataclass
class GenerateInput(_Readable):
    """One model call. `prompt` goes last as the user message; `system` first, cacheable.

    History items are dicts: {"role": "user"|"assistant"|"system", "content": str} plus, for
    tool rounds, assistant items with "tool_calls" ([{"id", "name", "arguments"}]; "toolName" is
    read too) and
    {"role": "tool", "tool_call_id", "name", "content"} items.
    """

    prompt: str
    system: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    context: Any = None
    tools: list[ToolSpec] | None = None
    parameters: GenerateParameters = field(default_factory=GenerateParameters)


@dataclass
class GenerateOutput(_Readable):
    """`structured` is the parsed JSON envelope (plus `toolCalls` when tools were called)."""

    message: str
    metadata: dict[str, Any] = field(default_factory=dict)
    structured: dict[str, Any] | None = None


@dataclass
class StreamChunk(_Readable):
    delta: str
    accumulated: str
    done: bool = False
    metadata: dict[str, Any] | None = None
    structured: dict[str, Any] | None = None  # only on the final chunk


def as_output(value: Any) -> GenerateOutput:
    """A provider's `generate_message` answer as a `GenerateOutput`.

    Accepts the dataclass itself, a dict in upstream's shape (`{"message", "structured"?,
    "metadata"?}`), a bare string (a text-only provider), or any object with those attributes.
    """
    if isinstance(value, GenerateOutput):
        return value
    if isinstance(value, str):
        return GenerateOutput(message=value)
    read = value.get if isinstance(value, dict) else (lambda key, default=None: getattr(value, key, default))
    message = read("message", "")
    return GenerateOutput(message=message if isinstance(message, str) else "",
                          metadata=dict(read("metadata", None) or {}), structured=read("structured", None))


def as_chunk(value: Any) -> StreamChunk:
    """A streamed chunk as a `StreamChunk` (the dataclass, a dict in upstream's shape, or an object)."""
    if isinstance(value, StreamChunk):
        return value
    read = value.get if isinstance(value, dict) else (lambda key, default=None: getattr(value, key, default))
    delta = read("delta", "") or ""
    accumulated = read("accumulated", None)
    return StreamChunk(delta=delta, accumulated=delta if accumulated is None else accumulated,
                       done=bool(read("done", False)), metadata=read("metadata", None),
                       structured=read("structured", None))


@runtime_checkable
class Provider(Protocol):
    name: str
    capabilities: ProviderCapabilities

    def generate_message(self, input: GenerateInput) -> GenerateOutput: ...

    def generate_message_stream(self, input: GenerateInput) -> Iterator[StreamChunk]: ...

    async def agenerate_message(self, input: GenerateInput) -> GenerateOutput: ...

    def agenerate_message_stream(self, input: GenerateInput) -> AsyncIterator[StreamChunk]: ...


class BaseProvider:
    """Convenience base: implement the two sync methods, get the async twins for free."""

    name: str = "provider"
    capabilities: ProviderCapabilities = ProviderCapabilities()

    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        last: StreamChunk | None = None
        for chunk in self.generate_message_stream(input):
            last = as_chunk(chunk)
        if last is None:
            raise ProviderError(self.name, "overload", f"{self.name}: no response")
        return GenerateOutput(message=last.accumulated, metadata=last.metadata or {}, structured=last.structured)

    def generate_message_stream(self, input: GenerateInput) -> Iterator[StreamChunk]:
        out = as_output(self.generate_message(input))
        yield StreamChunk(delta=out.message, accumulated=out.message, done=True,
                          metadata=out.metadata, structured=out.structured)

    async def agenerate_message(self, input: GenerateInput) -> GenerateOutput:
        """See generate_message()."""
        return await asyncio.to_thread(self.generate_message, input)

    def agenerate_message_stream(self, input: GenerateInput) -> AsyncIterator[StreamChunk]:
        """See generate_message_stream(). Runs the sync stream in a worker thread."""
        return iterate_in_thread(lambda: self.generate_message_stream(input))


def read_usage(metadata: dict[str, Any] | None) -> dict[str, int] | None:
    """Token counts from a reply's metadata, or None when the provider counted nothing."""
    if not metadata:
        return None
    if metadata.get("promptTokens") is None and metadata.get("completionTokens") is None:
        return None
    return {
        "promptTokens": int(metadata.get("promptTokens") or 0),
        "completionTokens": int(metadata.get("completionTokens") or 0),
        "cachedInputTokens": int(metadata.get("cachedInputTokens") or 0),
    }


def add_usage(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    """The sum of two `read_usage` counts (None counts nothing)."""
    if b is None:
        return a
    if a is None:
        return dict(b)
    return {k: a.get(k, 0) + b.get(k, 0) for k in ("promptTokens", "completionTokens", "cachedInputTokens")}
