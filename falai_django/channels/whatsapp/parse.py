"""A `whatsapp_business_account` webhook body → the host's inputs, transcript notes and statuses.

Meta batches: every `entry` × `change` × `message` (and × `status`) is read. The session id is
the sender's phone number (`from`, the `wa_id`) or, for a customer whose number Meta withholds
(a username), their business-scoped user id (`from_user_id`, a BSUID such as
`BR.1502576394655843`); the input id is the message's `wamid`, `at` its `timestamp`. Each
message type gives a text for the turn and a `context["whatsapp"]` with what the flows may need
(the reply id of a button, the media id, the contact cards, the order's items, a Flow's answers).
What is not the customer speaking to the agent (a reaction, an edit or a deletion of an earlier
message, a system notice) is a `Note` for the transcript. Nothing here touches the database.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
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
# A business-scoped user id: a two-letter country code, a dot, then letters and digits (a parent
# BSUID has `ENT.` after the country). A phone number (`wa_id`) is digits only.
BSUID = re.compile(r"^[A-Z]{2}\.(?:ENT\.)?[A-Za-z0-9]+$")
# `request_welcome` (a customer opened the chat for the first time) reaches the agent as this event.
WELCOME_EVENT = "whatsapp.request_welcome"
# Unsupported messages that stand for a change to an earlier message (Meta sometimes delivers
# edits this way): a transcript note, not a turn.
UNSUPPORTED_CHANGES = ("edit", "revoke")


def is_bsuid(value: str) -> bool:
    """True for a business-scoped user id (`US.13491208655302741918`), False for a phone number."""
    return bool(BSUID.match(value or ""))


@dataclass(frozen=True)
class InboundMessage:
    """One customer message, ready to become a turn input (a message, or an event)."""

    session_id: str  # the customer's wa_id, else their business-scoped user id
    id: str  # the wamid
    at: str | None  # ISO 8601, from the message's timestamp
    text: str
    context: dict[str, Any]  # {"whatsapp": {...}}: the turn's context
    event: str | None = None  # an event input (`WELCOME_EVENT`) instead of a message


@dataclass(frozen=True)
class Reaction:
    """A reaction to one of our messages (or theirs): recorded on the transcript, no turn."""

    session_id: str
    id: str
    at: str | None
    emoji: str  # "" when the customer removed the reaction
    message_id: str  # the wamid reacted to


@dataclass(frozen=True)
class Note:
    """A change to the transcript that is no turn: `edit` and `revoke` of an earlier message
    (`original_id`), or a `system` notice (a changed number or user id), or an `unsupported`
    change Meta could not describe."""

    session_id: str
    id: str  # the wamid of the notice itself
    at: str | None
    kind: str  # edit | revoke | system | unsupported
    text: str = ""  # the edited text; the system notice's body
    original_id: str = ""  # the wamid edited or revoked
    context: dict[str, Any] = field(default_factory=dict)  # the edited message's `context["whatsapp"]`


@dataclass(frozen=True)
class Status:
    """A delivery status of a message we sent."""

    message_id: str  # the wamid Meta returned when we sent it
    status: str  # sent | delivered | read | failed
    at: str | None
    recipient_id: str  # the phone number; "" when Meta withholds it
    error: str = ""  # "<code> <title>: <details>" for a failed delivery
    callback_data: str = ""  # biz_opaque_callback_data: the outbox's idempotency key, echoed back
    recipient_user_id: str = ""  # the business-scoped user id

    @property
    def recipients(self) -> list[str]:
        """The conversation ids this status may belong to (a phone number, a BSUID)."""
        return [value for value in (self.recipient_id, self.recipient_user_id) if value]


@dataclass(frozen=True)
class Skipped:
    """An item left out: why, the message type and the conversation (for the log and the metric)."""

    reason: str
    type: str = ""
    session_id: str = ""

    def __str__(self) -> str:
        return self.reason


@dataclass
class Batch:
    messages: list[InboundMessage] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    statuses: list[Status] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def skip(self, reason: str, kind: Any = "", session_id: str = "") -> None:
        self.skipped.append(Skipped(reason, str(kind or ""), session_id))


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
        batch.skip(f"not a whatsapp_business_account body: {str(_as_dict(payload).get('object'))[:80]}")
        return batch
    for entry in _as_list(payload.get("entry")):
        for change in _as_list(_as_dict(entry).get("changes")):
            change = _as_dict(change)
            value = _as_dict(change.get("value"))
            if change.get("field") != "messages":
                batch.skip(f"change field {change.get('field')!r}")
                continue
            number = _as_dict(value.get("metadata")).get("phone_number_id")
            if phone_number_id and number and str(number) != str(phone_number_id):
                logger.info("whatsapp: skipped a change for phone number id %s (ours is %s)", number, phone_number_id)
                batch.skip(f"change for phone number id {number}")
                continue
            _read_value(value, batch)
    return batch


@dataclass(frozen=True)
class _Sender:
    session_id: str
    phone: str  # "" when Meta withholds the number
    user_id: str  # the business-scoped user id, when given
    profile: dict[str, Any]


def _senders(value: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The change's `contacts` (the senders), by phone number and by business-scoped user id."""
    known: dict[str, dict[str, Any]] = {}
    for contact in _as_list(value.get("contacts")):
        contact = _as_dict(contact)
        for key in ("wa_id", "user_id"):
            if contact.get(key):
                known[str(contact[key])] = contact
    return known


