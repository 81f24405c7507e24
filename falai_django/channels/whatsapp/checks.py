"""System checks of `FALAI["WHATSAPP"]` (ids `falai_django.E050`…, `falai_django.W050`…)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from falai_django.conf import WHATSAPP_DEFAULTS

REQUIRED = ("PHONE_NUMBER_ID", "ACCESS_TOKEN", "APP_SECRET", "VERIFY_TOKEN")
WINDOW_MODES = ("skip", "stop", None)
OUR_SENDER = "falai_django.channels.whatsapp.send"


def _key(name: str) -> str:
    return f'FALAI["WHATSAPP"]["{name}"]'


@register(Tags.compatibility)
def check_whatsapp(app_configs: Any = None, **kwargs: Any) -> list:
    configured = (getattr(settings, "FALAI", None) or {}) if isinstance(getattr(settings, "FALAI", None), dict) else {}
    whatsapp = configured.get("WHATSAPP")
    if whatsapp is None:
        return []
    if not isinstance(whatsapp, dict):
        return [Error('FALAI["WHATSAPP"] must be a dict of the channel\'s settings.',
                      hint='Write FALAI["WHATSAPP"] = {"PHONE_NUMBER_ID": ..., "ACCESS_TOKEN": ..., '
                           '"APP_SECRET": ..., "VERIFY_TOKEN": ...}, or remove it.',
                      id="falai_django.E050")]
    problems: list = []
    hints = {
        "PHONE_NUMBER_ID": "the Phone number ID on the WhatsApp > API Setup page of your Meta app",
        "ACCESS_TOKEN": "a system user's permanent token with whatsapp_business_messaging",
        "APP_SECRET": "App settings > Basic > App secret (it signs the webhook bodies)",
        "VERIFY_TOKEN": "any secret text; type the same in the webhook's Verify token field",
    }
    for name in REQUIRED:
        value = whatsapp.get(name)
        if not isinstance(value, str) or not value.strip():
            problems.append(Error(f"{_key(name)} is {'missing' if value is None else 'empty or not text'}.",
                                  hint=f"Set it to {hints[name]}.", id="falai_django.E051"))
    graph = whatsapp.get("GRAPH_URL", WHATSAPP_DEFAULTS["GRAPH_URL"])
    if not isinstance(graph, str) or not graph.startswith(("https://", "http://")):
        problems.append(Error(f"{_key('GRAPH_URL')} = {graph!r} is not an http(s) URL.",
                              hint=f"Remove it to use {WHATSAPP_DEFAULTS['GRAPH_URL']!r}.", id="falai_django.E052"))
    window = whatsapp.get("WINDOW", WHATSAPP_DEFAULTS["WINDOW"])
    if window not in WINDOW_MODES:
        problems.append(Error(f"{_key('WINDOW')} = {window!r} is not \"skip\", \"stop\" or None.",
                              hint='"skip" (the default) skips talk and say steps outside the 24-hour window '
                                   'and runs do steps; "stop" passes the plain reason; None turns the rule off.',
                              id="falai_django.E053"))
    timeout = whatsapp.get("TIMEOUT_S", WHATSAPP_DEFAULTS["TIMEOUT_S"])
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(Error(f"{_key('TIMEOUT_S')} = {timeout!r} must be a positive number of seconds.",
                              hint="Remove it to use the default (10).", id="falai_django.E054"))
    unknown = sorted(set(whatsapp) - set(WHATSAPP_DEFAULTS))
    if unknown:
        problems.append(Warning(f'FALAI["WHATSAPP"] has unknown keys: {", ".join(map(str, unknown))}.',
                                hint=f"Known keys: {', '.join(sorted(WHATSAPP_DEFAULTS))}.", id="falai_django.W050"))
    if configured.get("SENDER") != OUR_SENDER:
        problems.append(Warning('FALAI["WHATSAPP"] is set but FALAI["SENDER"] is not the WhatsApp sender: replies '
                                "will not reach WhatsApp.",
                                hint=f'Set FALAI["SENDER"] = "{OUR_SENDER}" (or keep your own on purpose).',
                                id="falai_django.W051"))
    return problems
