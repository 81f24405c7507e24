"""The pipeline every vendor provider shares (persistence-and-LLM note §5.2).

A vendor module supplies two things: how to open one streamed attempt against one model
(`StreamingAdapter._attempt` / `_aattempt`, generators that fold the vendor's events into a
`ReplyFold` and yield the new text), and its construction. This module supplies the rest,
once for all of them:

- the loop over `[model, *backup_models]` with retries of transient kinds (full-jitter
  exponential backoff; a server `Retry-After` honoured up to the cap, beyond it retrying stops
  so an outer `FallbackProvider` can act), never after output was emitted;
- classification through `falai_django.llm.classify` and redaction of the API key from every
  error it raises (`redacted`, `reraise`);
- the terminal chunk: the envelope read leniently (`falai_django.llm.jsonparse`), a broken
  envelope blanked, tool calls folded into `structured`, usage in metadata;
- media understanding under that same policy: `_complete` / `_acomplete` run a request the
  vendor built itself (an audio or image part beside an instruction, JSON off) through the
  streamed loop and return the final text, and `_retrying` / `_aretrying` wrap a call that does
  not stream (OpenAI's transcription endpoint). `TRANSCRIBE_PROMPT` and `DESCRIBE_IMAGE_PROMPT`
  are the instructions every vendor sends with the media.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from falai_django.llm.errors import ProviderError, classify_error
from falai_django.llm.jsonparse import is_json_shaped, try_parse_json_response
from falai_django.llm.types import BaseProvider, GenerateInput, GenerateOutput, StreamChunk, ToolSpec

DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_RETRIES = 3
BACKOFF_BASE_MS = 1_000
BACKOFF_CAP_MS = 30_000
BACKUP_KINDS = frozenset({"overload", "rate", "model"})
SCHEMA_IN_PROMPT = (
    "Reply with a single JSON object, and nothing else, that conforms to this JSON schema:\n{schema}"
)
# The instructions sent beside a customer's media. A voice note is transcribed verbatim in its
# own language (the agent reads it as the customer's words); a picture is described briefly in
# the customer's language, since that description is what the agent reads in its place.
TRANSCRIBE_PROMPT = (
    "Transcribe this audio exactly as spoken, in its own language, without translating or summarising. "
    "Reply with the transcription only."
)
DESCRIBE_IMAGE_PROMPT = (
    "Describe this image factually in one or two short sentences, written in the language the customer "
    "who sent it most likely speaks (the language of any text it shows, if any). "
    "Reply with the description only."
)
_T = TypeVar("_T")


def bare_mime(mime_type: str) -> str:
    """`mime_type` without parameters (`audio/ogg; codecs=opus` -> `audio/ogg`), lowercased: the
    form vendors list in their supported types."""
    return str(mime_type or "").split(";", 1)[0].strip().lower()


def read(item: Any, key: str) -> Any:
    """`item[key]` for a mapping, `item.key` for any other object; None when absent."""
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, key, None)


def tool_arguments(value: Any) -> dict[str, Any]:
    """Tool-call arguments as an object, from a dict or (possibly fenced or cut) JSON text."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        parsed = try_parse_json_response(value)
        return parsed if isinstance(parsed, dict) else {"value": parsed} if parsed is not None else {}
    return {}


def history_call(call: Any) -> tuple[str | None, str, dict[str, Any], Any]:
    """(id, name, arguments, thoughtSignature) from a history tool call in any common spelling
    (`toolName` / `name` / OpenAI's `function: {name, arguments}`)."""
    function = read(call, "function")
    function = function if isinstance(function, Mapping) else {}
    name = read(call, "toolName") or read(call, "name") or function.get("name") or ""
    args = next((v for v in (read(call, "arguments"), read(call, "args"), function.get("arguments"))
                 if v is not None), None)
    signature = read(call, "thoughtSignature") or read(call, "thought_signature")
    return read(call, "id"), str(name), tool_arguments(args), signature


def history_calls(item: Any) -> list[Any]:
    return list(read(item, "tool_calls") or read(item, "toolCalls") or [])


def tool_call_id(item: Any) -> str | None:
    found: str | None = read(item, "tool_call_id") or read(item, "toolCallId")
    return found