def _sender(message: dict[str, Any], known: dict[str, dict[str, Any]]) -> _Sender | None:
    phone = str(message.get("from") or "")
    user_id = str(message.get("from_user_id") or "")
    contact = known.get(phone) or known.get(user_id) or {}
    phone = phone or str(contact.get("wa_id") or "")
    user_id = user_id or str(contact.get("user_id") or "")
    if not phone and not user_id:
        return None
    return _Sender(session_id=phone or user_id, phone=phone, user_id=user_id,
                   profile=_as_dict(contact.get("profile")))


def _read_value(value: dict[str, Any], batch: Batch) -> None:
    metadata = _as_dict(value.get("metadata"))
    known = _senders(value)
    for message in _as_list(value.get("messages")):
        _read_message(_as_dict(message), metadata, known, batch)
    for status in _as_list(value.get("statuses")):
        status = _as_dict(status)
        if not status.get("id") or not status.get("status"):
            batch.skip("a status without id or status", "status")
            continue
        batch.statuses.append(Status(
            message_id=str(status["id"]),
            status=str(status["status"]),
            at=_at(status.get("timestamp")),
            recipient_id=str(status.get("recipient_id") or ""),
            error=error_text(status.get("errors")),
            callback_data=str(status.get("biz_opaque_callback_data") or ""),
            recipient_user_id=str(status.get("recipient_user_id") or ""),
        ))


