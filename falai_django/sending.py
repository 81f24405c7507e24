"""The SENDER contract: what your sender receives and what it may raise.

`FALAI["SENDER"]` names a callable `send(message: OutboundSend) -> str | None` (it may return the
channel's message id). The host calls it after commit, once per emitted message, in order, for
each conversation's pending outbound transcript rows (`host.delivery` does the sending: order,
`after_ms`, retries with backoff, one sender per conversation at a time).

A sender says what its channel answered by raising `PermanentSendError` (refused for good: the
row is marked failed and later messages go on) or `RetryLater` (slow down); any other exception is
retried with the usual backoff. The same message may reach the sender twice (a worker that died
between the call and marking the row sent): pass `idempotency_key` to the channel so it can drop
the duplicate. `log_sender`, the default, only logs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("falai_django.sending")


@dataclass(frozen=True)
class OutboundSend:
    """One emission handed to the sender."""

    session_id: str
    text: str
    kind: str | None
    media: dict[str, Any] | None
    key: str | None  # the engine's message key (<run>:<step>:<visit>), not unique on its own
    run_id: str | None
    step_id: str | None
    after_ms: int
    emission_key: str  # message key + occurrence + the input that produced it
    idempotency_key: str  # sha256 of session id + emission key: give it to the channel
    item_id: int


class SendError(Exception):
    """A sender may raise these to say what its channel answered (any other exception is retried
    with the usual backoff)."""


class PermanentSendError(SendError):
    """The channel refused the message for good (an undeliverable number, a closed window): the row
    is marked failed at once, with this error, and the conversation's later messages go on."""


class RetryLater(SendError):
    """The channel asked to slow down (a rate limit): retried with backoff, not before
    `retry_after_s` when the channel said how long to wait."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def log_sender(message: OutboundSend) -> None:
    """The default sender: logs the message. Replace it with your channel's client."""
    logger.info("falai send to %s [%s]: %s", message.session_id, message.idempotency_key[:12], message.text)


def channel_name(sender: Any) -> str:
    """The `channel` label of a sender's sends (`falai_sends_total`): its `channel` attribute
    when it has one (the WhatsApp sender's is "whatsapp"), else its function name without
    `_sender` (`log_sender` is "log")."""
    explicit = getattr(sender, "channel", None)
    if explicit:
        return str(explicit)
    name = getattr(sender, "__name__", None) or type(sender).__name__
    return name.removesuffix("_sender") or name
