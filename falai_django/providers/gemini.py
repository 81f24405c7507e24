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

`base_url` (or the SDK's own `GOOGLE_GEMINI_BASE_URL` environment variable) points the
client at a proxy or a local test server speaking the Generative Language REST dialect.
`timeout_ms` is an idle deadline: the time to the first byte and between chunks.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, NoReturn

from falai_django.llm.classify import classify_error
from falai_django.llm.errors import ProviderError
from falai_django.llm.jsonparse import is_json_shaped, try_parse_json_response
from falai_django.llm.types import (
    BaseProvider,
    GenerateInput,
    GenerateOutput,
    ProviderCapabilities,
    StreamChunk,
    ToolSpec,
)

DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_RETRIES = 3
BACKOFF_BASE_MS = 1_000
BACKOFF_CAP_MS = 30_000
_BACKUP_KINDS = frozenset({"overload", "rate", "model"})
_THINKING_LEVEL = {"none": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "max": "HIGH"}
_FINISH = {"MAX_TOKENS": "length", "SAFETY": "content_filter", "PROHIBITED_CONTENT": "content_filter"}

# JSON-Schema keywords Gemini's `responseJsonSchema` / `parametersJsonSchema` understand.
_SCHEMA_KEYWORDS = frozenset({
    "$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum", "items",
    "prefixItems", "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern",
    "anyOf", "oneOf", "properties", "additionalProperties", "required", "propertyOrdering",
})
_SCHEMA_IN_PROMPT = (
    "Reply with a single JSON object, and nothing else, that conforms to this JSON schema:\n{schema}"
)


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
    return bool(match) and int(match.group(1)) >= 3


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        parsed = try_parse_json_response(value)
        return parsed if isinstance(parsed, dict) else {"value": parsed} if parsed is not None else {}
    return {}


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


def _read(item: Any, key: str) -> Any:
    """`item[key]` for a mapping, `item.key` for any other object; None when absent."""
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, key, None)


def _call_of(call: Any) -> tuple[str | None, str, dict[str, Any], Any]:
    """(id, name, arguments, thoughtSignature) from a history tool call in any common spelling."""
    function = _read(call, "function")
    function = function if isinstance(function, Mapping) else {}
    name = _read(call, "toolName") or _read(call, "name") or function.get("name") or ""
    args = next((v for v in (_read(call, "arguments"), _read(call, "args"), function.get("arguments"))
                 if v is not None), None)
    signature = _read(call, "thoughtSignature") or _read(call, "thought_signature")
    return _read(call, "id"), str(name), _arguments(args), signature


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
                for call in _read(item, "tool_calls") or _read(item, "toolCalls") or []:
                    call_id, name, args, signature = _call_of(call)
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
                call_id = _read(item, "tool_call_id") or _read(item, "toolCallId")
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


def _declaration(tool: Any) -> dict[str, Any]:
    """A ToolSpec (or a dict / object with the same fields) as a Gemini functionDeclaration."""
    if not isinstance(tool, ToolSpec):
        read = tool.get if isinstance(tool, dict) else (lambda key: getattr(tool, key, None))
        tool = ToolSpec(id=read("id") or read("name") or "", name=read("name"),
                        description=read("description"), parameters=read("parameters"))
    declaration: dict[str, Any] = {
        "name": tool.name or tool.id,
        "parametersJsonSchema": gemini_json_schema(tool.parameters or {"type": "object"}),
    }
    if tool.description:
        declaration["description"] = tool.description
    return declaration