def tool_spec(tool: Any) -> ToolSpec:
    """A ToolSpec from a ToolSpec, a dict or an object with the same fields."""
    if isinstance(tool, ToolSpec):
        return tool
    get: Callable[[str], Any] = tool.get if isinstance(tool, dict) else (lambda key: getattr(tool, key, None))
    return ToolSpec(id=get("id") or get("name") or "", name=get("name"), description=get("description"),
                    parameters=get("parameters"))


def text_of(content: Any) -> str:
    """A history item's content as text (a tool result that is not a string is sent as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    import json

    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


class ReplyFold:
    """One attempt's reply as it streams in: text, reasoning, tool calls, usage and finish.

    Vendor code fills it (`add_text`, `calls`, `set_usage`, `finish`, `blocked`); `terminal`
    turns it into the last `StreamChunk` the same way for every vendor.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.text = ""
        self.reasoning = ""
        self.calls: list[dict[str, Any]] = []  # [{"id", "toolName", "arguments"}]
        self.finish: str | None = None  # normalised: stop, length, content_filter, tool_calls, ...
        self.finish_code: str | None = None  # the vendor's own word, for an error's `code`
        self.blocked: str | None = None  # why the vendor refused to answer, when it did
        self.usage: tuple[int, int, int] | None = None  # prompt, completion, cached input
        self.extra: dict[str, Any] = {}  # more metadata (modelVersion, responseId, ...)
        self.opened = False  # the HTTP stream answered 200: a failure now is in-band

    def add_text(self, delta: str) -> str:
        if delta:
            self.text += delta
        return delta

    def set_usage(self, prompt: int | None, completion: int | None, cached: int | None = None) -> None:
        if prompt is None and completion is None:
            return
        self.usage = (int(prompt or 0), int(completion or 0), int(cached or 0))

    def require_content(self, provider: str) -> None:
        """A stream that ended with neither text nor tool calls failed (overload, or content if blocked)."""
        if self.text or self.calls:
            return
        if self.blocked:
            raise ProviderError(provider, "content", f"{provider} content: the reply was blocked ({self.blocked})",
                                code=self.blocked)
        raise ProviderError(provider, "overload", f"{provider} overload: the stream ended with no content",
                            code=self.finish_code)

    def metadata(self) -> dict[str, Any]:
        finish = "tool_calls" if self.calls else (self.finish or "stop")
        meta: dict[str, Any] = {"model": self.model, "finishReason": finish, **self.extra}
        if self.usage is not None:
            prompt, completion, cached = self.usage
            meta.update(promptTokens=prompt, completionTokens=completion, cachedInputTokens=cached,
                        tokensUsed=prompt + completion)
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


def fold_events(stream: Any, fold: Any) -> Generator[str, None, None]:
    """Feed a vendor stream's events to `fold` (its `add` returns each event's new text); the
    stream is closed however the loop ends, so an early exit releases the connection."""
    fold.opened = True
    try:
        for event in stream:
            yield fold.add(event)
    finally:
        stream.close()


async def afold_events(stream: Any, fold: Any) -> AsyncGenerator[str, None]:
    """See fold_events()."""
    fold.opened = True
    try:
        async for event in stream:
            yield fold.add(event)
    finally:
        await stream.close()


def redacted(error: ProviderError, secret: str) -> ProviderError:
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
    clean.redacted = True  # type: ignore[attr-defined]  # reraise()'s private mark, not a ProviderError field
    return clean


def reraise(error: ProviderError, exc: BaseException, secret: str = "") -> NoReturn:
    if error is exc:
        raise error
    if getattr(error, "redacted", False) or (secret and secret in str(exc)):
        raise error from None  # the original still carries the key: do not chain it
    raise error from exc


def require_text(value: Any, what: str, example: str) -> str:
    """`value` as a non-blank string, else the construction error upstream words this way."""
    if not value or not str(value).strip():
        raise ValueError(f"{what} is empty: {example}")
    return str(value)


