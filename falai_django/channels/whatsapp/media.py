"""Media in: voice notes transcribed and images described, on the worker that runs the turn.

The webhook stores a media message with today's marker (`[audio]`, or the caption) and the
media id in `context["whatsapp"]["media"]`; it never downloads anything (Meta wants its 200 at
once). Before the turn reads the input, the host asks the channel to `understand` it:

1. the media is looked up: `GET {GRAPH_URL}/{media_id}` with the Bearer token answers `url`,
   `mime_type` and `file_size`; a `file_size` over `FALAI["MEDIA"]["MAX_BYTES"]` stops here;
2. `url` is downloaded with the Bearer token, cut off past `MAX_BYTES` (a server may not say
   the size) and past `TIMEOUT` seconds;
3. audio (voice notes among it) goes to the media provider's `transcribe`, and the
   transcription is the text the turn reads; an image, with `DESCRIBE_IMAGES`, goes to
   `describe_image`, and the description follows the caption.

Only what something reads is fetched: a video, a document or a sticker keeps its marker (the
media id stays in the context; Meta keeps received media for 30 days). The outcome is written
on the stored input once (`media["outcome"]`: transcribed, described or failed), so a turn that
is retried later does not download and pay again. Nothing is lost: whatever fails (after the
provider's own retries) or is over a limit leaves the marker and the caption, the turn runs
anyway, and one log line names the conversation, the media id and why.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from falai_django import conf
from falai_django.channels.whatsapp.http import client, error_text
from falai_django.llm.calling import call_media
from falai_django.observe import context as observe
from falai_django.observe import metrics

logger = logging.getLogger("falai_django.whatsapp")

CHANNEL = "whatsapp"
# The keys `media["outcome"]` takes once the channel has looked at a media message.
TRANSCRIBED, DESCRIBED, FAILED = "transcribed", "described", "failed"
# Graph answers worth one more try (a network error is too): overloaded, throttled.
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class MediaError(Exception):
    """Why a media message could not be read (the log line and `media["error"]` say this)."""


@dataclass(frozen=True)
class Fetched:
    data: bytes
    mime_type: str


def needs_work(media: Any, kind: str) -> bool:
    """Whether a stored input's media still waits for the channel (not looked at yet)."""
    return isinstance(media, dict) and bool(media.get("id")) and "outcome" not in media and kind in ("audio", "image")


def understand(stored: dict[str, Any], session_id: str, agent: Any = None) -> bool:
    """Transcribe or describe the media of one stored input (`TurnRecord.input`), in place.
    Returns True when `stored` changed (the caller saves it). Never raises for the media's sake."""
    whatsapp = stored["context"]["whatsapp"]
    media = dict(whatsapp["media"])
    kind = str(whatsapp.get("type") or "")
    settings = conf.media_settings()
    method = "transcribe" if kind == "audio" else "describe_image"
    if kind == "image" and not settings["DESCRIBE_IMAGES"]:
        return False  # the caption (or the marker) is what the turn reads
    try:
        provider = conf.get_media_provider(agent)
    except Exception as exc:  # noqa: BLE001 - a PROVIDER that does not import: manage.py check says E171
        logger.warning("whatsapp: conversation %s: media %s stays %s: FALAI[\"MEDIA\"][\"PROVIDER\"] failed: %s",
                       session_id, media.get("id"), stored["turn"].get("message"), _why(exc))
        return False
    if provider is None or not callable(getattr(provider, method, None)):
        logger.info("whatsapp: conversation %s: media %s stays %s: the media provider (%s) has no %s()",
                    session_id, media.get("id"), stored["turn"].get("message"), type(provider).__name__, method)
        return False
    try:
        started = time.perf_counter()
        try:
            fetched = fetch(str(media["id"]), settings)
        finally:
            observe.waited(time.perf_counter() - started)
        media.update(mime_type=fetched.mime_type, file_size=len(fetched.data))
        text = str(call_media(provider, method, fetched.data, fetched.mime_type) or "").strip()
        if not text:
            raise MediaError(f"{method}() answered no text")
    except Exception as exc:  # noqa: BLE001 - nothing is lost: the marker stays, the turn runs
        why = _why(exc)
        logger.warning("whatsapp: conversation %s: media %s (%s) could not be %s: %s; the turn reads %r",
                       session_id, media.get("id"), kind, "transcribed" if kind == "audio" else "described", why,
                       stored["turn"].get("message"))
        media.update(outcome=FAILED, error=why[:500])
        metrics.media_understood(CHANNEL, kind, FAILED)
    else:
        if kind == "audio":
            media.update(outcome=TRANSCRIBED, transcription=text)
            stored["turn"]["message"] = text
        else:
            caption = str(stored["turn"].get("message") or "")
            media.update(outcome=DESCRIBED, description=text)
            described = f"[image: {text}]"
            stored["turn"]["message"] = f"{caption}\n{described}" if media.get("caption") else described
        metrics.media_understood(CHANNEL, kind, str(media["outcome"]))
    stored["context"] = {**stored["context"], "whatsapp": {**whatsapp, "media": media}}
    return True


