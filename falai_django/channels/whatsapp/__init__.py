"""The WhatsApp Cloud API channel, built in.

    FALAI = {
        "AGENT": "...",
        "SENDER": "falai_django.channels.whatsapp.send",
        "WHATSAPP": {"PHONE_NUMBER_ID": "...", "ACCESS_TOKEN": "...", "APP_SECRET": "...",
                     "VERIFY_TOKEN": "...", "WINDOW": "skip"},
    }

- `webhook.py`: `GET`/`POST falai/whatsapp/webhook` (handshake, signature, store, 200 at once);
- `parse.py`: a webhook body → inputs, reactions, statuses; `receive.py` stores them;
- `sender.py`: `send`, the sender (`FALAI["SENDER"]`) over the Graph API;
- `window.py`: the 24-hour window as `silenced`; `templates.py`: the `whatsapp_template` action;
- `checks.py`: the system checks of `FALAI["WHATSAPP"]`.

Nothing here imports the models at load time, so an agents module can use `template_action()`.
"""

from __future__ import annotations

from typing import Any

from falai_django.channels.whatsapp.templates import TEMPLATE_ACTION, template_action
from falai_django.channels.whatsapp.window import REASON as WINDOW_REASON

__all__ = ["TEMPLATE_ACTION", "WINDOW_REASON", "send", "template_action"]


def send(message: Any) -> str:
    """The sender (`FALAI["SENDER"]`): see `sender.send`. Imported on first use (it needs the models)."""
    from falai_django.channels.whatsapp.sender import send as send_one

    return send_one(message)


send.channel = "whatsapp"  # type: ignore[attr-defined]  # the `channel` label of its sends (falai_sends_total)
