"""An httpx async transport with one connection pool per event loop.

google-genai sends its async calls through aiohttp whenever aiohttp is importable, unless it is
handed an httpx transport; aiohttp's errors and its threaded DNS lookups are not what the
provider classifies and promises (a dropped connection must read as `network`, the async twins
must not leave the loop). A plain `httpx.AsyncHTTPTransport` would keep the SDK on httpx, but
its pooled connections belong to the loop that opened them, so a second `asyncio.run()` would
meet "Event loop is closed" (the SDK's own client keeps a pool per loop for that reason, and
stops doing so when given a transport). This transport does it instead.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx

__all__ = ["PerLoopTransport"]


class PerLoopTransport(httpx.AsyncBaseTransport):
    """Sends each request through the running loop's own `httpx.AsyncHTTPTransport`."""

    def __init__(self, **transport_kwargs: Any) -> None:
        self._kwargs = transport_kwargs
        self._pools: dict[asyncio.AbstractEventLoop, httpx.AsyncHTTPTransport] = {}
        self._lock = threading.Lock()

    def _pool(self) -> httpx.AsyncHTTPTransport:
        loop = asyncio.get_running_loop()
        with self._lock:
            for gone in [other for other in self._pools if other.is_closed()]:
                del self._pools[gone]  # its sockets went with the loop; let the collector have the rest
            pool = self._pools.get(loop)
            if pool is None:
                pool = self._pools[loop] = httpx.AsyncHTTPTransport(**self._kwargs)
            return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._pool().handle_async_request(request)

    async def aclose(self) -> None:
        """Closes this loop's pool (another loop's can only be closed from that loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            pool = self._pools.pop(loop, None)
        if pool is not None:
            await pool.aclose()
