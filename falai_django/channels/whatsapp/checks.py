"""System checks of `FALAI["WHATSAPP"]` (ids `falai_django.E050`…, `falai_django.W050`…)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from falai_django.channels.whatsapp.media_out import MEDIA_FIELDS, unmapped_media
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
    problems.extend(_media_problems(whatsapp.get("MEDIA", {})))
    if configured.get("SENDER") != OUR_SENDER:
        problems.append(Warning('FALAI["WHATSAPP"] is set but FALAI["SENDER"] is not the WhatsApp sender: replies '
                                "will not reach WhatsApp.",
                                hint=f'Set FALAI["SENDER"] = "{OUR_SENDER}" (or keep your own on purpose).',
                                id="falai_django.W051"))
    return problems


def _media_problems(mapping: Any) -> list:
    """`FALAI["WHATSAPP"]["MEDIA"]` (slug -> media object) well formed, and every `say` step of the
    code agent's flows naming a slug it maps (E055, E056)."""
    if not isinstance(mapping, dict):
        return [Error(f"{_key('MEDIA')} must be a dict of slug -> Cloud API media object.",
                      hint='e.g. {"tabela": {"type": "document", "link": "https://.../tabela.pdf", '
                           '"filename": "tabela.pdf"}}', id="falai_django.E055")]
    problems: list = []
    for slug, entry in mapping.items():
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind not in MEDIA_FIELDS:
            problems.append(Error(f"{_key('MEDIA')}[{slug!r}] has type {kind!r}, not one of "
                                  f"{', '.join(MEDIA_FIELDS)}.", hint='Write {"type": "document", "link": ...}.',
                                  id="falai_django.E055"))
        elif bool(entry.get("id")) == bool(entry.get("link")):
            problems.append(Error(f"{_key('MEDIA')}[{slug!r}] needs exactly one of \"id\" (an uploaded media id) "
                                  'and "link" (an https URL Meta can fetch).',
                                  hint="Upload with POST /{phone-number-id}/media for an id, or host the file.",
                                  id="falai_django.E055"))
    for flow_id, step_id, slug in unmapped_media(_code_flows(), mapping):
        problems.append(Error(f'Flow "{flow_id}", step "{step_id}": the media slug "{slug}" is not in '
                              f"{_key('MEDIA')}: the message could not be sent.",
                              hint=f'Add {{"{slug}": {{"type": "document", "link": "https://...", '
                                   f'"filename": "..."}}}} to {_key("MEDIA")}, or fix the slug.',
                              id="falai_django.E056"))
    return problems


def _code_flows() -> list:
    """The code agent's flows (none when it does not build: the agent's own check says why)."""
    from falai_django import conf

    try:
        return list(getattr(conf.get_code_agent(), "flows", ()))
    except Exception:  # noqa: BLE001 - reported by check_falai_settings
        return []
