"""OpenAI and every OpenAI-compatible endpoint, on the official `openai` SDK (§5.6).

- `OpenAIProvider`: OpenAI's Responses API (`POST {base_url}/responses`, streamed), the
  envelope schema sent as `text.format` (`json_schema`).
- `OpenAICompatibleProvider`: any server speaking OpenAI's wire (vLLM, Ollama, LM Studio,
  Groq, Together, Azure, a gateway). `structured_output` picks how the schema travels:
  `"responses_parse"` (the Responses API, as `OpenAIProvider`), `"json_schema"` (chat
  completions with a `json_schema` response format; the default) or `"json_object"` (chat
  completions in JSON mode, the schema written into the system prompt).
- `OpenRouterProvider` and `DeepSeekProvider`: thin presets of the compatible provider
  (OpenRouter's base URL, attribution headers and `provider_order` pinning; DeepSeek's base
  URL and `json_object` with the schema in the prompt, its cache-hit count and reasoning).

Every call streams, through the shared pipeline in `adapter` (retries, backup models,
classification, the lenient envelope reader). The SDK's own retries are off (`max_retries=0`)
so that policy is the only one, and its timeout is the idle deadline (`timeout_ms`, per read).

Media understanding: `describe_image(data, mime_type)` sends the picture as a data URL beside
an instruction, in the provider's dialect (chat `image_url` or Responses `input_image`), on the
same streamed path; `transcribe(data, mime_type)` posts the audio to the transcription endpoint
(`POST {base_url}/audio/transcriptions`, model `transcription_model`), a call that does not
stream, under the same retry policy. Both have async twins (`adescribe_image`, `atranscribe`).
`DeepSeekProvider` has neither: DeepSeek's API reads text only, so it lacks those attributes
(callers test `hasattr(provider, "transcribe")`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import Any, NoReturn

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

__all__ = ["OpenAIProvider", "OpenAICompatibleProvider", "OpenRouterProvider", "DeepSeekProvider",
           "STRUCTURED_OUTPUT_MODES"]

STRUCTURED_OUTPUT_MODES = ("responses_parse", "json_schema", "json_object")
_CHAT_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
                "content_filter": "content_filter"}
_RESPONSES_EFFORT = {"none": "minimal", "low": "low", "medium": "medium", "high": "high", "max": "high"}
DEFAULT_TRANSCRIPTION_MODEL = "gpt-4o-mini-transcribe"
# The transcription endpoint tells formats apart by the file name's extension.
_AUDIO_EXTENSIONS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/mpga": "mpga", "audio/mp4": "m4a",
                     "audio/m4a": "m4a", "audio/x-m4a": "m4a", "audio/aac": "aac", "audio/wav": "wav",
                     "audio/x-wav": "wav", "audio/wave": "wav", "audio/webm": "webm", "audio/ogg": "ogg",
                     "audio/opus": "ogg", "audio/flac": "flac", "audio/x-flac": "flac", "audio/amr": "amr"}


def audio_filename(mime_type: str) -> str:
    """The file name the transcription endpoint is sent (`audio/ogg` -> `audio.ogg`): it reads the
    format from the extension, not from the part's content type."""
    mime = bare_mime(mime_type)
    extension = _AUDIO_EXTENSIONS.get(mime) or mime.rpartition("/")[2].removeprefix("x-") or "bin"
    return f"audio.{extension}"


def data_url(data: bytes, mime_type: str) -> str:
    """`data:<mime>;base64,<b64>`: how both OpenAI dialects take an image inline."""
    return f"data:{bare_mime(mime_type)};base64,{base64.b64encode(bytes(data)).decode('ascii')}"


