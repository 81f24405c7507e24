"""Template messages: the one kind WhatsApp accepts outside the 24-hour window.

    actions={TEMPLATE_ACTION: f.action(**whatsapp.template_action())}
    {"id": "volta", "do": "whatsapp_template", "with": {"name": "retomada", "language": "pt_BR",
                                                        "body": ["{{data.nome}}"]}}

The action puts the template into the outbox under the action's key (`ctx.key`, the same on a
replayed turn), so a replay or a deferred re-run never sends it twice; the sender posts it as
`type: "template"`. It runs inside the host's turn loop (it needs the conversation id); in a
conversation's very first turn it defers itself a few seconds, until the conversation is saved.
"""

from __future__ import annotations

import json
from typing import Any

from falai_django import channels, conf

TEMPLATE_ACTION = "whatsapp_template"
TEMPLATE_KIND = "template"
SAVED_SOON = "5s"  # how long a template of a conversation's very first turn waits for its row


def template_action() -> dict[str, Any]:
    """The keyword arguments of `f.action(...)` for the template action."""
    return {
        "parameters": {
            "name": {"type": "string", "description": "The approved template's name."},
            "language": {"type": "string", "optional": True,
                         "description": 'Its language code, e.g. "pt_BR" (default WHATSAPP["LANGUAGE"]).'},
            "components": {"type": "string", "optional": True,
                           "description": "The Graph API components array, as JSON text (templates rendered)."},
            "body": {"type": "array", "items": {"type": "string"}, "optional": True,
                     "description": "Shorthand for the body's text parameters, in order."},
        },
        "run": run_template,
        "description": "Send a WhatsApp template message (allowed outside the 24-hour window).",
    }


def template_of(params: dict[str, Any]) -> dict[str, Any]:
    """The Graph API `template` object from the action's parameters (ValueError if malformed)."""
    name = params.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("whatsapp_template needs a template name")
    settings = conf.whatsapp_settings() or conf.WHATSAPP_DEFAULTS
    language = params.get("language") or settings.get("LANGUAGE") or "en_US"
    components = params.get("components")
    if isinstance(components, str) and components.strip():
        try:
            components = json.loads(components)
        except ValueError as exc:
            raise ValueError(f"whatsapp_template: components is not JSON ({exc})") from None
    if components and not isinstance(components, list):
        raise ValueError("whatsapp_template: components must be a JSON array")
    components = list(components or [])
    if params.get("body"):
        components.append({"type": "body",
                           "parameters": [{"type": "text", "text": str(text)} for text in params["body"]]})
    template: dict[str, Any] = {"name": name.strip(), "language": {"code": language}}
    if components:
        template["components"] = components
    return template


def run_template(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Queue the template in the conversation's outbox (once per action key)."""
    from django.utils import timezone

    from falai_django.host.jobs import hand_over_sends
    from falai_django.host.outbox import outbox_row
    from falai_django.models import History
    from falai_django.models import Session as SessionRow

    session_id = channels.CURRENT_SESSION.get()
    if not session_id:
        return {"failed": "whatsapp_template runs inside the host's turn loop (no conversation here)"}
    try:
        template = template_of(params)
    except ValueError as exc:
        return {"failed": str(exc)}
    if not SessionRow.objects.filter(pk=session_id).exists():
        # The conversation's first turn (a start or an event for a new number): its row is the
        # outbox's foreign key and is written after the turn. Run again a moment later, under
        # the same action key, once it exists.
        return {"defer": SAVED_SOON, "detail": "waiting for the conversation to be saved"}
    row = outbox_row(
        session_id,
        text=f"[template {template['name']}]",
        emission=f"{ctx.key}@{TEMPLATE_ACTION}",
        now=timezone.now(),
        kind=TEMPLATE_KIND,
        message_key=ctx.key,
        media={"template": template},
        run_id=getattr(ctx.run, "id", None),
    )
    # The unique emission key drops the row a replayed turn writes again.
    History.objects.bulk_create([History(**row)], ignore_conflicts=True)
    hand_over_sends(session_id)
    return {"ok": True, "detail": f"template {template['name']}", "spoke": True}
