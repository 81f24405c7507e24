"""The channel's one pooled HTTP client per process (thread-safe: the dispatcher sends from a
thread pool), shared by the sender and the media fetch. A leaf: it imports nothing of the host."""

from __future__ import annotations

import threading

import httpx

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def client() -> httpx.Client:
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client()
        return _client
