"""`mock_provider`: the scripted test provider (persistence-and-LLM note §3.4).

    provider = mock_provider(understand=[{"flows": {"triagem": 90}}],
                             speak=[{"message": "Oi! Com quem eu falo?", "nome": None}])

Each schema name has its own FIFO list; a call shifts one entry. An entry is a reply dict,
a callable of the request (`GenerateInput`) returning one, or an exception instance to
raise. A dry list raises `MockExhaustedError` (a `ProviderError` of kind `unknown`) with the
upstream text `mockProvider: no scripted "<name>" reply left for call #<n>. ...`, where `<n>`
counts every call recorded so far, of any name: inside speak that becomes a retryable
`provider-unavailable` deferral, inside understand it escapes `turn()`. Calls without a
schema name (the compaction summary) are recorded as "(unnamed)" and read `summary`.

`.calls` holds `MockCall(schema_name, prompt, system, seen, input)` records; they also read
as dicts under the upstream names (`call["schemaName"]`) and compare equal to their schema
name (`provider.calls == ["understand", "speak"]`, the docs' inline double's shape).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from falai_django.llm.errors import ProviderError
from falai_django.llm.types import (
    BaseProvider,
    GenerateInput,
    GenerateOutput,
    ProviderCapabilities,
    StreamChunk,
    _Readable,
)

__all__ = ["MockCall", "MockExhaustedError", "MockProvider", "mock_provider"]

Entry = dict[str, Any] | Callable[[GenerateInput], dict[str, Any]] | BaseException

UNNAMED = "(unnamed)"


class MockExhaustedError(ProviderError):
    """A scripted list ran dry: the test made more calls than it scripted."""

    def __init__(self, name: str, call_number: int) -> None:
        super().__init__(
            "mock",
            "unknown",
            f'mockProvider: no scripted "{name}" reply left for call #{call_number}. '
            "Script more replies or expect fewer calls.",
        )


@dataclass
class MockCall(_Readable):
    """One recorded request. `seen` is system and prompt joined by a blank line."""

    schema_name: str
    prompt: str
    system: str | None
    seen: str
    input: GenerateInput

    _ALIASES = {"schemaName": "schema_name"}

    @property
    def schemaName(self) -> str:  # noqa: N802 - upstream's attribute name
        return self.schema_name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):  # the docs' inline double records bare schema names
            return self.schema_name == other
        if isinstance(other, MockCall):
            return (self.schema_name, self.prompt, self.system, self.seen, self.input) == (
                other.schema_name, other.prompt, other.system, other.seen, other.input)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable record


class MockProvider(BaseProvider):
    name = "mock"
    capabilities = ProviderCapabilities(
        supports_tools=True, supports_native_json_schema=True, supports_streaming=True,
        supports_streaming_tool_calls=True, supports_prompt_caching=False,
    )

    def __init__(self, script: dict[str, Iterable[Entry]], *, usage: bool = False, chunk_size: int = 7) -> None:
        self._queues: dict[str, deque[Entry]] = {name: deque(entries) for name, entries in script.items()}
        self.calls: list[MockCall] = []
        self.usage = usage
        self.chunk_size = max(1, chunk_size)

    # -- scripting -------------------------------------------------------------------------
    def add(self, name: str, *entries: Entry) -> None:
        """Script more replies for `name` ("understand", "speak", "summary")."""
        self._queues.setdefault(_queue_name(name), deque()).extend(entries)

    def remaining(self) -> dict[str, int]:
        return {name: len(queue) for name, queue in self._queues.items()}

    def names(self) -> list[str]:
        """Schema names of the calls so far, in call order."""
        return [call.schema_name for call in self.calls]

    def _reply(self, input: GenerateInput) -> tuple[dict[str, Any], str, dict[str, Any]]:
        name = input.parameters.schema_name or UNNAMED
        system = input.system
        prompt = input.prompt
        seen = "\n\n".join(part for part in (system, prompt) if part)
        self.calls.append(MockCall(name, prompt, system, seen, input))
        queue = self._queues.get(_queue_name(name))
        if not queue:
            raise MockExhaustedError(name, len(self.calls))
        entry = queue.popleft()
        if isinstance(entry, BaseException):
            raise entry
        structured = entry(input) if callable(entry) else entry
        if isinstance(structured, BaseException):
            raise structured
        if isinstance(structured, str):  # a bare text reply (e.g. a summary)
            message, structured = structured, None
        else:
            raw = structured.get("message") if isinstance(structured, dict) else None
            message = raw if isinstance(raw, str) else json.dumps(structured, ensure_ascii=False)
        metadata: dict[str, Any] = {"model": "mock"}
        if self.usage:
            metadata["promptTokens"] = len(system or "") + len(prompt or "")
            metadata["completionTokens"] = len(message)
            metadata["cachedInputTokens"] = 0
        return structured, message, metadata

    # -- Provider interface ----------------------------------------------------------------
    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        structured, message, metadata = self._reply(input)
        return GenerateOutput(message=message, metadata=metadata, structured=structured)

    def generate_message_stream(self, input: GenerateInput) -> Iterator[StreamChunk]:
        """Streams the reply's JSON text in small chunks, like a real provider streams its envelope."""
        structured, message, metadata = self._reply(input)
        text = json.dumps(structured, ensure_ascii=False) if structured is not None else message
        size = self.chunk_size
        accumulated = ""
        for start in range(0, len(text), size):
            piece = text[start : start + size]
            accumulated += piece
            yield StreamChunk(delta=piece, accumulated=accumulated)
        yield StreamChunk(delta="", accumulated=accumulated, done=True, metadata=metadata, structured=structured)


def _queue_name(name: str) -> str:
    return "summary" if name in (UNNAMED, "summary", None) else name


def mock_provider(
    understand: Iterable[Entry] = (),
    speak: Iterable[Entry] = (),
    summary: Iterable[Entry] = (),
    *,
    usage: bool = False,
    chunk_size: int = 7,
    **other: Iterable[Entry],
) -> MockProvider:
    """A scripted provider; see the module docstring.

    The upstream call shape `mock_provider({"understand": [...], "speak": [...]})` (one script
    mapping of schema names to lists) is accepted too.
    """
    if isinstance(understand, Mapping) and understand and all(
        isinstance(entries, list | tuple) for entries in understand.values()
    ):
        given = dict(understand)
        script_map: dict[str, Iterable[Entry]] = {
            "understand": given.pop("understand", ()),
            "speak": given.pop("speak", speak),
            "summary": given.pop("summary", given.pop(UNNAMED, summary)),
        }
        script_map.update(given)
        script_map.update(other)
        return MockProvider(script_map, usage=usage, chunk_size=chunk_size)
    script: dict[str, Iterable[Entry]] = {"understand": understand, "speak": speak, "summary": summary}
    script.update(other)
    return MockProvider(script, usage=usage, chunk_size=chunk_size)