def _read_message(message: dict[str, Any], metadata: dict[str, Any], known: dict[str, dict[str, Any]],
                  batch: Batch) -> None:
    wamid, kind = message.get("id"), str(message.get("type") or "")
    sender = _sender(message, known)
    if sender is None or not wamid:
        logger.warning("whatsapp: left out a %r message %s without a sender or an id", kind, wamid)
        batch.skip("a message without a sender (from, from_user_id) or an id", kind)
        return
    wamid, session_id = str(wamid), sender.session_id
    at = _at(message.get("timestamp"))
    if kind == "reaction":
        reaction = _as_dict(message.get("reaction"))
        batch.reactions.append(Reaction(session_id=session_id, id=wamid, at=at,
                                        emoji=str(reaction.get("emoji") or ""),
                                        message_id=str(reaction.get("message_id") or "")))
        return
    details = _details(kind, wamid, sender, metadata, message)
    if kind in ("edit", "revoke"):
        change = _as_dict(message.get(kind))
        now_reads = ""
        if kind == "edit":  # the message as it reads now: the same shapes as a new one
            edited = _as_dict(change.get("message"))
            details["type"] = str(edited.get("type") or "")
            now_reads = _text_of(details["type"], edited, details) or ""
        batch.notes.append(Note(session_id=session_id, id=wamid, at=at, kind=kind, text=now_reads,
                                original_id=str(change.get("original_message_id") or ""),
                                context=details if kind == "edit" else {}))
        return
    if kind == "system":
        system = _as_dict(message.get("system"))
        details["system"] = {k: system[k] for k in ("type", "body", "wa_id", "new_wa_id", "user_id", "new_user_id")
                             if k in system}
        batch.notes.append(Note(session_id=session_id, id=wamid, at=at, kind="system",
                                text=str(system.get("body") or system.get("type") or "[system]"), context=details))
        return
    if kind == "request_welcome":
        batch.messages.append(InboundMessage(session_id=session_id, id=wamid, at=at, text="",
                                             context={"whatsapp": details}, event=WELCOME_EVENT))
        return
    if kind in ("unsupported", "unknown"):
        what = str(_as_dict(message.get("unsupported")).get("type") or "")
        details["errors"] = [_as_dict(e) for e in _as_list(message.get("errors"))][:5]
        details["unsupported_type"] = what
        if what in UNSUPPORTED_CHANGES:  # an edit or a deletion Meta could not describe: no turn
            batch.notes.append(Note(session_id=session_id, id=wamid, at=at, kind="unsupported",
                                    text=f"[{what} not described by WhatsApp]", context=details))
            return
    text = _text_of(kind, message, details)
    if text is None:
        logger.warning("whatsapp: left out a %r message %s of conversation %s (not a type this channel reads)",
                       kind, wamid, session_id)
        batch.skip(f"{kind} message {wamid}", kind, session_id)
        return
    batch.messages.append(InboundMessage(session_id=session_id, id=wamid, at=at, text=text,
                                         context={"whatsapp": details}))


def _details(kind: str, wamid: str, sender: _Sender, metadata: dict[str, Any],
             message: dict[str, Any]) -> dict[str, Any]:
    """The `context["whatsapp"]` every message carries: who sent it, from where, replying to what."""
    details: dict[str, Any] = {"type": kind, "message_id": wamid}
    if sender.phone:
        details["wa_id"] = sender.phone
    if sender.user_id:
        details["user_id"] = sender.user_id
    if sender.profile.get("name"):
        details["profile_name"] = sender.profile["name"]
    if sender.profile.get("username"):
        details["username"] = sender.profile["username"]
    if metadata.get("phone_number_id"):
        details["phone_number_id"] = str(metadata["phone_number_id"])
    replied_to = _as_dict(message.get("context")).get("id")
    if replied_to:
        details["replied_to"] = str(replied_to)
    referral = _as_dict(message.get("referral"))
    if referral:  # a click-to-WhatsApp ad or post the customer came from
        details["referral"] = {k: referral[k] for k in ("source_url", "source_id", "source_type", "headline", "body",
                                                       "ctwa_clid") if k in referral}
    return details


def _text_of(kind: Any, message: dict[str, Any], details: dict[str, Any]) -> str | None:
    """The turn's text for one message type (None: not a type this channel reads), filling `details`."""
    if kind == "text":
        return str(_as_dict(message.get("text")).get("body") or "")
    if kind == "interactive":
        return _interactive(_as_dict(message.get("interactive")), details)
    if kind == "button":  # a template's quick-reply button
        button = _as_dict(message.get("button"))
        details["reply_id"] = button.get("payload")
        return str(button.get("text") or "")
    if kind in MEDIA_TYPES:
        media = _as_dict(message.get(kind))
        details["media"] = {k: media[k] for k in ("id", "mime_type", "filename", "caption", "animated", "voice",
                                                 "sha256")
                            if k in media}
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
    if kind == "contacts":
        return _contacts(_as_list(message.get("contacts")), details)
    if kind == "order":
        return _order(_as_dict(message.get("order")), details)
    if kind in ("unsupported", "unknown"):
        what = details.get("unsupported_type") or ""
        first = _as_dict((details.get("errors") or [{}])[0])
        why = what or str(first.get("title") or "")
        return f"[unsupported message: {why}]" if why else "[unsupported message]"
    return None


