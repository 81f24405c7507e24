"""`GeminiProvider`: Google's Gemini through the official `google-genai` SDK (persistence-and-LLM note §5.2, §5.3).

One code path serves both modes: `generate_message` drains `generate_message_stream`. Each
call goes to `POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse` and is
folded into `StreamChunk`s: one per text delta (the raw envelope text), then a terminal
chunk carrying metadata (`model`, `finishReason`, token counts) and `structured` (the parsed
envelope, plus `toolCalls` when the model called tools).

Failures become `ProviderError`s (`classify.classify_error`). Transient kinds (timeout,
network, overload, rate) are retried with full-jitter exponential backoff, and then the
`backup_models` are tried (on overload, rate or model), but only **before the first chunk
is emitted**: once text has gone out, a failure propagates.

Media understanding: `transcribe(data, mime_type)` and `describe_image(data, mime_type)` (and
`atranscribe` / `adescribe_image`) send one user content holding the bytes as an `inline_data`
part and a short instruction, on the same streamed call and the same retry policy, and return
the reply's text.

`base_url` (or the SDK's own `GOOGLE_GEMINI_BASE_URL` environment variable) points the
client at a proxy or a local test server speaking the Generative Language REST dialect.
`timeout_ms` is an idle deadline: the time to the first byte and between chunks.
"""

from __future__ import annotations

import base64
import json
import re
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
    TRANSCRIBE_PROMPT,
    DescribesImages,
    ReplyFold,
    StreamingAdapter,
    bare_mime,
    history_call,
    history_calls,
    tool_call_id,
    tool_spec,
)
from falai_django.providers.adapter import read as _read
from falai_django.providers.adapter import redacted as _redacted  # noqa: F401 - old import path
from falai_django.providers.adapter import reraise as _reraise  # noqa: F401 - old import path

__all__ = ["GeminiProvider", "gemini_json_schema", "DEFAULT_TIMEOUT_MS", "DEFAULT_RETRIES", "BACKOFF_BASE_MS",
           "BACKOFF_CAP_MS"]
_THINKING_LEVEL = {"none": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "max": "HIGH"}
_FINISH = {"MAX_TOKENS": "length", "SAFETY": "content_filter", "PROHIBITED_CONTENT": "content_filter"}
_BLOCKED = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"})

# JSON-Schema keywords Gemini's `responseJsonSchema` / `parametersJsonSchema` understand.
_SCHEMA_KEYWORDS = frozenset({
    "$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum", "items",
    "prefixItems", "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern",
    "anyOf", "oneOf", "properties", "additionalProperties", "required", "propertyOrdering",
})
_SCHEMA_IN_PROMPT = SCHEMA_IN_PROMPT


def gemini_json_schema(schema: Any) -> Any:
    """A JSON schema reduced to what Gemini accepts.

    Unknown keywords (`$schema`, `default`, `examples`, ...) are dropped, `const` becomes a
    one-value `enum`, and an `enum` that lists `null` becomes `anyOf` [the non-null values,
    `{"type": "null"}`], since Gemini's enums hold strings and numbers only.
    """
    if isinstance(schema, list):
        return [gemini_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "const":
            out.setdefault("enum", [value])
        elif key not in _SCHEMA_KEYWORDS:
            continue
        elif key in ("properties", "$defs"):
            out[key] = {name: gemini_json_schema(sub) for name, sub in value.items()} if isinstance(value, dict) else value
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "prefixItems"):
            out[key] = gemini_json_schema(value)
        else:
            out[key] = value
    enum = out.get("enum")
    if isinstance(enum, list) and None in enum:
        kinds = out.get("type")
        kinds = [k for k in (kinds if isinstance(kinds, list) else [kinds]) if k and k != "null"]
        values = [v for v in enum if v is not None]
        non_null = {k: v for k, v in out.items() if k not in ("enum", "type")}
        if kinds:
            non_null["type"] = kinds[0] if len(kinds) == 1 else kinds
        if values:
            non_null["enum"] = values
        return {"anyOf": [non_null, {"type": "null"}]}
    return out


def _takes_schema_with_tools(model: str) -> bool:
    """Gemini 3 and later accept a response schema and tools in one call; Gemini 2 answers 400."""
    match = re.search(r"gemini-(\d+)", model)
    return match is not None and int(match.group(1)) >= 3


