"""How the engine calls a provider (and any user handler) from a sync turn.

`aturn` runs the sync turn in a worker thread and sets `HOME_LOOP` to the caller's loop, so
async provider, action and tool calls go back to that loop; a plain `turn` runs them on a
fresh loop. Every answer is read as a `GenerateOutput` / `StreamChunk`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Iterator
from typing import Any

from .types import GenerateOutput, StreamChunk, as_chunk, as_output

__all__ = ["HOME_LOOP", "call_provider", "resolve_awaitable", "stream_provider"]

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
    home = HOME_LOOP.get()
    if home is not None and home.is_running() and hasattr(provider, "agenerate_message"):
        return as_output(asyncio.run_coroutine_threadsafe(provider.agenerate_message(request), home).result())
    return as_output(resolve_awaitable(provider.generate_message(request)))


def stream_provider(provider: Any, request: Any) -> Iterator[StreamChunk]:
    """`generate_message_stream` as `StreamChunk`s; a provider without one answers in one chunk."""
    stream = getattr(provider, "generate_message_stream", None)
    if stream is None:
        out = call_provider(provider, request)
        yield StreamChunk(delta=out.message, accumulated=out.message, done=True, metadata=out.metadata,
                          structured=out.structured)
        return
    for chunk in stream(request):
        yield as_chunk(chunk)
