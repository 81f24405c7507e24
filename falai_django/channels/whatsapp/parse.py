"""A `whatsapp_business_account` webhook body → the host's inputs, reactions and statuses.

Meta batches: every `entry` × `change` × `message` (and × `status`) is read. The session id is
the sender's `wa_id` (`from`), the input id the message's `wamid`, `at` its `timestamp`. Each
message type gives a text for the turn and a `context["whatsapp"]` with what the flows may need
(the reply id of a button, the media id, the profile name). Nothing here touches the database.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from falai_django.engine.jstime import to_iso

logger = logging.getLogger("falai_django.whatsapp")

MEDIA_TYPES = ("image", "audio", "video", "document", "sticker")
# What the turn reads for a media message without a caption.
MEDIA_MARKERS = {
    "image": "[image]",
    "audio": "[audio]",
    "video": "[video]",
    "document": "[document]",
    "sticker": "[sticker]",
}


@dataclass(frozen=True)
class InboundMessage:
    """One customer message, ready to become a turn input."""

    session_id: str  # the customer's wa_id
    id: str  # the wamid
    at: str | None  # ISO 8601, from the message's timestamp
    text: str
    context: dict[str, Any]  # {"whatsapp": {...}}: the turn's context


@dataclass(frozen=True)
class Reaction:
    """A reaction to one of our messages (or theirs): recorded on the transcript, no turn."""

    session_id: str
    id: str
    at: str | None
    emoji: str  # "" when the customer removed the reaction
    message_id: str  # the wamid reacted to


@dataclass(frozen=True)
class Status:
    """A delivery status of a message we sent."""

    message_id: str  # the wamid Meta returned when we sent it
    status: str  # sent | delivered | read | failed
    at: str | None
    recipient_id: str
    error: str = ""  # "<code> <title>: <details>" for a failed delivery
    callback_data: str = ""  # biz_opaque_callback_data: the outbox's idempotency key, echoed back


@dataclass
class Batch:
    messages: list[InboundMessage] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    statuses: list[Status] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # why each skipped item was left out


def _at(timestamp: Any) -> str | None:
    """Meta's timestamps are Unix seconds, as text."""
    try:
        return to_iso(datetime.fromtimestamp(int(str(timestamp)), UTC))
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def error_text(errors: Any) -> str:
    """Meta's `errors` array as one line: `<code> <title>: <details>`."""
    first = _as_dict((_as_list(errors) or [None])[0])
    if not first:
        return ""
    details = _as_dict(first.get("error_data")).get("details") or first.get("message") or ""
    head = " ".join(str(part) for part in (first.get("code"), first.get("title")) if part not in (None, ""))
    return f"{head}: {details}" if details and details != first.get("title") else head


def parse_webhook(payload: Any, phone_number_id: str | None = None) -> Batch:
    """Read every entry × change of a webhook body. Unknown shapes are skipped, never raised.

    With `phone_number_id`, changes addressed to another number of the same app are skipped
    (their replies would leave from ours).
    """
    batch = Batch()
    if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
        batch.skipped.append(f"not a whatsapp_business_account body: {str(_as_dict(payload).get('object'))[:80]}")
        return batch
    for entry in _as_list(payload.get("entry")):
        for change in _as_list(_as_dict(entry).get("changes")):
            change = _as_dict(change)
            value = _as_dict(change.get("value"))
            if change.get("field") != "messages":
                batch.skipped.append(f"change field {change.get('field')!r}")
                continue
            number = _as_dict(value.get("metadata")).get("phone_number_id")
            if phone_number_id and number and str(number) != str(phone_number_id):
                logger.info("whatsapp: skipped a change for phone number id %s (ours is %s)", number, phone_number_id)
                batch.skipped.append(f"change for phone number id {number}")
                continue
            _read_value(value, batch)
    return batch


