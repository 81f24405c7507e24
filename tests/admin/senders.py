"""A recording sender: FALAI["SENDER"] = "admin.senders.record"."""

from __future__ import annotations

import threading
from typing import Any

sent: list[Any] = []
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        sent.clear()


def record(message: Any) -> str:
    with _lock:
        sent.append(message)
        return f"ch-{len(sent)}"


def texts(session_id: str | None = None) -> list[str]:
    return [m.text for m in sent if session_id is None or m.session_id == session_id]