class StreamingAdapter(BaseProvider):
    """Retries, backup models, classification and the terminal chunk around a vendor's attempts.

    A subclass sets `model`, `backup_models`, `retries`, `backoff_base_ms`, `backoff_cap_ms`,
    `_sleep_ms` and `_secret` (through `_init_policy`), and implements `_prepare(input)` (an object
    with a `json_on` attribute), `_attempt(request, model, fold)` and `_aattempt(...)`. A vendor that
    understands media builds its own request for it and hands it to `_complete` / `_acomplete`.
    """

    model: str
    backup_models: list[str]
    retries: int
    timeout_ms: int

    def _init_policy(self, *, api_key: str, timeout_ms: int | None, retries: int | None,
                     backup_models: list[str] | None, backoff_base_ms: float, backoff_cap_ms: float,
                     sleep: Callable[[float], None] | None, retry_config: Mapping[str, Any] | None) -> None:
        if retry_config:  # upstream's retryConfig: {timeout, retries}; it wins over the flat options
            if "timeout" in retry_config or "timeout_ms" in retry_config:
                timeout_ms = retry_config.get("timeout", retry_config.get("timeout_ms"))
            if "retries" in retry_config:
                retries = retry_config["retries"]
        self.timeout_ms = int(timeout_ms or DEFAULT_TIMEOUT_MS)  # 0 means the default, as upstream's "or"
        self.retries = DEFAULT_RETRIES if retries is None else max(0, int(retries))
        self.backup_models = list(backup_models or [])
        self.backoff_base_ms = backoff_base_ms
        self.backoff_cap_ms = backoff_cap_ms
        self._sleep_ms = sleep
        self._secret = str(api_key)

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(name={self.name!r}, model={getattr(self, 'model', None)!r})"

    # -- vendor hooks ------------------------------------------------------------------------

    def _prepare(self, input: GenerateInput) -> Any:
        raise NotImplementedError

    def _attempt(self, request: Any, model: str, fold: ReplyFold) -> Generator[str, None, None]:
        raise NotImplementedError

    def _aattempt(self, request: Any, model: str, fold: ReplyFold) -> AsyncGenerator[str, None]:
        raise NotImplementedError

    def _fold(self, model: str) -> ReplyFold:
        return ReplyFold(model)

    def _in_stream(self, exc: BaseException, fold: ReplyFold) -> bool:
        """True when the failure arrived inside an open (200) stream: `unknown` is floored to overload."""
        return fold.opened

    # -- retry policy ----------------------------------------------------------------------

    def _after_failure(self, exc: Exception, fold: ReplyFold, emitted: bool, attempt: int, model_index: int,
                       models: int) -> tuple[str, float]:
        """("retry", delay_ms) or ("backup", 0) after a failed call; otherwise re-raises it, classified
        and with the key redacted. Once output was emitted it always re-raises: never restart an answer."""
        error = redacted(classify_error(exc, self.name, in_stream=self._in_stream(exc, fold)), self._secret)
        if not emitted:
            if error.is_transient and attempt < self.retries:
                delay = self._backoff_ms(attempt, error.retry_after_ms)
                if delay is not None:
                    return "retry", delay
            if error.kind in BACKUP_KINDS and model_index + 1 < models:
                return "backup", 0.0
        reraise(error, exc, self._secret)

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
        yield from self._stream(self._prepare(input))

    async def agenerate_message_stream(self, input: GenerateInput) -> AsyncIterator[StreamChunk]:
        """See generate_message_stream(); runs on the SDK's native async client."""
        stream = self._astream(self._prepare(input))
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await stream.aclose()  # an early exit by the caller releases the connection now

    def _stream(self, request: Any) -> Generator[StreamChunk, None, None]:
        """The call over an already-prepared request: each model in turn, each retried, until one
        answers (the chunks of that answer) or the last failure is raised."""
        models = [self.model, *self.backup_models]
        for index, model in enumerate(models):
            attempt = 0
            while True:
                fold = self._fold(model)
                emitted = False
                stream = self._attempt(request, model, fold)
                try:
                    try:
                        for delta in stream:
                            if delta:
                                emitted = True
                                yield StreamChunk(delta=delta, accumulated=fold.text)
                    finally:
                        stream.close()  # an early exit by the caller releases the connection now
                    fold.require_content(self.name)
                except Exception as exc:
                    step, delay = self._after_failure(exc, fold, emitted, attempt, index, len(models))
                    if step == "retry":
                        self._wait(delay)
                        attempt += 1
                        continue
                    break  # on to the next backup model
                yield fold.terminal(request.json_on, self.name)
                return

    async def _astream(self, request: Any) -> AsyncGenerator[StreamChunk, None]:
        """See _stream()."""
        models = [self.model, *self.backup_models]
        for index, model in enumerate(models):
            attempt = 0
            while True:
                fold = self._fold(model)
                emitted = False
                stream = self._aattempt(request, model, fold)
                try:
                    try:
                        async for delta in stream:
                            if delta:
                                emitted = True
                                yield StreamChunk(delta=delta, accumulated=fold.text)
                    finally:
                        await stream.aclose()
                    fold.require_content(self.name)
                except Exception as exc:
                    step, delay = self._after_failure(exc, fold, emitted, attempt, index, len(models))
                    if step == "retry":
                        await self._await(delay)
                        attempt += 1
                        continue
                    break
                yield fold.terminal(request.json_on, self.name)
                return

    # -- media understanding (the vendor builds the request; the policy is the one above) ------

    def _complete(self, request: Any) -> str:
        """The final text of a vendor-built request with JSON off (an audio or image part and an
        instruction), through the same loop as text: retries, backup models, redaction."""
        last: StreamChunk | None = None
        for chunk in self._stream(request):
            last = chunk
        return self._final_text(last)

    async def _acomplete(self, request: Any) -> str:
        """See _complete()."""
        last: StreamChunk | None = None
        stream = self._astream(request)
        try:
            async for chunk in stream:
                last = chunk
        finally:
            await stream.aclose()
        return self._final_text(last)

    def _final_text(self, last: StreamChunk | None) -> str:
        if last is None:  # unreachable: the stream ends with a terminal chunk or raises
            raise ProviderError(self.name, "overload", f"{self.name}: no response")
        return last.accumulated.strip()

    def _retrying(self, call: Callable[[str], _T], models: Sequence[str] | None = None) -> _T:
        """`call(model)` for a request that does not stream, under the same policy as a streamed
        attempt: transient kinds retried with the same backoff, then the next of `models`
        (default the provider's model and backups), the last failure classified and redacted."""
        models = list(models or [self.model, *self.backup_models])
        for index, model in enumerate(models):
            attempt = 0
            while True:
                try:
                    return call(model)
                except Exception as exc:
                    step, delay = self._after_failure(exc, ReplyFold(model), False, attempt, index, len(models))
                    if step == "retry":
                        self._wait(delay)
                        attempt += 1
                        continue
                    break  # on to the next model
        raise ProviderError(self.name, "unknown", f"{self.name}: no model to call")  # models was empty

    async def _aretrying(self, acall: Callable[[str], Awaitable[_T]], models: Sequence[str] | None = None) -> _T:
        """See _retrying(); `acall(model)` returns an awaitable."""
        models = list(models or [self.model, *self.backup_models])
        for index, model in enumerate(models):
            attempt = 0
            while True:
                try:
                    return await acall(model)
                except Exception as exc:
                    step, delay = self._after_failure(exc, ReplyFold(model), False, attempt, index, len(models))
                    if step == "retry":
                        await self._await(delay)
                        attempt += 1
                        continue
                    break
        raise ProviderError(self.name, "unknown", f"{self.name}: no model to call")

    async def agenerate_message(self, input: GenerateInput) -> GenerateOutput:
        """See generate_message()."""
        last: StreamChunk | None = None
        async for chunk in self.agenerate_message_stream(input):
            last = chunk
        if last is None:  # unreachable: the stream ends with a terminal chunk or raises
            raise ProviderError(self.name, "overload", f"{self.name}: no response")
        return GenerateOutput(message=last.accumulated, metadata=last.metadata or {}, structured=last.structured)


class DescribesImages:
    """`describe_image` / `adescribe_image` for a `StreamingAdapter` whose vendor reads pictures: the
    vendor builds the request (`_image_request`: the picture and `DESCRIBE_IMAGE_PROMPT`, JSON off)
    and the shared loop runs it. Mixed in before `StreamingAdapter`."""

    def _image_request(self, data: bytes, mime_type: str) -> Any:
        raise NotImplementedError

    if TYPE_CHECKING:  # StreamingAdapter's, which this mixin comes before in a vendor's bases
        def _complete(self, request: Any) -> str: ...
        async def _acomplete(self, request: Any) -> str: ...

    def describe_image(self, data: bytes, mime_type: str) -> str:
        """A one- or two-sentence description of a picture, which the agent reads in its place."""
        return self._complete(self._image_request(data, mime_type))

    async def adescribe_image(self, data: bytes, mime_type: str) -> str:
        """See describe_image()."""
        return await self._acomplete(self._image_request(data, mime_type))