def _why(exc: BaseException) -> str:
    if isinstance(exc, MediaError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def fetch(media_id: str, settings: dict[str, Any] | None = None) -> Fetched:
    """The media's bytes and type, through the Graph API's lookup and download, within the limits."""
    settings = settings or conf.media_settings()
    whatsapp = conf.whatsapp_settings()
    if whatsapp is None:
        raise MediaError('FALAI["WHATSAPP"] is not configured')
    limit = int(settings["MAX_BYTES"])
    timeout = float(settings["TIMEOUT"])
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {whatsapp['ACCESS_TOKEN']}"}
    lookup = _get(f"{str(whatsapp['GRAPH_URL']).rstrip('/')}/{media_id}", headers, timeout)
    try:
        info = lookup.json()
    except ValueError:
        info = None
    if not lookup.is_success or not isinstance(info, dict) or not info.get("url"):
        why = error_text(lookup.status_code, info) if not lookup.is_success else "no media url"
        raise MediaError(f"the media lookup answered {lookup.status_code}: {why}")
    size = _int(info.get("file_size"))
    if size is not None and size > limit:
        raise MediaError(f"the media is {size} bytes, over MAX_BYTES ({limit})")
    mime_type = str(info.get("mime_type") or "application/octet-stream")
    return Fetched(_download(str(info["url"]), headers, limit, deadline), mime_type)


def _get(url: str, headers: dict[str, str], timeout: float) -> httpx.Response:
    """One GET, tried twice when the network or an overloaded server failed it."""
    for attempt in (1, 2):
        try:
            response = client().get(url, headers=headers, timeout=timeout)
        except httpx.TransportError:
            if attempt == 2:
                raise
        else:
            if response.status_code not in _RETRY_STATUS or attempt == 2:
                return response
        time.sleep(0.5)
    raise AssertionError("unreachable")  # pragma: no cover


def _download(url: str, headers: dict[str, str], limit: int, deadline: float) -> bytes:
    remaining = max(0.1, deadline - time.monotonic())
    with client().stream("GET", url, headers=headers, timeout=remaining) as response:
        if not response.is_success:
            raise MediaError(f"the media download answered {response.status_code}")
        declared = _int(response.headers.get("Content-Length"))
        if declared is not None and declared > limit:
            raise MediaError(f"the media is {declared} bytes, over MAX_BYTES ({limit})")
        data = bytearray()
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) > limit:
                raise MediaError(f"the media download passed MAX_BYTES ({limit})")
            if time.monotonic() > deadline:
                raise MediaError("the media download took longer than TIMEOUT")
    if not data:
        raise MediaError("the media download was empty")
    return bytes(data)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None