class _Absent:
    """A class attribute that reads as missing (`hasattr` is False): a preset whose API lacks a
    feature its parent has, since callers test for the method before calling it."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> NoReturn:
        raise AttributeError(f"{getattr(owner, '__name__', 'provider')} has no {self.name}: {self.why}")


def is_strict_schema(schema: Any) -> bool:
    """True when OpenAI's strict mode accepts `schema`: every object lists all its properties as
    required and sets `additionalProperties: false` (the engine's envelopes are built that way)."""
    if isinstance(schema, list):
        return all(is_strict_schema(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    properties = schema.get("properties")
    if isinstance(properties, dict) or schema.get("type") == "object":
        names = set(properties) if isinstance(properties, dict) else set()
        if schema.get("additionalProperties") is not False or set(schema.get("required") or []) != names:
            return False
    children: list[Any] = []
    for key in ("properties", "$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            children.extend(schema[key].values())
    children.extend(schema[key] for key in ("items", "anyOf", "oneOf", "allOf") if key in schema)
    return all(is_strict_schema(child) for child in children)


class _Request:
    """One call's parts in OpenAI's two dialects: chat `messages` and Responses `input` items."""

    def __init__(self, input: GenerateInput, *, schema_in_prompt: bool) -> None:
        systems = [input.system] if input.system and input.system.strip() else []
        messages: list[dict[str, Any]] = []  # chat completions, without the leading system message
        items: list[dict[str, Any]] = []  # Responses API input
        for item in input.history:
            role = read(item, "role")
            content = read(item, "content")
            if role == "system":
                if content:
                    systems.append(str(content))
            elif role == "user":
                if content:
                    messages.append({"role": "user", "content": str(content)})
                    items.append({"role": "user", "content": str(content)})
            elif role == "assistant":
                calls: list[tuple[str, str, str]] = []
                for call in history_calls(item):
                    call_id, name, args, _ = history_call(call)
                    calls.append((call_id or f"call_{len(calls)}", name, json.dumps(args, ensure_ascii=False)))
                if content:
                    items.append({"role": "assistant", "content": str(content)})
                for call_id, name, arguments in calls:
                    items.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments})
                if calls:
                    messages.append({"role": "assistant", "content": str(content) if content else None,
                                     "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                                    for i, n, a in calls]})
                elif content:
                    messages.append({"role": "assistant", "content": str(content)})
            elif role == "tool":
                call_id = tool_call_id(item) or ""
                messages.append({"role": "tool", "tool_call_id": call_id, "content": text_of(content)})
                items.append({"type": "function_call_output", "call_id": call_id, "output": text_of(content)})
        if input.prompt or not messages:
            messages.append({"role": "user", "content": input.prompt})
            items.append({"role": "user", "content": input.prompt})
        self.schema = input.parameters.json_schema or {}
        self.json_on = bool(self.schema)
        self.schema_name = input.parameters.schema_name or "structured_output"
        self.tools = [tool_spec(tool) for tool in input.tools or []]
        self.schema_in_prompt = self.json_on and schema_in_prompt
        if self.schema_in_prompt:
            systems.append(SCHEMA_IN_PROMPT.format(schema=json.dumps(self.schema, ensure_ascii=False)))
        self.system = "\n\n".join(systems)
        self.messages = ([{"role": "system", "content": self.system}] if self.system else []) + messages
        self.items = items
        self.max_output_tokens = input.parameters.max_output_tokens
        self.effort = (input.parameters.reasoning or {}).get("effort")


class _ChatFold(ReplyFold):
    """Chat-completions chunks: content deltas, tool-call fragments by index, usage in the last chunk."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.fragments: dict[int, dict[str, Any]] = {}

    def add(self, chunk: Any) -> str:
        if chunk.model and chunk.model != self.model:
            self.extra["modelVersion"] = chunk.model
        usage = chunk.usage
        if usage is not None:
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) if details is not None else None
            if cached is None:  # DeepSeek counts its cache hits under its own name
                cached = (getattr(usage, "model_extra", None) or {}).get("prompt_cache_hit_tokens")
            self.set_usage(usage.prompt_tokens, usage.completion_tokens, cached)
        if not chunk.choices:
            return ""
        choice = chunk.choices[0]
        if choice.finish_reason:
            self.finish_code = str(choice.finish_reason)
            self.finish = _CHAT_FINISH.get(self.finish_code, "stop")
            if self.finish == "content_filter":
                self.blocked = self.finish_code
        delta = choice.delta
        if delta is None:
            return ""
        extra = getattr(delta, "model_extra", None) or {}
        thought = extra.get("reasoning_content") or extra.get("reasoning")  # DeepSeek / OpenRouter
        if isinstance(thought, str):
            self.reasoning += thought
        for fragment in delta.tool_calls or []:
            slot = self.fragments.setdefault(fragment.index or 0, {"id": None, "name": "", "arguments": ""})
            if fragment.id:
                slot["id"] = fragment.id
            function = fragment.function
            if function is not None:
                if function.name:
                    slot["name"] += function.name
                if function.arguments:
                    slot["arguments"] += function.arguments
        return self.add_text(delta.content or "")

    def close_calls(self) -> None:
        for index in sorted(self.fragments):
            slot = self.fragments[index]
            self.calls.append({"id": slot["id"] or f"call_{index}", "toolName": slot["name"],
                               "arguments": tool_arguments(slot["arguments"])})


class _StreamFailure(Exception):
    """An error event inside a 200 Responses stream, read by the shared classifier."""

    def __init__(self, message: str, code: str | None, body: Any) -> None:
        super().__init__(message)
        self.code = code
        self.body = body


class _ResponsesFold(ReplyFold):
    """Responses API events: output text deltas, whole function-call items, usage on completion."""

    def add(self, event: Any) -> str:
        kind = getattr(event, "type", "")
        if kind == "response.output_text.delta":
            return self.add_text(event.delta or "")
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self.reasoning += event.delta or ""
        elif kind == "response.refusal.delta":
            self.blocked = "refusal"
        elif kind == "response.output_item.done":
            item = event.item
            if getattr(item, "type", None) == "function_call":
                self.calls.append({"id": item.call_id or item.id or f"call_{len(self.calls)}",
                                   "toolName": item.name or "", "arguments": tool_arguments(item.arguments)})
        elif kind in ("response.completed", "response.incomplete"):
            self._finish(event.response)
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            raise _StreamFailure(getattr(error, "message", None) or "the response failed",
                                 getattr(error, "code", None), _dump(error))
        elif kind == "error":
            raise _StreamFailure(getattr(event, "message", None) or "stream error", getattr(event, "code", None),
                                 _dump(event))
        return ""

    def _finish(self, response: Any) -> None:
        if response.model and response.model != self.model:
            self.extra["modelVersion"] = response.model
        if getattr(response, "id", None):
            self.extra["responseId"] = response.id
        usage = response.usage
        if usage is not None:
            details = getattr(usage, "input_tokens_details", None)
            self.set_usage(usage.input_tokens, usage.output_tokens, getattr(details, "cached_tokens", None))
        incomplete = getattr(response, "incomplete_details", None)
        reason = getattr(incomplete, "reason", None)
        if reason:
            self.finish_code = reason
            self.finish = "length" if reason == "max_output_tokens" else "content_filter" \
                if reason == "content_filter" else "stop"
            if reason == "content_filter":
                self.blocked = reason
        else:
            self.finish = "stop"


def _dump(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if dump is not None else value


class OpenAICompatibleProvider(DescribesImages, StreamingAdapter):
    """Any OpenAI-compatible endpoint. Keep one instance per process: it owns HTTP clients.

    Options: `api_key` (required; local servers ignore it, pass any non-empty string), `model`
    (required), `base_url`, `name` (what errors and metadata call it; default
    `"openai-compatible"`), `structured_output` (`"json_schema"` by default, or
    `"responses_parse"` / `"json_object"`), `json_with_tools` (`"response_format"` or
    `"prompt"`: on calls that carry tools, write the schema into the prompt instead), `strict`
    (OpenAI's strict schema mode; by default on exactly when the schema allows it),
    `backup_models`, `config` (`temperature`, `top_p`, `max_tokens`, `stop_sequences`,
    `effort`), `timeout_ms`, `retries`, `retry_config`, `default_headers`, `extra_body` (merged
    into every request body), `capabilities`, `transcription_model` (what `transcribe` asks the
    transcription endpoint for; default `gpt-4o-mini-transcribe`), `backoff_base_ms` /
    `backoff_cap_ms`, and for tests `sleep` (a callable taking milliseconds).
    """

    name = "openai-compatible"
    capabilities = ProviderCapabilities(
        supports_tools=True, supports_native_json_schema=True, supports_streaming=True,
        supports_streaming_tool_calls=True, supports_prompt_caching=False,
    )
    _label = "OpenAICompatibleProvider"
    _key_variable = "OPENAI_API_KEY"
    _example_model = "llama3.3"

    def __init__(
        self,
        api_key: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        *,
        name: str | None = None,
        structured_output: str = "json_schema",
        json_with_tools: str = "response_format",
        strict: bool | None = None,
        backup_models: list[str] | None = None,
        config: Mapping[str, Any] | None = None,
        timeout_ms: int | None = DEFAULT_TIMEOUT_MS,
        retries: int | None = DEFAULT_RETRIES,
        retry_config: Mapping[str, Any] | None = None,
        default_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        capabilities: ProviderCapabilities | None = None,
        backoff_base_ms: float = BACKOFF_BASE_MS,
        backoff_cap_ms: float = BACKOFF_CAP_MS,
        sleep: Callable[[float], None] | None = None,
        transcription_model: str = DEFAULT_TRANSCRIPTION_MODEL,
    ) -> None:
        label = self._label
        key = require_text(api_key, f"[{label}] apiKey",
                           f"the provider cannot authenticate. Pass api_key=os.environ['{self._key_variable}'] "
                           "and make sure that variable is set (a local server that ignores it takes any "
                           "non-empty string).")
        self.model = require_text(model, f"[{label}] model",
                                  f'there is no default. Pass one, for example model="{self._example_model}".')
        if structured_output not in STRUCTURED_OUTPUT_MODES:
            raise ValueError(f'[{label}] structured_output is "{structured_output}": it must be '
                             '"responses_parse", "json_schema" or "json_object".')
        if json_with_tools not in ("response_format", "prompt"):
            raise ValueError(f'[{label}] json_with_tools is "{json_with_tools}": it must be "response_format" '
                             'or "prompt".')
        if name:
            self.name = str(name)
        if capabilities is not None:
            self.capabilities = capabilities
        self._init_policy(api_key=key, timeout_ms=timeout_ms, retries=retries, backup_models=backup_models,
                          backoff_base_ms=backoff_base_ms, backoff_cap_ms=backoff_cap_ms, sleep=sleep,
                          retry_config=retry_config)
        self.structured_output = structured_output
        self.json_with_tools = json_with_tools
        self.strict = strict
        self.config = dict(config or {})
        self.extra_body = dict(extra_body or {})
        self.base_url = base_url
        self.transcription_model = str(transcription_model or DEFAULT_TRANSCRIPTION_MODEL)

        import openai

        # A float timeout applies to each phase and each read: an idle deadline, not a wall clock.
        options: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": self.timeout_ms / 1000,
                                   "default_headers": dict(default_headers or {}) or None}
        if base_url:
            options["base_url"] = base_url
        self._client = openai.OpenAI(**options)
        self._aclient = openai.AsyncOpenAI(**options)

    # -- request ---------------------------------------------------------------------------

    def _prepare(self, input: GenerateInput) -> _Request:
        json_on = bool(input.parameters.json_schema)
        in_prompt = self.structured_output == "json_object" or (
            bool(input.tools) and self.json_with_tools == "prompt")
        return _Request(input, schema_in_prompt=json_on and in_prompt)

    def _settings(self, request: _Request) -> dict[str, Any]:
        settings = self.config
        return {
            "temperature": settings.get("temperature"),
            "top_p": settings.get("top_p", settings.get("topP")),
            "stop": settings.get("stop_sequences", settings.get("stopSequences")),
            "max_tokens": request.max_output_tokens or settings.get("max_tokens", settings.get("maxTokens")),
            "effort": request.effort or settings.get("effort"),
        }

    def _strict_for(self, schema: dict[str, Any]) -> bool:
        return is_strict_schema(schema) if self.strict is None else bool(self.strict)

    def _chat_params(self, request: _Request, model: str) -> dict[str, Any]:
        s = self._settings(request)
        params: dict[str, Any] = {"model": model, "messages": request.messages, "stream": True,
                                  "stream_options": {"include_usage": True}}
        if request.tools:
            params["tools"] = [{"type": "function", "function": _function(tool)} for tool in request.tools]
        if request.json_on:
            if request.schema_in_prompt:
                if self.structured_output == "json_object":
                    params["response_format"] = {"type": "json_object"}
            else:
                params["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": request.schema_name, "schema": request.schema,
                    "strict": self._strict_for(request.schema)}}
        if s["temperature"] is not None:
            params["temperature"] = s["temperature"]
        if s["top_p"] is not None:
            params["top_p"] = s["top_p"]
        if s["stop"]:
            params["stop"] = list(s["stop"])
        if s["max_tokens"]:
            params["max_tokens"] = int(s["max_tokens"])
        if s["effort"] in _RESPONSES_EFFORT:
            params["reasoning_effort"] = _RESPONSES_EFFORT[s["effort"]]
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    def _responses_params(self, request: _Request, model: str) -> dict[str, Any]:
        s = self._settings(request)
        params: dict[str, Any] = {"model": model, "input": request.items, "stream": True, "store": False}
        if request.system:
            params["instructions"] = request.system
        if request.tools:
            params["tools"] = [{"type": "function", **_function(tool), "strict": False} for tool in request.tools]
        if request.json_on and not request.schema_in_prompt:
            params["text"] = {"format": {"type": "json_schema", "name": request.schema_name,
                                         "schema": request.schema, "strict": self._strict_for(request.schema)}}
        if s["temperature"] is not None:
            params["temperature"] = s["temperature"]
        if s["top_p"] is not None:
            params["top_p"] = s["top_p"]
        if s["max_tokens"]:
            params["max_output_tokens"] = int(s["max_tokens"])
        if s["effort"] in _RESPONSES_EFFORT:
            params["reasoning"] = {"effort": _RESPONSES_EFFORT[s["effort"]]}
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    # -- one attempt -----------------------------------------------------------------------

    def _fold(self, model: str) -> ReplyFold:
        return _ResponsesFold(model) if self.structured_output == "responses_parse" else _ChatFold(model)

    def _attempt(self, request: _Request, model: str, fold: Any) -> Generator[str, None, None]:
        if self.structured_output == "responses_parse":
            stream = self._client.responses.create(**self._responses_params(request, model))
        else:
            stream = self._client.chat.completions.create(**self._chat_params(request, model))
        yield from fold_events(stream, fold)
        if isinstance(fold, _ChatFold):
            fold.close_calls()

    async def _aattempt(self, request: _Request, model: str, fold: Any) -> AsyncGenerator[str, None]:
        if self.structured_output == "responses_parse":
            stream = await self._aclient.responses.create(**self._responses_params(request, model))
        else:
            stream = await self._aclient.chat.completions.create(**self._chat_params(request, model))
        async for text in afold_events(stream, fold):
            yield text
        if isinstance(fold, _ChatFold):
            fold.close_calls()

    # -- media understanding ---------------------------------------------------------------

    def _image_request(self, data: bytes, mime_type: str) -> _Request:
        """The instruction and the picture as one user message, in both dialects (the attempt
        picks the one this provider speaks); JSON off, so the reply's text is the description."""
        request = _Request(GenerateInput(prompt=DESCRIBE_IMAGE_PROMPT), schema_in_prompt=False)
        url = data_url(data, mime_type)
        request.messages = [{"role": "user", "content": [
            {"type": "text", "text": DESCRIBE_IMAGE_PROMPT},
            {"type": "image_url", "image_url": {"url": url}},
        ]}]
        request.items = [{"role": "user", "content": [
            {"type": "input_text", "text": DESCRIBE_IMAGE_PROMPT},
            {"type": "input_image", "image_url": url},
        ]}]
        return request

    def transcribe(self, data: bytes, mime_type: str) -> str:
        """The words of a voice note, from the transcription endpoint (chat models do not take
        audio everywhere; the endpoint does, and answers in the audio's own language)."""
        upload = (audio_filename(mime_type), bytes(data), bare_mime(mime_type))
        result = self._retrying(lambda model: self._client.audio.transcriptions.create(model=model, file=upload),
                                [self.transcription_model])
        return _transcript(result)

    async def atranscribe(self, data: bytes, mime_type: str) -> str:
        """See transcribe()."""
        upload = (audio_filename(mime_type), bytes(data), bare_mime(mime_type))

        async def call(model: str) -> Any:
            return await self._aclient.audio.transcriptions.create(model=model, file=upload)

        return _transcript(await self._aretrying(call, [self.transcription_model]))

    def close(self) -> None:
        """Releases the sync client's HTTP connections (`aclose()` for the async one)."""
        self._client.close()

    async def aclose(self) -> None:
        await self._aclient.close()


def _transcript(result: Any) -> str:
    """The text of a transcription answer (the SDK's object, or a bare string from a server that
    answers in `text` format); empty when the audio held no speech."""
    text = result if isinstance(result, str) else read(result, "text")
    return str(text or "").strip()


def _function(tool: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name or tool.id, "parameters": tool.parameters or {"type": "object"}}
    if tool.description:
        function["description"] = tool.description
    return function


class OpenAIProvider(OpenAICompatibleProvider):
    """OpenAI on the Responses API (`structured_output="responses_parse"`). Same options as
    `OpenAICompatibleProvider`; `base_url` defaults to the SDK's (`OPENAI_BASE_URL`, else
    `https://api.openai.com/v1`)."""

    name = "openai"
    capabilities = ProviderCapabilities(
        supports_tools=True, supports_native_json_schema=True, supports_streaming=True,
        supports_streaming_tool_calls=True, supports_prompt_caching=True,
    )
    _label = "OpenAIProvider"
    _example_model = "gpt-4.1-mini"

    def __init__(self, api_key: str | None = None, model: str | None = None, base_url: str | None = None, *,
                 structured_output: str = "responses_parse", **options: Any) -> None:
        super().__init__(api_key, model, base_url, structured_output=structured_output, **options)


class OpenRouterProvider(OpenAICompatibleProvider):
    """OpenRouter (chat completions, `json_schema`). `provider_order` pins the upstream hosts
    tried, in order, with OpenRouter's own fallback off (`allow_fallbacks`); `site_url` /
    `site_name` are its attribution headers."""

    name = "openrouter"
    capabilities = ProviderCapabilities(
        supports_tools=True, supports_native_json_schema=True, supports_streaming=True,
        supports_streaming_tool_calls=True, supports_prompt_caching=True,
    )
    _label = "OpenRouterProvider"
    _key_variable = "OPENROUTER_API_KEY"
    _example_model = "openai/gpt-4.1-mini"
    DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"

    def __init__(self, api_key: str | None = None, model: str | None = None, base_url: str | None = None, *,
                 provider_order: list[str] | None = None, allow_fallbacks: bool = False,
                 site_url: str | None = None, site_name: str | None = None, **options: Any) -> None:
        headers = dict(options.pop("default_headers", None) or {})
        if site_url:
            headers["HTTP-Referer"] = site_url
        if site_name:
            headers["X-Title"] = site_name
        extra = dict(options.pop("extra_body", None) or {})
        if provider_order:
            extra["provider"] = {"order": list(provider_order), "allow_fallbacks": bool(allow_fallbacks)}
        self.provider_order = list(provider_order or [])
        super().__init__(api_key, model, base_url or self.DEFAULT_BASE_URL, default_headers=headers,
                         extra_body=extra, **options)


class DeepSeekProvider(OpenAICompatibleProvider):
    """DeepSeek (chat completions): `json_object` with the schema in the prompt, which its API
    supports everywhere; `reasoning_content` is kept as reasoning, cache hits are counted. It has
    no `transcribe` / `describe_image` (nor their async twins): its API reads text only."""

    name = "deepseek"
    capabilities = ProviderCapabilities(
        supports_tools=True, supports_native_json_schema=False, supports_streaming=True,
        supports_streaming_tool_calls=True, supports_prompt_caching=True,
    )
    _label = "DeepSeekProvider"
    _key_variable = "DEEPSEEK_API_KEY"
    _example_model = "deepseek-chat"
    DEFAULT_BASE_URL = "https://api.deepseek.com"
    transcribe = _Absent("DeepSeek's API has no transcription endpoint")
    atranscribe = _Absent("DeepSeek's API has no transcription endpoint")
    describe_image = _Absent("DeepSeek's chat models read text only")
    adescribe_image = _Absent("DeepSeek's chat models read text only")

    def __init__(self, api_key: str | None = None, model: str | None = None, base_url: str | None = None, *,
                 structured_output: str = "json_object", **options: Any) -> None:
        super().__init__(api_key, model, base_url or self.DEFAULT_BASE_URL, structured_output=structured_output,
                         **options)
