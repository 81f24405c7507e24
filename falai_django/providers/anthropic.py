"""`AnthropicProvider`: Claude on the official `anthropic` SDK (the Messages API, streamed; §5.6).

`POST {base_url}/v1/messages` with `stream: true`. The envelope schema travels as a system
block ("reply with one JSON object conforming to this schema"), after the cacheable system
text, which carries `cache_control` so repeated turns read it from Anthropic's prompt cache.
Tools are `{name, description, input_schema}`; `tool_use` blocks come back with their JSON
input streamed in fragments (`input_json_delta`), assembled and read leniently.

Usage: `promptTokens` is the whole input (`input_tokens` + cache reads + cache writes, since
Anthropic counts them apart), `cachedInputTokens` the cache reads, `completionTokens` the
output. The shared pipeline in `adapter` retries, backs up and classifies, as for Gemini.

Media understanding: `describe_image(data, mime_type)` / `adescribe_image` send the picture as a
base64 `image` block beside an instruction, on the same streamed path. There is no `transcribe`:
Claude does not read audio, so the attribute is absent (callers test
`hasattr(provider, "transcribe")` and use another provider for voice notes).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import Any

from falai_django.llm.types import GenerateInput, ProviderCapabilities
from falai_django.providers.adapter import (
    BACKOFF_BASE_MS,
    BACKOFF_CAP_MS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_MS,
    DESCRIBE_IMAGE_PROMPT,
    SCHEMA_IN_PROMPT,
    DescribesImages,
    ReplyFold,
    StreamingAdapter,
    afold_events,
    bare_mime,
    fold_events,
    history_call,
    history_calls,
    read,
    require_text,
    text_of,
    tool_arguments,
    tool_call_id,
    tool_spec,
)

__all__ = ["AnthropicProvider", "DEFAULT_MAX_TOKENS"]

DEFAULT_MAX_TOKENS = 4096  # Anthropic requires max_tokens on every call
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
           "refusal": "content_filter", "pause_turn": "stop"}
# Extended thinking budgets per effort; "none" sends no thinking block.
_THINKING_BUDGET = {"low": 1024, "medium": 4096, "high": 16_384, "max": 32_768}


class _Request:
    def __init__(self, input: GenerateInput, *, cache_system: bool) -> None:
        systems = [input.system] if input.system and input.system.strip() else []
        messages: list[dict[str, Any]] = []

        def add(role: str, block: dict[str, Any]) -> None:
            # Anthropic wants user and assistant turns to alternate: a run of one role is one turn.
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": role, "content": [block]})

        for item in input.history:
            role = read(item, "role")
            content = read(item, "content")
            if role == "system":
                if content:
                    systems.append(str(content))
            elif role == "user":
                if content:  # Anthropic refuses an empty text block
                    add("user", {"type": "text", "text": str(content)})
            elif role == "assistant":
                calls = history_calls(item)
                # thinking that led to tool calls is replayed first, signature and all: the API
                # refuses a thinking turn's tool_use without it
                for call in calls[:1]:
                    for block in read(call, "thinking") or []:
                        add("assistant", dict(block))
                if content:
                    add("assistant", {"type": "text", "text": str(content)})
                for index, call in enumerate(calls):
                    call_id, name, args, _ = history_call(call)
                    add("assistant", {"type": "tool_use", "id": call_id or f"call_{index}", "name": name,
                                      "input": args})
            elif role == "tool":
                add("user", {"type": "tool_result", "tool_use_id": tool_call_id(item) or "",
                             "content": text_of(content)})
        if input.prompt or not messages:
            add("user", {"type": "text", "text": input.prompt or " "})
        self.messages = messages
        self.schema = input.parameters.json_schema or {}
        self.json_on = bool(self.schema)
        self.system: list[dict[str, Any]] = []
        if systems:
            system_block: dict[str, Any] = {"type": "text", "text": "\n\n".join(systems)}
            if cache_system:
                system_block["cache_control"] = {"type": "ephemeral"}
            self.system.append(system_block)
        if self.json_on:
            self.system.append({"type": "text", "text": SCHEMA_IN_PROMPT.format(
                schema=json.dumps(self.schema, ensure_ascii=False))})
        self.tools = [tool_spec(tool) for tool in input.tools or []]
        self.max_output_tokens = input.parameters.max_output_tokens
        self.effort = (input.parameters.reasoning or {}).get("effort")


class _Fold(ReplyFold):
    """Messages API events: text and thinking deltas, tool_use blocks with fragmented JSON input."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.blocks: dict[int, dict[str, Any]] = {}
        self.thinking: dict[int, dict[str, Any]] = {}  # open thinking blocks by index
        self.thinking_blocks: list[dict[str, Any]] = []  # closed ones, to replay before tool calls
        self.input_tokens = (0, 0, 0)  # input, cache read, cache write

    def add(self, event: Any) -> str:
        kind = getattr(event, "type", "")
        if kind == "message_start":
            message = event.message
            if message.model and message.model != self.model:
                self.extra["modelVersion"] = message.model
            if message.id:
                self.extra["responseId"] = message.id
            usage = message.usage
            if usage is not None:
                self.input_tokens = (usage.input_tokens or 0, usage.cache_read_input_tokens or 0,
                                     usage.cache_creation_input_tokens or 0)
                self._usage(usage.output_tokens)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self.blocks[event.index] = {"id": block.id, "name": block.name, "json": "",
                                            "input": getattr(block, "input", None) or {}}
            elif block.type == "thinking":
                self.thinking[event.index] = {"type": "thinking", "thinking": block.thinking or "",
                                              "signature": getattr(block, "signature", None) or ""}
            elif block.type == "redacted_thinking":
                self.thinking_blocks.append({"type": "redacted_thinking", "data": block.data})
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                return self.add_text(delta.text or "")
            if delta.type == "input_json_delta" and event.index in self.blocks:
                self.blocks[event.index]["json"] += delta.partial_json or ""
            elif delta.type == "thinking_delta":
                self.reasoning += delta.thinking or ""
                if event.index in self.thinking:
                    self.thinking[event.index]["thinking"] += delta.thinking or ""
            elif delta.type == "signature_delta" and event.index in self.thinking:
                self.thinking[event.index]["signature"] += delta.signature or ""
        elif kind == "content_block_stop":
            thought = self.thinking.pop(event.index, None)
            if thought is not None:
                self.thinking_blocks.append(thought)
            block = self.blocks.pop(event.index, None)
            if block is not None:
                arguments = tool_arguments(block["json"]) if block["json"] else dict(block["input"])
                entry: dict[str, Any] = {"id": block["id"] or f"call_{len(self.calls)}",
                                         "toolName": block["name"] or "", "arguments": arguments}
                if not self.calls and self.thinking_blocks:
                    entry["thinking"] = list(self.thinking_blocks)  # rides the first call, like thoughtSignature
                self.calls.append(entry)
        elif kind == "message_delta":
            reason = getattr(event.delta, "stop_reason", None)
            if reason:
                self.finish_code = reason
                self.finish = _FINISH.get(reason, "stop")
                if reason == "refusal":
                    self.blocked = reason
            usage = getattr(event, "usage", None)
            if usage is not None:
                if getattr(usage, "input_tokens", None) is not None:  # newer servers repeat the input counts here
                    self.input_tokens = (usage.input_tokens or 0,
                                         getattr(usage, "cache_read_input_tokens", None) or self.input_tokens[1],
                                         getattr(usage, "cache_creation_input_tokens", None) or self.input_tokens[2])
                self._usage(usage.output_tokens)
        return ""

    def _usage(self, output_tokens: int | None) -> None:
        fresh, cache_read, cache_write = self.input_tokens
        self.set_usage(fresh + cache_read + cache_write, output_tokens or 0, cache_read)


