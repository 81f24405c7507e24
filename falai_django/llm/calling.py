"""How the engine calls a provider (and any user handler) from a sync turn.

`aturn` runs the sync turn in a worker thread and sets `HOME_LOOP` to the caller's loop, so
async provider, action and tool calls go back to that loop; a plain `turn` runs them on a
fresh loop. Every answer is read as a `GenerateOutput` / `StreamChunk`.

Every call is reported to the observers `observe_calls` registered (the app's metrics): the
provider, the answer or the error, and how long it took. An observer never breaks a call. The
opener `trace_calls` registered (the app's tracing) gives each call a span, current while the call
(or a stream's next chunk) is awaited and ended with its answer or error.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from . import recording
from .types import GenerateOutput, StreamChunk, as_chunk, as_output, read_usage

__all__ = ["HOME_LOOP", "call_media", "call_provider", "observe_calls", "resolve_awaitable", "stream_provider", "trace_calls"]

logger = logging.getLogger("falai_django.llm")

# observer(provider, output or None, error or None, seconds)
CallObserver = Callable[[Any, "GenerateOutput | None", "BaseException | None", float], None]
_observers: list[CallObserver] = []


def observe_calls(observer: CallObserver) -> None:
    """Report every model call to `observer` from now on (registering one twice is a no-op)."""
    if observer not in _observers:
        _observers.append(observer)


class CallSpan(Protocol):
    """What a span opener returns for one call."""

    def active(self) -> contextlib.AbstractContextManager[Any]: ...

    def finish(self, output: GenerateOutput | None, error: BaseException | None) -> None: ...


# opener(provider) -> a started span for one call, or None when nothing records
SpanOpener = Callable[[Any], "CallSpan | None"]
_span_opener: list[SpanOpener] = []


def trace_calls(opener: SpanOpener | None) -> None:
    """Open a span for every model call from now on with `opener` (None: no spans)."""
    _span_opener[:] = [opener] if opener is not None else []


def _plays_back(provider: Any) -> bool:
    """A provider that answers from recorded replies (`replay.cassette.Cassette`): its calls
    were made and counted when they were recorded, so they are neither reported nor traced again."""
    return getattr(provider, "plays_back", False) is True


def _open_span(provider: Any) -> CallSpan | None:
    if not _span_opener or _plays_back(provider):
        return None
    try:
        return _span_opener[0](provider)
    except Exception:  # noqa: BLE001 - tracing a call must never fail it
        logger.exception("falai: a model call's span could not be opened")
        return None


def _active(span: CallSpan | None) -> contextlib.AbstractContextManager[Any]:
    return span.active() if span is not None else contextlib.nullcontext()


def _finish(span: CallSpan | None, output: GenerateOutput | None, error: BaseException | None) -> None:
    if span is not None:
        try:
            span.finish(output, error)
        except Exception:  # noqa: BLE001 - likewise
            logger.exception("falai: a model call's span could not be ended")


def _report(provider: Any, output: GenerateOutput | None, error: BaseException | None, started: float) -> None:
    if _plays_back(provider):
        return
    seconds = time.perf_counter() - started
    for observer in _observers:
        try:
            observer(provider, output, error, seconds)
        except Exception:  # noqa: BLE001 - counting a call must never fail it
            logger.exception("falai: a model call observer failed")

def call_media(provider: Any, method: str, data: bytes, mime_type: str) -> Any:
    """`provider.<method>(data, mime_type)` (`transcribe`, `describe_image`), reported to the
    observers like any model call: it is counted, and its time is the model's, not the host's."""
    started = time.perf_counter()
    try:
        answer = getattr(provider, method)(data, mime_type)
    except BaseException as exc:
        _report(provider, None, exc, started)
        raise
    _report(provider, None, None, started)
    return answer


# The caller's event loop while `aturn` runs the sync turn in a worker thread: async action,
# tool and provider calls go back to it, so loop-bound resources (async DB clients) work.
HOME_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "falai_home_loop", default=None)


def resolve_awaitable(value: Any) -> Any:
    """Run an async handler's result to completion from sync code: on the `aturn` caller's
    loop when there is one, else on a fresh loop (in a thread if this one already runs a loop)."""
    if not inspect.isawaitable(value):
        return value

    async def wait() -> Any:
        return await value

    home = HOME_LOOP.get()
    if home is not None and home.is_running():
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not home:
            return asyncio.run_coroutine_threadsafe(wait(), home).result()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(wait())
        except BaseException as exc:  # handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def call_provider(provider: Any, request: Any) -> GenerateOutput:
    """`generate_message`, or under `aturn` the provider's `agenerate_message` on the caller's loop.
    The answer is read as a `GenerateOutput` whatever shape a hand-written provider gives it."""
    span = _open_span(provider)
    started = time.perf_counter()
    try:
        with _active(span):
            home = HOME_LOOP.get()
            if home is not None and home.is_running() and hasattr(provider, "agenerate_message"):
                output = as_output(asyncio.run_coroutine_threadsafe(provider.agenerate_message(request), home).result())
            else:
                output = as_output(resolve_awaitable(provider.generate_message(request)))
    except BaseException as exc:
        recording.note_reply(request, error=exc)
        _report(provider, None, exc, started)
        _finish(span, None, exc)
        raise
    recording.note_reply(request, output)
    _report(provider, output, None, started)
    _finish(span, output, None)
    return output


def stream_provider(provider: Any, request: Any) -> Iterator[StreamChunk]:
    """`generate_message_stream` as `StreamChunk`s; a provider without one answers in one chunk."""
    stream = getattr(provider, "generate_message_stream", None)
    if stream is None:
        out = call_provider(provider, request)
        yield StreamChunk(delta=out.message, accumulated=out.message, done=True, metadata=out.metadata,
                          structured=out.structured)
        return
    # The call's time is the time spent waiting for its chunks, not the reader's between them; its
    # span is current only while a chunk is awaited (never across a yield: the reader's code is not
    # the call's).
    span = _open_span(provider)
    started = time.perf_counter()
    last: StreamChunk | None = None
    usage: dict[str, Any] | None = None  # the metadata of the last chunk that counted tokens
    try:
        with _active(span):
            chunks = iter(stream(request))
        while True:
            try:
                with _active(span):
                    raw = next(chunks)
            except StopIteration:
                break
            last = as_chunk(raw)
            if read_usage(last.metadata) is not None:
                usage = last.metadata
            paused = time.perf_counter()
            yield last
            started += time.perf_counter() - paused
    except GeneratorExit:  # the reader stopped early: the call itself did not fail
        recording.note_reply(request, _streamed(last, usage))
        _report(provider, _streamed(last, usage), None, started)
        _finish(span, _streamed(last, usage), None)
        raise
    except BaseException as exc:
        recording.note_reply(request, error=exc)
        _report(provider, None, exc, started)
        _finish(span, None, exc)
        raise
    recording.note_reply(request, _streamed(last, usage))
    _report(provider, _streamed(last, usage), None, started)
    _finish(span, _streamed(last, usage), None)


def _streamed(last: StreamChunk | None, usage: dict[str, Any] | None) -> GenerateOutput:
    """A streamed answer as one output, for the observers."""
    if last is None:
        return GenerateOutput(message="", metadata=dict(usage or {}))
    return GenerateOutput(message=last.accumulated, metadata={**(last.metadata or {}), **(usage or {})},
                          structured=last.structured)