def _read_value(value: dict[str, Any], batch: Batch) -> None:
    metadata = _as_dict(value.get("metadata"))
    names = {}
    for contact in _as_list(value.get("contacts")):
        contact = _as_dict(contact)
        if contact.get("wa_id"):
            names[str(contact["wa_id"])] = _as_dict(contact.get("profile")).get("name")
    for message in _as_list(value.get("messages")):
        _read_message(_as_dict(message), metadata, names, batch)
    for status in _as_list(value.get("statuses")):
        status = _as_dict(status)
        if not status.get("id") or not status.get("status"):
            batch.skipped.append("a status without id or status")
            continue
        batch.statuses.append(Status(
            message_id=str(status["id"]),
            status=str(status["status"]),
            at=_at(status.get("timestamp")),
            recipient_id=str(status.get("recipient_id") or ""),
            error=error_text(status.get("errors")),
            callback_data=str(status.get("biz_opaque_callback_data") or ""),
        ))


def _read_message(message: dict[str, Any], metadata: dict[str, Any], names: dict[str, Any], batch: Batch) -> None:
    sender, wamid, kind = message.get("from"), message.get("id"), message.get("type")
    if not sender or not wamid:
        batch.skipped.append("a message without from or id")
        return
    sender, wamid = str(sender), str(wamid)
    at = _at(message.get("timestamp"))
    if kind == "reaction":
        reaction = _as_dict(message.get("reaction"))
        batch.reactions.append(Reaction(session_id=sender, id=wamid, at=at, emoji=str(reaction.get("emoji") or ""),
                                        message_id=str(reaction.get("message_id") or "")))
        return
    details: dict[str, Any] = {"type": kind, "wa_id": sender, "message_id": wamid}
    if names.get(sender):
        details["profile_name"] = names[sender]
    if metadata.get("phone_number_id"):
        details["phone_number_id"] = str(metadata["phone_number_id"])
    replied_to = _as_dict(message.get("context")).get("id")
    if replied_to:
        details["replied_to"] = str(replied_to)
    text = _text_of(kind, message, details)
    if text is None:
        logger.info("whatsapp: skipped a %r message %s from %s", kind, wamid, sender)
        batch.skipped.append(f"{kind} message {wamid}")
        return
    batch.messages.append(InboundMessage(session_id=sender, id=wamid, at=at, text=text,
                                         context={"whatsapp": details}))


def _text_of(kind: Any, message: dict[str, Any], details: dict[str, Any]) -> str | None:
    """The turn's text for one message type (None: not a turn), filling `details`."""
    if kind == "text":
        return str(_as_dict(message.get("text")).get("body") or "")
    if kind == "interactive":
        interactive = _as_dict(message.get("interactive"))
        reply = _as_dict(interactive.get(interactive.get("type"))) if interactive.get("type") in (
            "button_reply", "list_reply") else {}
        if not reply:
            return None
        details["reply_id"] = reply.get("id")
        return str(reply.get("title") or "")
    if kind == "button":  # a template's quick-reply button
        button = _as_dict(message.get("button"))
        details["reply_id"] = button.get("payload")
        return str(button.get("text") or "")
    if kind in MEDIA_TYPES:
        media = _as_dict(message.get(kind))
        details["media"] = {k: media[k] for k in ("id", "mime_type", "filename", "animated") if k in media}
        caption = media.get("caption")
        if caption:
            return str(caption)
        if kind == "document" and media.get("filename"):
            return f"[document: {media['filename']}]"
        return MEDIA_MARKERS[kind]
    if kind == "location":
        location = _as_dict(message.get("location"))
        details["location"] = {k: location[k] for k in ("latitude", "longitude", "name", "address", "url")
                               if k in location}
        place = ", ".join(str(location[k]) for k in ("name", "address") if location.get(k))
        where = f"{location.get('latitude')}, {location.get('longitude')}"
        return f"[location: {place} ({where})]" if place else f"[location: {where}]"
    return None  # unsupported, system, unknown, order…: logged and skipped
