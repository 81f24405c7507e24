"""A recording sender: FALAI["SENDER"] = "host.senders.record"."""

from __future__ import annotations

import threading
from typing import Any

sent: list[Any] = []
_lock = threading.Lock()
_failures: dict[str, int] = {"remaining": 0}


def reset() -> None:
    with _lock:
        sent.clear()
        _failures["remaining"] = 0


def fail_next(times: int) -> None:
    """The next `times` sends raise (a channel outage)."""
    _failures["remaining"] = times


def record(message: Any) -> str:
    with _lock:
        if _failures["remaining"] > 0:
            _failures["remaining"] -= 1
            raise ConnectionError("channel down")
        sent.append(message)
        return f"ch-{len(sent)}"


def file_sender(message: Any) -> str:
    """For real worker processes: append the send to $FALAI_TEST_SENT_LOG (one JSON line each)."""
    import fcntl
    import json
    import os
    import time

    delay = float(os.environ.get("FALAI_TEST_SEND_DELAY", "0") or 0)
    if delay:
        time.sleep(delay)
    line = json.dumps({"session_id": message.session_id, "key": message.idempotency_key, "text": message.text,
                       "pid": os.getpid()})
    with open(os.environ["FALAI_TEST_SENT_LOG"], "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(line + "\n")
    return f"file-{os.getpid()}"
