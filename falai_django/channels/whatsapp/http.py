"""The channel's one pooled HTTP client per process (thread-safe: the dispatcher sends from a
thread pool), shared by the sender and the media fetch, and how a Graph API error answer reads.
A leaf: it imports nothing of the host."""

from __future__ import annotations

import re
import threading
from typing import Any

import httpx

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def client() -> httpx.Client:
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client()
        return _client


def _error_of(data: Any) -> dict[str, Any]:
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else {}


def graph_error_code(data: Any) -> Any:
    """The `error.code` of a Graph API error answer (None when it has none)."""
    return _error_of(data).get("code")


def error_text(status: int, data: Any) -> str:
    """A Graph API error answer as one line: "<code> <title>: <details>" (HTTP <status> without a body)."""
    error = _error_of(data)
    title = error.get("error_user_title") or error.get("title") or error.get("message") or f"HTTP {status}"
    title = re.sub(r"^\(#\d+\)\s*", "", str(title))  # Meta prefixes its message with "(#code) "
    details = (error.get("error_data") or {}).get("details") if isinstance(error.get("error_data"), dict) else None
    text = " ".join(str(part) for part in (error.get("code"), title) if part not in (None, ""))
    if details and details != title:
        text = f"{text}: {details}"
    return text