def _tool_response(content: Any) -> dict[str, Any]:
    """A tool result as Gemini's functionResponse.response: an object, else wrapped as {output}."""
    if isinstance(content, dict):
        return content
    if isinstance(content, str):
        try:
            parsed = json.loads(content)
        except ValueError:
            return {"output": content}
        return parsed if isinstance(parsed, dict) else {"output": parsed}
    return {"output": content}


def _signature_bytes(value: Any) -> bytes | None:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str) and value:
        try:
            return base64.b64decode(value)
        except ValueError:
            return None
    return None


class _Request:
    """The parts of one call that do not depend on the model: contents, system text, tools."""

    def __init__(self, input: GenerateInput) -> None:
        systems = [input.system] if input.system and input.system.strip() else []
        contents: list[dict[str, Any]] = []
        for item in input.history:
            role = _read(item, "role")
            content = _read(item, "content")
            if role == "system":
                if content:
                    systems.append(str(content))
            elif role == "user":
                if content:  # Gemini refuses an empty text part
                    contents.append({"role": "user", "parts": [{"text": str(content)}]})
            elif role == "assistant":
                parts: list[dict[str, Any]] = [{"text": str(content)}] if content else []
                for call in history_calls(item):
                    call_id, name, args, signature = history_call(call)
                    part: dict[str, Any] = {"function_call": {"name": name, "args": args}}
                    if call_id:
                        part["function_call"]["id"] = call_id
                    signature_bytes = _signature_bytes(signature)
                    if signature_bytes:
                        part["thought_signature"] = signature_bytes
                    parts.append(part)
                if parts:
                    contents.append({"role": "model", "parts": parts})
            elif role == "tool":
                response: dict[str, Any] = {"name": str(_read(item, "name") or ""),
                                            "response": _tool_response(content)}
                call_id = tool_call_id(item)
                if call_id:
                    response["id"] = call_id
                part = {"function_response": response}
                previous = contents[-1] if contents else None
                if previous and previous["role"] == "user" and "function_response" in previous["parts"][-1]:
                    previous["parts"].append(part)  # results of parallel calls travel together
                else:
                    contents.append({"role": "user", "parts": [part]})
        if input.prompt or not contents:
            contents.append({"role": "user", "parts": [{"text": input.prompt}]})
        self.contents = contents
        self.system = "\n\n".join(systems)
        self.tools = [_declaration(tool) for tool in input.tools or []]
        self.schema = input.parameters.json_schema or {}
        self.json_on = bool(self.schema)
        self.max_output_tokens = input.parameters.max_output_tokens
        self.effort = (input.parameters.reasoning or {}).get("effort")
        self.sdk_contents: list[Any] = []  # the SDK objects, built by the provider


def _declaration(tool: Any) -> dict[str, Any]:
    """A ToolSpec (or a dict / object with the same fields) as a Gemini functionDeclaration."""
    tool = tool_spec(tool)
    declaration: dict[str, Any] = {
        "name": tool.name or tool.id,
        "parametersJsonSchema": gemini_json_schema(tool.parameters or {"type": "object"}),
    }
    if tool.description:
        declaration["description"] = tool.description
    return declaration