class AnthropicProvider(DescribesImages, StreamingAdapter):
    """Claude over the `anthropic` SDK. Keep one instance per process: it owns HTTP clients.

    Options: `api_key` (required), `model` (required), `base_url` (default the SDK's:
    `ANTHROPIC_BASE_URL`, else `https://api.anthropic.com`), `max_tokens` (sent on every call,
    default 4096; a call's `max_output_tokens` wins), `prompt_caching` (mark the system text
    cacheable; default on), `backup_models`, `config` (`temperature`, `top_p`,
    `stop_sequences`, `effort`: low / medium / high / max become an extended-thinking budget),
    `timeout_ms`, `retries`, `retry_config`, `default_headers`, `backoff_base_ms` /
    `backoff_cap_ms`, and for tests `sleep` (a callable taking milliseconds).
    """

    name = "anthropic"
    capabilities = ProviderCapabilities(
        supports_tools=True, supports_native_json_schema=False, supports_streaming=True,
        supports_streaming_tool_calls=True, supports_prompt_caching=True,
    )

    def __init__(
        self,
        api_key: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        prompt_caching: bool = True,
        backup_models: list[str] | None = None,
        config: Mapping[str, Any] | None = None,
        timeout_ms: int | None = DEFAULT_TIMEOUT_MS,
        retries: int | None = DEFAULT_RETRIES,
        retry_config: Mapping[str, Any] | None = None,
        default_headers: Mapping[str, str] | None = None,
        backoff_base_ms: float = BACKOFF_BASE_MS,
        backoff_cap_ms: float = BACKOFF_CAP_MS,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        key = require_text(api_key, "[AnthropicProvider] apiKey",
                           "the provider cannot authenticate. Pass api_key=os.environ['ANTHROPIC_API_KEY'] and "
                           "make sure that variable is set.")
        self.model = require_text(model, "[AnthropicProvider] model",
                                  'there is no default. Pass one, for example model="claude-sonnet-4-5".')
        self._init_policy(api_key=key, timeout_ms=timeout_ms, retries=retries, backup_models=backup_models,
                          backoff_base_ms=backoff_base_ms, backoff_cap_ms=backoff_cap_ms, sleep=sleep,
                          retry_config=retry_config)
        self.max_tokens = int(max_tokens or DEFAULT_MAX_TOKENS)
        self.prompt_caching = prompt_caching
        self.config = dict(config or {})
        self.base_url = base_url

        import anthropic

        # A float timeout applies to each phase and each read: an idle deadline, not a wall clock.

        options: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": self.timeout_ms / 1000,
                                   "default_headers": dict(default_headers or {}) or None}
        if base_url:
            options["base_url"] = base_url
        self._client = anthropic.Anthropic(**options)
        self._aclient = anthropic.AsyncAnthropic(**options)

    def _prepare(self, input: GenerateInput) -> _Request:
        return _Request(input, cache_system=self.prompt_caching)

    def _params(self, request: _Request, model: str) -> dict[str, Any]:
        settings = self.config
        max_tokens = int(request.max_output_tokens or settings.get("max_tokens", settings.get("maxTokens"))
                         or self.max_tokens)
        params: dict[str, Any] = {"model": model, "messages": request.messages, "max_tokens": max_tokens,
                                  "stream": True}
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = [{"name": tool.name or tool.id, "description": tool.description or "",
                                "input_schema": tool.parameters or {"type": "object"}} for tool in request.tools]
        effort = request.effort or settings.get("effort")
        budget = _THINKING_BUDGET.get(effort) if isinstance(effort, str) else None
        # Newer SDKs no longer type the sampling parameters (newer models refuse them); a model
        # that still takes them gets them in the body.
        sampling: dict[str, Any] = {}
        if budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            params["max_tokens"] = max(max_tokens, budget + 1024)  # the budget counts inside max_tokens
        elif settings.get("temperature") is not None:  # extended thinking refuses a temperature
            sampling["temperature"] = settings["temperature"]
        top_p = settings.get("top_p", settings.get("topP"))
        stop = settings.get("stop_sequences", settings.get("stopSequences"))
        if top_p is not None:
            sampling["top_p"] = top_p
        if sampling:
            params["extra_body"] = sampling
        if stop:
            params["stop_sequences"] = list(stop)
        return params

    def _fold(self, model: str) -> _Fold:
        return _Fold(model)

    def _attempt(self, request: _Request, model: str, fold: Any) -> Generator[str, None, None]:
        yield from fold_events(self._client.messages.create(**self._params(request, model)), fold)

    async def _aattempt(self, request: _Request, model: str, fold: Any) -> AsyncGenerator[str, None]:
        async for text in afold_events(await self._aclient.messages.create(**self._params(request, model)), fold):
            yield text

    # -- media understanding (images only: Claude does not read audio, so no `transcribe`) ----

    def _image_request(self, data: bytes, mime_type: str) -> _Request:
        """The picture as a base64 image block, then the instruction (Anthropic advises the image
        first); no system text and JSON off, so the reply's text is the description."""
        request = _Request(GenerateInput(prompt=DESCRIBE_IMAGE_PROMPT), cache_system=False)
        request.messages = [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": bare_mime(mime_type),
                                         "data": base64.b64encode(bytes(data)).decode("ascii")}},
            {"type": "text", "text": DESCRIBE_IMAGE_PROMPT},
        ]}]
        return request

    def close(self) -> None:
        """Releases the sync client's HTTP connections (`aclose()` for the async one)."""
        self._client.close()

    async def aclose(self) -> None:
        await self._aclient.close()