def _interactive(interactive: dict[str, Any], details: dict[str, Any]) -> str | None:
    kind = interactive.get("type")
    reply = _as_dict(interactive.get(kind)) if isinstance(kind, str) else {}
    if kind in ("button_reply", "list_reply"):
        if not reply:
            return None
        details["reply_id"] = reply.get("id")
        return str(reply.get("title") or "")
    if kind == "nfm_reply":  # the answer to a WhatsApp Flow
        return _flow_reply(reply, details)
    if kind == "call_permission_reply":
        details["call_permission"] = {k: reply[k] for k in ("response", "expiration_timestamp", "response_source")
                                      if k in reply}
        return f"[call permission: {reply.get('response') or 'answered'}]"
    return None


def _flow_reply(reply: dict[str, Any], details: dict[str, Any]) -> str:
    """`response_json` (text holding a JSON object: `flow_token` and the Flow's fields) parsed into
    `context["whatsapp"]["flow"]`; the text lists the answers."""
    raw = reply.get("response_json")
    try:
        response = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        response = None
    flow: dict[str, Any] = {"name": reply.get("name"), "body": reply.get("body")}
    if isinstance(response, dict):
        flow["response"] = response
        if response.get("flow_token") is not None:
            flow["flow_token"] = response["flow_token"]
        answers = [f"{key}: {_plain(value)}" for key, value in response.items() if key != "flow_token"]
    else:  # not an object: kept as sent, so nothing is lost
        flow["response_json"] = raw
        answers = [] if raw in (None, "") else [str(raw)]
    details["flow"] = {k: v for k, v in flow.items() if v is not None}
    head = f"[form {reply['name']}" if reply.get("name") and reply.get("name") != "flow" else "[form"
    return f"{head}: {'; '.join(answers)}]" if answers else f"{head}: {reply.get('body') or 'sent'}]"


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _contacts(cards: list[Any], details: dict[str, Any]) -> str:
    """Each shared card's name and numbers (and e-mail when there is no number) as text; the cards
    themselves in `context["whatsapp"]["contacts"]`."""
    kept: list[dict[str, Any]] = []
    parts: list[str] = []
    for card in cards:
        card = _as_dict(card)
        if not card:
            continue
        kept.append(card)
        name = _as_dict(card.get("name"))
        who = str(name.get("formatted_name") or " ".join(
            str(name[k]) for k in ("first_name", "middle_name", "last_name") if name.get(k)) or "")
        phones = [str(_as_dict(p).get("phone") or _as_dict(p).get("wa_id") or "") for p in _as_list(card.get("phones"))]
        phones = [p for p in phones if p]
        reach = phones or [str(_as_dict(e).get("email")) for e in _as_list(card.get("emails")) if _as_dict(e).get("email")]
        parts.append(", ".join(part for part in [who, *reach] if part) or "?")
    details["contacts"] = kept
    if not parts:
        return "[contact]"
    return f"[contact: {parts[0]}]" if len(parts) == 1 else f"[contacts: {'; '.join(parts)}]"


def _order(order: dict[str, Any], details: dict[str, Any]) -> str:
    """The customer's note, then the items (quantity × product at price) and the total per currency;
    the order in `context["whatsapp"]["order"]`."""
    items = [_as_dict(item) for item in _as_list(order.get("product_items")) if _as_dict(item)]
    details["order"] = {"catalog_id": order.get("catalog_id"), "text": order.get("text"), "product_items": items}
    lines: list[str] = []
    totals: dict[str, Decimal] = {}
    for item in items:
        quantity, price, currency = item.get("quantity"), item.get("item_price"), str(item.get("currency") or "")
        line = f"{quantity} × {item.get('product_retailer_id')}"
        if price is not None:
            line += f" at {price} {currency}".rstrip()
            try:
                totals[currency] = totals.get(currency, Decimal(0)) + Decimal(str(quantity)) * Decimal(str(price))
            except (InvalidOperation, ValueError):
                pass
        lines.append(line)
    summary = "; ".join(lines) or "no items"
    if totals:
        summary += "; total " + ", ".join(f"{amount} {currency}".rstrip() for currency, amount in totals.items())
    note = str(order.get("text") or "").strip()
    return f"{note}\n[order: {summary}]" if note else f"[order: {summary}]"