class _Fold(ReplyFold):
    """Folds Gemini's streamed responses into the shared `ReplyFold`."""

    def add(self, response: Any) -> str:
        """Folds one response in; returns its new text (the chunk's delta)."""
        usage = response.usage_metadata
        if usage is not None:
            self.set_usage(usage.prompt_token_count,
                           None if usage.candidates_token_count is None and usage.prompt_token_count is None
                           else (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
                           usage.cached_content_token_count)
        if response.model_version:
            self.extra["modelVersion"] = response.model_version
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason:
            self.blocked = _enum_name(feedback.block_reason)
        if not response.candidates:
            return ""
        candidate = response.candidates[0]
        if candidate.finish_reason:
            code = _enum_name(candidate.finish_reason)
            self.finish_code = code
            self.finish = _FINISH.get(code, "stop")
            if code in _BLOCKED and not self.blocked:
                self.blocked = code
        if candidate.content is None or not candidate.content.parts:
            return ""
        delta: list[str] = []
        for part in candidate.content.parts:
            if part.function_call is not None:
                call = part.function_call
                entry: dict[str, Any] = {
                    "id": call.id or f"call_{len(self.calls)}",
                    "toolName": call.name or "",
                    "arguments": dict(call.args or {}),
                }
                if part.thought_signature:
                    entry["thoughtSignature"] = base64.b64encode(part.thought_signature).decode("ascii")
                self.calls.append(entry)
            elif part.text:
                if part.thought:
                    self.reasoning += part.text
                else:
                    delta.append(part.text)
        return self.add_text("".join(delta))


def _enum_name(value: Any) -> str:
    return getattr(value, "value", None) or str(value)


def _in_band(exc: BaseException) -> bool:
    """A google.rpc.Status that arrived inside an already-200 stream."""
    return getattr(getattr(exc, "response", None), "status_code", None) == 200


class GeminiProvider(DescribesImages, StreamingAdapter):
    """Gemini over `google-genai`. Keep one instance per process: it owns an HTTP client.

    Options: `api_key` (required), `model`, `base_url`, `timeout_ms` (idle deadline, 0 means
    the default), `retries` (after the first attempt; 0 makes exactly one call),
    `retry_config` (upstream's `{"timeout": ms, "retries": n}`, same meaning),
    `backup_models`, `json_with_tools` (`"response_format"` or `"prompt"`), `config`
    (`temperature`, `top_p`, `max_tokens`, `stop_sequences`, `effort`), `backoff_base_ms` /
    `backoff_cap_ms`, and for tests `sleep` (a callable taking milliseconds).
    """

    name = "gemini"
    capabilities = ProviderCapabilities(
        supports_tools=True, supports_native_json_schema=True, supports_streaming=True,
        supports_streaming_tool_calls=True, supports_prompt_caching=True,
    )

    def __init__(
        self,
        api_key: str | None = None,
        model: str = "gemini-2.5-flash",
        base_url: str | None = None,
        *,
        timeout_ms: int | None = DEFAULT_TIMEOUT_MS,
        retries: int | None = DEFAULT_RETRIES,
        backup_models: list[str] | None = None,
        json_with_tools: str = "response_format",
        config: dict[str, Any] | None = None,
        backoff_base_ms: float = BACKOFF_BASE_MS,
        backoff_cap_ms: float = BACKOFF_CAP_MS,
        sleep: Callable[[float], None] | None = None,
        http_options: dict[str, Any] | None = None,
        retry_config: Mapping[str, Any] | None = None,
    ) -> None:
        if not api_key or not str(api_key).strip():
            raise ValueError(
                "[GeminiProvider] apiKey is empty: the provider cannot authenticate. Pass "
                "api_key=os.environ['GEMINI_API_KEY'] and make sure that variable is set."
            )
        if not model or not str(model).strip():
            raise ValueError(
                '[GeminiProvider] model is empty: there is no default. Pass one, for example '
                'model="gemini-2.5-flash".'
            )
        if json_with_tools not in ("response_format", "prompt"):
            raise ValueError(
                f'[GeminiProvider] json_with_tools is "{json_with_tools}": it must be "response_format" '
                'or "prompt". Leave it unset unless a model ignores tools while its output is pinned.'
            )
        from google import genai
        from google.genai import types

        self._init_policy(api_key=str(api_key), timeout_ms=timeout_ms, retries=retries, backup_models=backup_models,
                          backoff_base_ms=backoff_base_ms, backoff_cap_ms=backoff_cap_ms, sleep=sleep,
                          retry_config=retry_config)
        self.model = str(model).removeprefix("models/")
        self.backup_models = [m.removeprefix("models/") for m in self.backup_models]
        self.json_with_tools = json_with_tools
        self.config = dict(config or {})
        options = {"api_version": "v1beta", "timeout": self.timeout_ms, **(http_options or {})}
        if base_url:
            options["base_url"] = base_url
        if not any(options.get(key) for key in ("async_client_args", "httpx_async_client", "aiohttp_client")):
            # The SDK switches its async calls to aiohttp whenever aiohttp is importable (any other
            # package may bring it: opensearch-py[async] does). Its errors and its threaded DNS
            # lookups differ from httpx's, so the async twins would classify a dropped connection
            # otherwise and leave the loop for a thread. An httpx transport keeps them on httpx.
            from falai_django.providers.loop_transport import PerLoopTransport

            options["async_client_args"] = {"transport": PerLoopTransport()}
        self._types = types
        self._client = genai.Client(api_key=str(api_key), vertexai=False, http_options=types.HttpOptions(**options))

    # -- request ---------------------------------------------------------------------------

    def _config_for(self, request: _Request, model: str) -> Any:
        settings = self.config
        config: dict[str, Any] = {
            "automatic_function_calling": {"disable": True},
            "automatic_continuation": False,
        }
        system = request.system
        if request.json_on:
            schema = gemini_json_schema(request.schema)
            in_prompt = bool(request.tools) and (
                self.json_with_tools == "prompt" or not _takes_schema_with_tools(model))
            if in_prompt:
                rule = _SCHEMA_IN_PROMPT.format(schema=json.dumps(schema, ensure_ascii=False))
                system = f"{system}\n\n{rule}" if system else rule
            else:
                config["response_mime_type"] = "application/json"
                config["response_json_schema"] = schema
        if system:
            config["system_instruction"] = system
        temperature = settings.get("temperature")
        top_p = settings.get("top_p", settings.get("topP"))
        stop = settings.get("stop_sequences", settings.get("stopSequences"))
        max_tokens = request.max_output_tokens or settings.get("max_tokens", settings.get("maxTokens"))
        effort = request.effort or settings.get("effort")
        if temperature is not None:
            config["temperature"] = temperature
        if top_p is not None:
            config["top_p"] = top_p
        if stop:
            config["stop_sequences"] = list(stop)
        if max_tokens:
            config["max_output_tokens"] = int(max_tokens)
        validated = self._types.GenerateContentConfig.model_validate(config)
        # The SDK writes the Gemini field names it models itself (responseJsonSchema, ...) but
        # dumps the objects it only passes through (function declarations, thinkingConfig) under
        # their Python names. The REST API reads both spellings; the wire keeps the documented
        # camelCase ones (`parametersJsonSchema`, `thinkingLevel`), so these two go in as
        # ready-made JSON that the SDK copies verbatim.
        raw: dict[str, Any] = {}
        if request.tools:
            raw["tools"] = [self._types.Tool.model_construct(function_declarations=list(request.tools))]
        if effort in _THINKING_LEVEL:
            raw["thinking_config"] = {"thinkingLevel": _THINKING_LEVEL[effort]}
        return validated.model_copy(update=raw) if raw else validated

    # -- one attempt (the shared loop in `adapter` retries, backs up and finishes) --------------

    def _prepare(self, input: GenerateInput) -> _Request:
        request = _Request(input)
        request.sdk_contents = [self._types.Content.model_validate(c) for c in request.contents]
        return request

    def _fold(self, model: str) -> _Fold:
        return _Fold(model)

    def _in_stream(self, exc: BaseException, fold: ReplyFold) -> bool:
        return _in_band(exc)

    def _attempt(self, request: _Request, model: str,  # type: ignore[override]  # _fold() makes every fold a _Fold
                 fold: _Fold) -> Generator[str, None, None]:
        stream = self._client.models.generate_content_stream(
            model=model, contents=request.sdk_contents, config=self._config_for(request, model))
        try:
            for response in stream:
                yield fold.add(response)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    async def _aattempt(self, request: _Request, model: str,  # type: ignore[override]  # _fold() makes every fold a _Fold
                        fold: _Fold) -> AsyncGenerator[str, None]:
        stream = await self._client.aio.models.generate_content_stream(
            model=model, contents=request.sdk_contents, config=self._config_for(request, model))
        try:
            async for response in stream:
                yield fold.add(response)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    # -- media understanding ---------------------------------------------------------------

    def _media_request(self, data: bytes, mime_type: str, instruction: str) -> _Request:
        """One user content: the media inline (Gemini reads audio and images natively, so no second
        service is needed) followed by the instruction, which Google advises placing after the media."""
        request = _Request(GenerateInput(prompt=instruction))
        request.contents = [{"role": "user", "parts": [
            {"inline_data": {"mime_type": bare_mime(mime_type), "data": bytes(data)}},
            {"text": instruction},
        ]}]
        request.sdk_contents = [self._types.Content.model_validate(c) for c in request.contents]
        return request

    def transcribe(self, data: bytes, mime_type: str) -> str:
        """The words of a voice note, in its own language, so the agent reads what the customer said."""
        return self._complete(self._media_request(data, mime_type, TRANSCRIBE_PROMPT))

    async def atranscribe(self, data: bytes, mime_type: str) -> str:
        """See transcribe()."""
        return await self._acomplete(self._media_request(data, mime_type, TRANSCRIBE_PROMPT))

    def _image_request(self, data: bytes, mime_type: str) -> _Request:
        return self._media_request(data, mime_type, DESCRIBE_IMAGE_PROMPT)

    def close(self) -> None:
        """Releases the SDK's HTTP connections."""
        self._client.close()

