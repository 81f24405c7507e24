"""Built-in channels: what a conversation on a real messaging channel needs from the host.

`whatsapp` is the WhatsApp Cloud API (webhook, sender, delivery statuses, the 24-hour window,
templates). This package's own module is a leaf the host loop imports: the conversation a turn
runs for (`CURRENT_SESSION`, read by channel actions that write to the outbox) and the
channel's `silenced` rule (`silenced_by_channel`).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from falai_django import conf

# The conversation whose turn is running (set by the host loop around the engine call).
CURRENT_SESSION: ContextVar[str | None] = ContextVar("falai_current_session", default=None)


def enter_session(session_id: str) -> Token:
    return CURRENT_SESSION.set(session_id)


def leave_session(token: Token) -> None:
    CURRENT_SESSION.reset(token)


def silenced_by_channel(kind: str, session: Any, agent: Any = None, turn: dict[str, Any] | None = None) -> Any:
    """The `silenced` a channel imposes on this input (None when it imposes nothing). `turn` is
    the stored input (an event's name decides whether the customer reached out)."""
    settings = conf.whatsapp_settings()
    if settings is None or not settings.get("WINDOW"):
        return None
    from falai_django.channels.whatsapp.window import window_silenced

    return window_silenced(kind, session, conf.agent_now(agent), settings["WINDOW"],
                           event=(turn or {}).get("event") if kind == "event" else None)


# The keys a channel puts in a stored input's context (its own details, not the project's).
CHANNEL_CONTEXT_KEYS = frozenset({"whatsapp"})


def is_channel_context(context: Any) -> bool:
    """A context a channel stored with the input: only its own keys (`{"whatsapp": {...}}`)."""
    return isinstance(context, dict) and bool(context) and set(context) <= CHANNEL_CONTEXT_KEYS


def merge_context(built: Any, channel: dict[str, Any]) -> Any:
    """The project's context (`FALAI["CONTEXT"]`) with the channel's keys added. A project context
    that is not a dict is kept as it is (its flows are written against it); none gives the channel's."""
    if isinstance(built, dict):
        return {**built, **channel}
    return channel if built is None else built
