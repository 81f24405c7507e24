"""The 24-hour customer service window.

Outside 24 hours after the customer's last message, WhatsApp accepts only templates from the
business. The host then passes a `silenced` on every input of the conversation that is not a
customer message (a customer message reopens the window): with `WINDOW = "skip"` talk and say
steps are skipped and `do` steps still run (so a template action after them goes out); with
`"stop"` the plain reason, so a fresh talk step ends its run. The `request_welcome` event (the
customer opened the chat for the first time) is answered like a message: a welcome flow speaks.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from falai_django.channels.whatsapp.parse import WELCOME_EVENT
from falai_django.engine.jstime import try_parse_iso

REASON = "whatsapp-24h-window"
WINDOW = timedelta(hours=24)


def last_customer_message_at(session: Any) -> datetime | None:
    value = getattr(session, "last_user_at", None) if session is not None else None
    return try_parse_iso(value) if isinstance(value, str) else None


def window_open(session: Any, now: datetime) -> bool:
    """Whether the business may still send free-form messages (a customer wrote in the last 24 h)."""
    last = last_customer_message_at(session)
    return last is not None and now - last <= WINDOW


def window_silenced(kind: str, session: Any, now: datetime, mode: str, event: str | None = None) -> Any:
    """`silenced` for one input: None while the window is open, for a customer message, and for
    the `request_welcome` event (the customer opened the chat: the welcome may answer it)."""
    if kind == "message" or event == WELCOME_EVENT or window_open(session, now):
        return None
    if mode == "stop":
        return REASON
    return {"reason": REASON, "skip": True}
