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


def _whatsapp_of(stored: Any) -> dict[str, Any] | None:
    """A stored input's `context["whatsapp"]` (the channel's details), or None."""
    context = stored.get("context") if isinstance(stored, dict) else None
    whatsapp = context.get("whatsapp") if isinstance(context, dict) else None
    return whatsapp if isinstance(whatsapp, dict) else None


def prepare_input(record: Any, agent: Any = None) -> None:
    """What a channel does on the worker before a stored input's turn reads it: WhatsApp
    transcribes a voice note and describes an image (`whatsapp.media`). The input is changed in
    place and saved, once; anything that fails leaves it as the webhook stored it."""
    stored = getattr(record, "input", None)
    whatsapp = _whatsapp_of(stored)
    if whatsapp is None or not isinstance(stored, dict) or "message" not in stored.get("turn", {}):
        return
    from falai_django.channels.whatsapp.media import needs_work, understand

    if not needs_work(whatsapp.get("media"), str(whatsapp.get("type") or "")):
        return
    if understand(stored, record.conversation_id, agent) and record.pk is not None:
        type(record).objects.filter(pk=record.pk).update(input=stored)


def line_media(stored: Any) -> dict[str, Any] | None:
    """What a customer's transcript line keeps of the channel's media (the id, the type, the
    transcription or description): `context["whatsapp"]["media"]`, else None."""
    whatsapp = _whatsapp_of(stored) or {}
    media = whatsapp.get("media")
    if not isinstance(media, dict) or not media:
        return None
    return {"type": whatsapp.get("type"), **media}


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
