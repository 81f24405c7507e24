"""The playground's sandbox: its conversations never reach the project's real channel.

A conversation whose id starts with `PREFIX` (the playground makes every id it uses that way)
is sent through `sandbox_sender` instead of `FALAI["SENDER"]`: nothing leaves the process, the
outbox row is still marked sent (so the order, the retries and the admin look exactly as in
production), and its `channel_message_id` says `sandbox:<row id>` — the record of what would
have been sent, which the playground shows beside each reply.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("falai_django.sandbox")

PREFIX = "playground-"
CHANNEL_ID_PREFIX = "sandbox:"


def is_sandboxed(session_id: str) -> bool:
    """Whether this conversation belongs to the playground (and must never reach SENDER)."""
    return session_id.startswith(PREFIX)


def sandbox_sender(message: Any) -> str:
    """Record what would have been sent; send nothing."""
    logger.info("playground (sandbox, not sent) to %s: %s", message.session_id, message.text)
    return f"{CHANNEL_ID_PREFIX}{message.item_id}"
