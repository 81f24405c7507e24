"""Webhook bodies shaped as in Meta's reference (Cloud API, `whatsapp_business_account`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from falai_django.channels.whatsapp.webhook import signature

PHONE_NUMBER_ID = "106540352242922"
APP_SECRET = "app-s3cret"
WA_ID = "5511999990000"


def ts(at: datetime | str) -> str:
    if isinstance(at, str):
        at = datetime.fromisoformat(at.replace("Z", "+00:00"))
    return str(int(at.timestamp()))


def envelope(messages: list[dict] | None = None, statuses: list[dict] | None = None, *, wa_id: str = WA_ID,
             name: str = "Ana Cliente") -> dict[str, Any]:
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": PHONE_NUMBER_ID},
    }
    if messages is not None:
        value["contacts"] = [{"profile": {"name": name}, "wa_id": wa_id}]
        value["messages"] = messages
    if statuses is not None:
        value["statuses"] = statuses
    return {"object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "changes": [{"value": value, "field": "messages"}]}]}


def message(kind: str, wamid: str, at: str, payload: dict | None = None, *, wa_id: str = WA_ID,
            **extra: Any) -> dict[str, Any]:
    out = {"from": wa_id, "id": wamid, "timestamp": ts(at), "type": kind}
    if payload is not None:
        out[kind] = payload
    out.update(extra)
    return out


def text(body: str, wamid: str, at: str, **kw: Any) -> dict[str, Any]:
    return message("text", wamid, at, {"body": body}, **kw)


def status(wamid: str, state: str, at: str, *, wa_id: str = WA_ID, errors: list | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": wamid, "status": state, "timestamp": ts(at), "recipient_id": wa_id}
    if state in ("sent", "delivered"):
        out["conversation"] = {"id": "CONVERSATION_ID", "origin": {"type": "service"}}
        out["pricing"] = {"billable": True, "pricing_model": "CBP", "category": "service"}
    if errors:
        out["errors"] = errors
    return out


def signed(body: dict[str, Any] | bytes, secret: str = APP_SECRET) -> tuple[bytes, dict[str, str]]:
    raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    return raw, {"X-Hub-Signature-256": signature(secret, raw)}


def deliver(client: Any, body: dict[str, Any] | bytes, *, secret: str = APP_SECRET, headers: dict | None = None):
    raw, signed_headers = signed(body, secret)
    return client.post("/falai/whatsapp/webhook", data=raw, content_type="application/json",
                       headers=signed_headers if headers is None else headers)
