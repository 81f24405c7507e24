"""Media out: what `FALAI["WHATSAPP"]["MEDIA"]` may map a `say` step's `media: {"slug": ...}` to.

A leaf (no settings, no models): the sender, the system check and the stored flows' check read it.
"""

from __future__ import annotations

from typing import Any

# What each Cloud API media type may carry; a `say` step's text is its caption where it takes one.
MEDIA_FIELDS: dict[str, tuple[str, ...]] = {
    "image": ("id", "link", "caption"),
    "video": ("id", "link", "caption"),
    "document": ("id", "link", "caption", "filename"),
    "audio": ("id", "link"),
    "sticker": ("id", "link"),
}
CAPTIONED = frozenset({"image", "video", "document"})
UNCAPTIONED = frozenset({"audio", "sticker"})


def unmapped_media(flows: Any, mapping: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(flow id, step id, slug) of each `say` step whose `media` slug `mapping` lacks. A flow is an
    engine `Flow` (the code agent's) or a flow dict (a stored spec, as `from_spec` gives it)."""
    found = []
    for flow in flows:
        for step in _get(flow, "steps") or ():
            media = _get(step, "media")
            slug = media.get("slug") if isinstance(media, dict) else None
            if _get(step, "say") is not None and slug and slug not in mapping:
                found.append((str(_get(flow, "id")), str(_get(step, "id")), str(slug)))
    return found


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)
