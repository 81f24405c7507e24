"""The sender: one outbox row → one Graph API `POST {GRAPH_URL}/{PHONE_NUMBER_ID}/messages`.

The conversation id is the address: a phone number goes in `to`, a business-scoped user id
(`BR.1502576394655843`) in `recipient`, as the Cloud API documents for username customers.

`FALAI["SENDER"] = "falai_django.channels.whatsapp.send"`. It runs on the host's sending path
(after commit, one conversation at a time, in order), never in the webhook request. The
idempotency key travels as `biz_opaque_callback_data` (Meta echoes it on every status of the
message, so the channel's logs carry it) and as an `Idempotency-Key` header. Meta's error
codes decide what happens: rate limits retry with backoff (`RetryLater`), permanent refusals
mark the row failed at once (`PermanentSendError`, with the code and title), anything else
(network, 5xx, an expired token) is retried with the host's backoff.
"""

from __future__ import annotations

import logging
from typing import Any

from falai_django import conf
from falai_django.channels.whatsapp.http import client, error_text, graph_error_code
from falai_django.channels.whatsapp.media_out import CAPTIONED, MEDIA_FIELDS, UNCAPTIONED
from falai_django.channels.whatsapp.parse import is_bsuid
from falai_django.host import statuses
from falai_django.sending import OutboundSend, PermanentSendError, RetryLater, SendError

# Throughput and rate limits: retried with backoff.
RATE_LIMIT_CODES = frozenset({4, 80007, 130429, 131056})
# Refusals no retry fixes: the row is marked failed at once.
PERMANENT_CODES = frozenset({
    100,  # invalid parameter
    131008,  # required parameter missing
    131009,  # parameter value invalid
    131021,  # recipient is the sender
    131026,  # message undeliverable
    131047,  # more than 24 hours since the customer's last message
    131051,  # unsupported message type
    131052,  # media download error
    131053,  # media upload error
    132000, 132001, 132005, 132007, 132012, 132015, 132016,  # template problems
    133010,  # phone number not registered
})

# On a row whose media went out before its text (audio, sticker): that first part's wamid.
SENT_PART = "sent_media_wamid"

logger = logging.getLogger("falai_django.whatsapp")


def message_body(message: OutboundSend) -> dict[str, Any]:
    """The Graph API body for one outbox row: a template (kind "template"), the media a `say` step
    names (`media: {"slug": ...}`, mapped by `FALAI["WHATSAPP"]["MEDIA"]`, the text as its caption
    where the type takes one), or a text."""
    media = message.media or {}
    template = media.get("template") if message.kind == "template" else None
    if template:
        return _body(message, "template", template)
    if media.get("slug"):
        kind, media_object = mapped_media(str(media["slug"]))
        if kind in CAPTIONED and message.text:
            media_object["caption"] = message.text
        return _body(message, kind, media_object)
    return text_body(message)


def text_body(message: OutboundSend) -> dict[str, Any]:
    return _body(message, "text", {"body": message.text, "preview_url": False})


def _body(message: OutboundSend, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"messaging_product": "whatsapp", "recipient_type": "individual"}
    # A customer known only by a business-scoped user id (a username; Meta withholds the number)
    # is addressed by `recipient`; a phone number goes in `to`.
    body["recipient" if is_bsuid(message.session_id) else "to"] = message.session_id
    # Every part of one row carries its idempotency key: Meta echoes it on each status, which
    # finds the row even for a part whose wamid is not the one stored.
    body["biz_opaque_callback_data"] = message.idempotency_key
    body["type"] = kind
    body[kind] = payload
    return body


def mapped_media(slug: str) -> tuple[str, dict[str, Any]]:
    """(type, the Cloud API media object) of a slug in `FALAI["WHATSAPP"]["MEDIA"]`. A slug it
    lacks (a stored flow saved since the system check ran) fails the row for good, named."""
    settings = conf.whatsapp_settings() or {}
    entry = (settings.get("MEDIA") or {}).get(slug)
    if not isinstance(entry, dict) or entry.get("type") not in MEDIA_FIELDS:
        raise PermanentSendError(f'the media "{slug}" is not in FALAI["WHATSAPP"]["MEDIA"] (or has no valid type)')
    kind = str(entry["type"])
    return kind, {key: entry[key] for key in MEDIA_FIELDS[kind] if entry.get(key)}


def send(message: OutboundSend) -> str:
    """Send one message; returns its wamid (stored on the row as the channel message id).

    Audio and stickers take no caption: the row's text follows as a text message of its own.
    The first part's wamid is written on the row before the text goes, so a retry after the
    text failed sends the text alone, not the voice note again."""
    settings = conf.whatsapp_settings()
    if settings is None:
        raise SendError('FALAI["WHATSAPP"] is not configured')
    body = message_body(message)
    media = message.media or {}
    if body["type"] in UNCAPTIONED and message.text.strip():
        if not media.get(SENT_PART):
            _remember_part(message, _post(settings, message, body))
        wamid = _post(settings, message, text_body(message), part=":text")
    else:
        wamid = _post(settings, message, body)
    _statuses_that_came_first(wamid, message)
    return wamid


def _post(settings: dict[str, Any], message: OutboundSend, body: dict[str, Any], part: str = "") -> str:
    url = f"{str(settings['GRAPH_URL']).rstrip('/')}/{settings['PHONE_NUMBER_ID']}/messages"
    headers = {"Authorization": f"Bearer {settings['ACCESS_TOKEN']}",
               "Idempotency-Key": message.idempotency_key + part}
    response = client().post(url, json=body, headers=headers, timeout=float(settings.get("TIMEOUT_S") or 10.0))
    try:
        data = response.json()
    except ValueError:
        data = {}
    if response.is_success:
        messages = data.get("messages") if isinstance(data, dict) else None
        if not messages or not isinstance(messages[0], dict) or not messages[0].get("id"):
            raise SendError(f"the Graph API answered {response.status_code} without messages[0].id")
        return str(messages[0]["id"])
    raise graph_error(response.status_code, data, response.headers.get("Retry-After"))


def _remember_part(message: OutboundSend, wamid: str) -> None:
    from falai_django.models import History

    History.objects.filter(pk=message.item_id).update(media={**(message.media or {}), SENT_PART: wamid})


send.channel = "whatsapp"  # type: ignore[attr-defined]  # the `channel` label of its sends


def _statuses_that_came_first(wamid: str, message: OutboundSend) -> None:
    """Meta may report `sent`/`delivered` before this worker stores the wamid: those statuses were
    kept (`host.statuses`); apply them now. A failure here never fails the send (it went out):
    the dispatcher's sweep applies them instead."""
    try:
        statuses.apply_early_for(wamid, session_id=message.session_id, idempotency_key=message.idempotency_key,
                                 channel="whatsapp")
    except Exception:  # noqa: BLE001 - logged; the sweep applies the kept statuses later
        logger.warning("whatsapp: could not apply the statuses kept for %s of conversation %s; the dispatcher's "
                       "sweep applies them", wamid, message.session_id, exc_info=True)


def graph_error(status: int, data: Any, retry_after: str | None = None) -> SendError:
    """The exception a Graph API error answer becomes."""
    text = error_text(status, data)
    code = graph_error_code(data)
    if status == 429 or code in RATE_LIMIT_CODES:
        try:
            wait = float(retry_after) if retry_after else None
        except ValueError:
            wait = None
        return RetryLater(text, retry_after_s=wait)
    if code in PERMANENT_CODES or (code is None and status in (400, 404)):
        return PermanentSendError(text)
    return SendError(text)  # 5xx, an expired token, a transient Graph error: the host's backoff
