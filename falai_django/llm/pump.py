"""The sync -> async stream pump: a sync iterable's items consumed from an event loop."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any, TypeVar

_T = TypeVar("_T")


async def iterate_in_thread(open_stream: Callable[[], Iterable[_T]], *,
                            context: contextvars.Context | None = None) -> AsyncGenerator[_T, None]:
    """The items of a sync iterable, produced in a worker thread and handed over a queue.

    `open_stream()` is called in that thread (inside `context` when one is given). An exception
    there is re-raised here; closing early still waits for the thread to finish its iterable.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()

    def pump() -> None:
        try:
            for item in open_stream():
                loop.call_soon_threadsafe(queue.put_nowait, item)
        except BaseException as exc:  # handed to the consumer, re-raised there
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, done)

    if context is None:
        task = loop.run_in_executor(None, pump)
    else:
        task = loop.run_in_executor(None, context.run, pump)
    try:
        while True:
            item = await queue.get()
            if item is done:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        await task