class _Fold:
    """Accumulates one attempt's streamed responses into text, tool calls and metadata."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text = ""
        self.reasoning = ""
        self.calls: list[dict[str, Any]] = []
        self.usage: Any = None
        self.finish: str | None = None
        self.model_version: str | None = None
        self.block_reason: str | None = None

    def add(self, response: Any) -> str:
        """Folds one response in; returns its new text (the chunk's delta)."""
        if response.usage_metadata is not None:
            self.usage = response.usage_metadata
        if response.model_version:
            self.model_version = response.model_version
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason:
            self.block_reason = _enum_name(feedback.block_reason)
        if not response.candidates:
            return ""
        candidate = response.candidates[0]
        if candidate.finish_reason:
            self.finish = _enum_name(candidate.finish_reason)
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
        text = "".join(delta)
        self.text += text
        return text

    def require_content(self, provider: str) -> None:
        """A stream that ended with neither text nor tool calls failed (overload, or content if blocked)."""
        if self.text or self.calls:
            return
        if self.block_reason or self.finish in ("SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"):
            reason = self.block_reason or self.finish
            raise ProviderError(provider, "content", f"{provider} content: the reply was blocked ({reason})",
                                code=reason)
        raise ProviderError(provider, "overload", f"{provider} overload: the stream ended with no content",
                            code=self.finish)

    def metadata(self) -> dict[str, Any]:
        finish = "tool_calls" if self.calls else _FINISH.get(self.finish or "", "stop")
        meta: dict[str, Any] = {"model": self.model, "finishReason": finish}
        if self.model_version:
            meta["modelVersion"] = self.model_version
        usage = self.usage
        if usage is not None and (usage.prompt_token_count is not None or usage.candidates_token_count is not None):
            prompt = usage.prompt_token_count or 0
            completion = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
            meta.update(promptTokens=prompt, completionTokens=completion,
                        cachedInputTokens=usage.cached_content_token_count or 0, tokensUsed=prompt + completion)
        return meta

    def terminal(self, json_on: bool, provider: str) -> StreamChunk:
        text = self.text
        structured: dict[str, Any] | None = None
        if json_on:
            parsed = try_parse_json_response(text) if text.strip() else None
            if isinstance(parsed, dict):
                structured = parsed
            elif is_json_shaped(text):
                text = ""  # a broken envelope is never shown to a customer
        if self.calls:
            structured = {**(structured or {})}
            structured["message"] = structured.get("message") or text
            structured["toolCalls"] = self.calls
            if self.reasoning:
                structured["reasoning"] = self.reasoning
        if not text.strip() and not self.calls:
            raise ProviderError(provider, "unknown", f"No response from {provider}: the reply was empty or unreadable")
        return StreamChunk(delta="", accumulated=text, done=True, metadata=self.metadata(), structured=structured)


def _enum_name(value: Any) -> str:
    return getattr(value, "value", None) or str(value)


def _in_band(exc: BaseException) -> bool:
    """A google.rpc.Status that arrived inside an already-200 stream."""
    return getattr(getattr(exc, "response", None), "status_code", None) == 200


class GeminiProvider(BaseProvider):
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
        if retry_config:  # upstream's retryConfig: {timeout, retries}; it wins over the flat options
            if "timeout" in retry_config or "timeout_ms" in retry_config:
                timeout_ms = retry_config.get("timeout", retry_config.get("timeout_ms"))
            if "retries" in retry_config:
                retries = retry_config["retries"]
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

        self.model = str(model).removeprefix("models/")
        self.backup_models = [m.removeprefix("models/") for m in backup_models or []]
        self.timeout_ms = int(timeout_ms or DEFAULT_TIMEOUT_MS)
        self.retries = DEFAULT_RETRIES if retries is None else max(0, int(retries))
        self.json_with_tools = json_with_tools
        self.config = dict(config or {})
        self.backoff_base_ms = backoff_base_ms
        self.backoff_cap_ms = backoff_cap_ms
        self._sleep_ms = sleep
        options = {"api_version": "v1beta", "timeout": self.timeout_ms, **(http_options or {})}
        if base_url:
            options["base_url"] = base_url
        self._types = types
        self._secret = str(api_key)
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

    # -- retry policy ----------------------------------------------------------------------

    def _after_failure(self, exc: Exception, emitted: bool, attempt: int, model_index: int,
                       models: int) -> tuple[str, float]:
        """("retry", delay_ms) or ("backup", 0) after a failed call; otherwise re-raises it, classified
        and with the key redacted. Once output was emitted it always re-raises: never restart an answer."""
        error = _redacted(classify_error(exc, self.name, in_stream=_in_band(exc)), self._secret)
        if not emitted:
            if error.is_transient and attempt < self.retries:
                delay = self._backoff_ms(attempt, error.retry_after_ms)
                if delay is not None:
                    return "retry", delay
            if error.kind in _BACKUP_KINDS and model_index + 1 < models:
                return "backup", 0.0
        _reraise(error, exc, self._secret)

    def _backoff_ms(self, attempt: int, retry_after_ms: int | None) -> float | None:
        """Full-jitter exponential backoff; a server hint is honoured up to the cap, beyond it we stop."""
        if retry_after_ms is not None:
            return float(retry_after_ms) if retry_after_ms <= self.backoff_cap_ms else None
        return random.uniform(0, min(self.backoff_cap_ms, self.backoff_base_ms * 2**attempt))

    def _wait(self, delay_ms: float) -> None:
        if self._sleep_ms is not None:
            self._sleep_ms(delay_ms)
        else:
            time.sleep(delay_ms / 1000)

    async def _await(self, delay_ms: float) -> None:
        if self._sleep_ms is not None:
            self._sleep_ms(delay_ms)
        else:
            await asyncio.sleep(delay_ms / 1000)

    # -- the call --------------------------------------------------------------------------

    def generate_message_stream(self, input: GenerateInput) -> Iterator[StreamChunk]:
        request = _Request(input)
        contents = [self._types.Content.model_validate(c) for c in request.contents]
        models = [self.model, *self.backup_models]
        for index, model in enumerate(models):
            config = self._config_for(request, model)
            attempt = 0
            while True:
                fold = _Fold(model)
                emitted = False
                stream = None
                try:
                    stream = self._client.models.generate_content_stream(
                        model=model, contents=contents, config=config)
                    for response in stream:
                        delta = fold.add(response)
                        if delta:
                            emitted = True
                            yield StreamChunk(delta=delta, accumulated=fold.text)
                    fold.require_content(self.name)
                except Exception as exc:
                    step, delay = self._after_failure(exc, emitted, attempt, index, len(models))
                    if step == "retry":
                        self._wait(delay)
                        attempt += 1
                        continue
                    break  # on to the next backup model
                finally:
                    close = getattr(stream, "close", None)
                    if close is not None:
                        close()
                yield fold.terminal(request.json_on, self.name)
                return

    async def agenerate_message_stream(self, input: GenerateInput) -> AsyncIterator[StreamChunk]:
        """See generate_message_stream(); runs on the SDK's native async client."""
        request = _Request(input)
        contents = [self._types.Content.model_validate(c) for c in request.contents]
        models = [self.model, *self.backup_models]
        for index, model in enumerate(models):
            config = self._config_for(request, model)
            attempt = 0
            while True:
                fold = _Fold(model)
                emitted = False
                stream = None
                try:
                    stream = await self._client.aio.models.generate_content_stream(
                        model=model, contents=contents, config=config)
                    async for response in stream:
                        delta = fold.add(response)
                        if delta:
                            emitted = True
                            yield StreamChunk(delta=delta, accumulated=fold.text)
                    fold.require_content(self.name)
                except Exception as exc:
                    step, delay = self._after_failure(exc, emitted, attempt, index, len(models))
                    if step == "retry":
                        await self._await(delay)
                        attempt += 1
                        continue
                    break
                finally:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await aclose()
                yield fold.terminal(request.json_on, self.name)
                return

    async def agenerate_message(self, input: GenerateInput) -> GenerateOutput:
        """See generate_message()."""
        last: StreamChunk | None = None
        async for chunk in self.agenerate_message_stream(input):
            last = chunk
        if last is None:  # unreachable: the stream ends with a terminal chunk or raises
            raise ProviderError(self.name, "overload", f"{self.name}: no response")
        return GenerateOutput(message=last.accumulated, metadata=last.metadata or {}, structured=last.structured)

    def close(self) -> None:
        """Releases the SDK's HTTP connections."""
        self._client.close()


def _redacted(error: ProviderError, secret: str) -> ProviderError:
    """`error` with the API key blanked out of its message and body (a proxy or server that echoes
    the request must not push the key into logs, run records or API answers)."""
    body = error.body if isinstance(error.body, str) else None
    if not secret or (secret not in str(error) and not (body and secret in body)):
        return error
    clean = ProviderError(
        error.provider, error.kind, str(error).replace(secret, "[redacted]"), status=error.status,
        code=error.code, retry_after_ms=error.retry_after_ms, reset_at_ms=error.reset_at_ms, window=error.window,
        should_retry=error.should_retry, body=body.replace(secret, "[redacted]") if body else error.body,
    )
    clean.redacted = True  # type: ignore[attr-defined]
    return clean


def _reraise(error: ProviderError, exc: BaseException, secret: str = "") -> NoReturn:
    if error is exc:
        raise error
    if getattr(error, "redacted", False) or (secret and secret in str(exc)):
        raise error from None  # the original still carries the key: do not chain it
    raise error from exc
