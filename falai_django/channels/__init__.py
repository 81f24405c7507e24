"""Built-in channels: what a conversation on a real messaging channel needs from the host.

`whatsapp` is the WhatsApp Cloud API (webhook, sender, delivery statuses, the 24-hour window,
templates). This package's own module is a leaf the host loop imports: the conversation a turn
runs for (`CURRENT_SESSION`, read by channel actions that write to the outbox) and the
channel's `silenced` rule (`silenced_by_channel`).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from .. import conf

# The conversation whose turn is running (set by the host loop around the engine call).
CURRENT_SESSION: ContextVar[str | None] = ContextVar("falai_current_session", default=None)


def enter_session(session_id: str) -> Token:
    return CURRENT_SESSION.set(session_id)


def leave_session(token: Token) -> None:
    try:
        CURRENT_SESSION.reset(token)
    except ValueError:  # a streamed turn resumed in another context: just clear it
        CURRENT_SESSION.set(None)


def silenced_by_channel(kind: str, session: Any, agent: Any = None) -> Any:
    """The `silenced` a channel imposes on this input (None when it imposes nothing)."""
    settings = conf.whatsapp_settings()
    if settings is None or not settings.get("WINDOW"):
        return None
    from .whatsapp.window import window_silenced

    return window_silenced(kind, session, conf.agent_now(agent), settings["WINDOW"])
