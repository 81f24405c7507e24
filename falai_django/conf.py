"""The one reader of the `FALAI` setting, with its defaults.

```python
FALAI = {
    "AGENT": "project.agents.ana",          # dotted path to an Agent (or a callable returning one)
    "SENDER": "falai_django.sending.log_sender",  # callable(OutboundSend) -> str | None
    "CONTEXT": None,                        # callable(session_id, input) -> context, or None
    "STORE": "falai_django.stores.django.DjangoStore",  # the host's store (a DjangoStore)
    "WEBHOOK_SECRET": "",                   # shared secret for HMAC-signed webhooks ("" = off)
}
```

Everything reads settings through `falai_settings()` at call time, never at import time, so
`import falai_django` needs no Django settings. The merged dict is built once and rebuilt when
Django's `setting_changed` signal says `FALAI` changed (tests' `settings` fixture, override_settings).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from falai_django.stores.django import DjangoStore

DEFAULTS: dict[str, Any] = {
    "AGENT": None,
    "SENDER": "falai_django.sending.log_sender",
    "CONTEXT": None,
    "WEBHOOK_SECRET": "",
    # The host's session store: a dotted path to a `DjangoStore` subclass (or a zero-argument
    # callable returning one). It must keep sessions in the app's tables: the host saves the session
    # in the same transaction as its transcript, outbox, wakes and run log.
    "STORE": "falai_django.stores.django.DjangoStore",
    # Signed webhooks older or newer than this many seconds are refused (replay window).
    "WEBHOOK_TOLERANCE_S": 300,
    # How deeply the JSON a request carries may nest (API bodies, event payloads, start inputs,
    # flow specs, WhatsApp bodies); deeper is a 400 naming the limit (falai_django/jsondepth.py).
    "MAX_JSON_DEPTH": 32,
    # Transcript items passed to the turn as `history` (the most recent N).
    "HISTORY_LIMIT": 200,
    # Keep on each run-log row what replaying the turn needs (the model's replies, the clock,
    # `silenced`, `context`, what actions and tools answered): `falai_django.replay`.
    "RECORD_MODEL_REPLIES": True,
    # Conflicts replayed in-line before the input is parked for a later retry.
    "MAX_REPLAYS": 20,
    # A ProviderError parks the input; it is retried with exponential backoff up to this many times.
    "TURN_RETRY_MAX": 8,
    "TURN_RETRY_BASE_S": 2.0,
    "TURN_RETRY_CAP_S": 900.0,
    # Failed sends are retried with backoff up to this many attempts, then marked failed.
    "SEND_RETRY_MAX": 8,
    "SEND_RETRY_BASE_S": 1.0,
    "SEND_RETRY_CAP_S": 600.0,
    # One worker sends a conversation's messages at a time: "auto" = a PostgreSQL advisory lock
    # (a lease column elsewhere); "lease" = always the lease column (e.g. behind a transaction-pooling
    # PgBouncer, where session advisory locks do not hold). A dead worker's lease lapses after SEND_LEASE_S.
    "SEND_LOCK": "auto",
    "SEND_LEASE_S": 60.0,
    # One conversation's inputs run in the order they were received (host/ordering.py): one worker
    # at a time drains them under the conversation's turn lock (an advisory lock on PostgreSQL, the
    # `falai_turn_lock` lease elsewhere or with SEND_LOCK = "lease"). An input run in-line is claimed
    # for TURN_LEASE_S (a dead caller's claim, or lease, lapses after that); an input waits behind
    # an earlier one at most TURN_WAIT_S, logged, before it is parked (in-line) or handed back.
    "TURN_LEASE_S": 300.0,
    "TURN_WAIT_S": 30.0,
    # Wake dispatcher: poll interval, claim batch, wakes per django-q2 task (keep chunk × the slowest
    # turn under Q_CLUSTER["timeout"]), claim lease.
    "DISPATCH_POLL_S": 0.1,
    "DISPATCH_BATCH": 1000,
    "DISPATCH_CHUNK": 50,
    "DISPATCH_LEASE_S": 60.0,
    # The dispatcher also re-enqueues sends whose hand-off was lost (crash between commit and enqueue).
    "SEND_SWEEP_AFTER_S": 10.0,
    # How a turn's sends reach the sender after commit: "notify" = a PostgreSQL NOTIFY sent by the
    # turn's own statement wakes the dispatcher, which sends from its thread pool (no broker row per
    # turn); "queue" = a django-q2 task per turn; "auto" = notify on PostgreSQL, queue elsewhere.
    # Either way the outbox rows are durable first, and the dispatcher's sweep finds any left behind.
    "SEND_HANDOFF": "auto",
    # Threads the dispatcher sends with in "notify" mode (senders mostly wait on the network).
    "SEND_THREADS": 4,
    "SEND_BATCH": 50,
    # django-q2 cluster name for falai's tasks (None: the default cluster).
    "Q_CLUSTER": None,
    # The admin's handoff (docs/admin.md): keep extracting fields by default on a take-over, and
    # the outbound event recorded when a human replies (None: the agent's first outbound event).
    "HANDOFF_UNDERSTAND": False,
    "HUMAN_REPLY_EVENT": None,
    # The built-in WhatsApp Cloud API channel (README "Going live on WhatsApp"); None = off.
    "WHATSAPP": None,
    # Media a customer sends (README "Going live on WhatsApp"): voice notes are transcribed and,
    # with DESCRIBE_IMAGES, images described, on the worker that runs the turn. PROVIDER: a
    # dotted path to an object with `transcribe` / `describe_image` (or a factory returning one);
    # None = the running agent's own provider. Media over MAX_BYTES is not downloaded; TIMEOUT
    # (seconds) bounds each lookup and download.
    "MEDIA": {"PROVIDER": None, "DESCRIBE_IMAGES": False, "MAX_BYTES": 16 * 1024 * 1024, "TIMEOUT": 30},

    # Operating it (README "Operating it"): `GET <app>/metrics` also answers `Authorization:
    # Bearer <METRICS_TOKEN>` ("" = only the API's own authentication). Each process adds its
    # counts to the database every METRICS_FLUSH_S seconds (a scrape sees them within that).
    "METRICS_TOKEN": "",
    "METRICS_FLUSH_S": 2.0,
    # Traces (OpenTelemetry, when an SDK is installed): put the conversation id on the spans.
    # Off by default: a trace backend is often readable by more people than the admin.
    "TRACE_CONVERSATION_IDS": False,
    # Money on the admin's Operations page: per million tokens, by model, e.g.
    # {"gemini-2.5-flash": {"input": 0.30, "cached_input": 0.03, "output": 2.50}}; None = tokens only.
    "MODEL_PRICES": None,

    # Flows as data (issue 16): run the enabled `Flow` rows beside the code agent's flows, and
    # look for a new version at most once every FLOWS_RELOAD_S seconds per process.
    "FLOWS_DB": True,
    "FLOWS_RELOAD_S": 2.0,

    # How long `manage.py falai_purge` keeps each kind of row (README "Erasure and retention"): a
    # duration written like the engine's ("30d", "12h") or None to keep forever. `run_log`:
    # finished inputs (`TurnRecord`, and with them the flow funnel and replays' material);
    # `transcript`: transcript lines (never a message still to send); `wakes`: fired wakes;
    # `desk`: the desk's notes and markers. A project may set only some keys.
    "RETENTION": {"run_log": "90d", "transcript": None, "wakes": "30d", "desk": None},
}


_merged: dict[str, Any] | None = None


def falai_settings() -> dict[str, Any]:
    """The merged `FALAI` setting: the project's values over `DEFAULTS` (built once)."""
    global _merged
    if _merged is None:
        from django.conf import settings

        merged = dict(DEFAULTS)
        merged.update(getattr(settings, "FALAI", None) or {})
        _merged = merged
    return _merged


def reload(**kwargs: Any) -> None:
    """Forget the merged settings (connected to `setting_changed` in `apps.py`)."""
    global _merged, _store, _media_provider
    if kwargs.get("setting", "FALAI") == "FALAI":
        _merged = None
        _store = None
        _media_provider = None


def get(name: str) -> Any:
    return falai_settings()[name]


@lru_cache(maxsize=32)
def _import(path: str) -> Any:
    from django.utils.module_loading import import_string

    return import_string(path)


def resolve(value: Any) -> Any:
    """A dotted path becomes the object it names; anything else is returned as is."""
    if isinstance(value, str):
        return _import(value)
    return value


def get_agent() -> Any:
    """The running agent: the code agent (`get_code_agent`) plus the enabled database flows
    (`flows.running.running_agent`; off with `FLOWS_DB = False`)."""
    agent = get_code_agent()
    if not get("FLOWS_DB"):
        return agent
    from falai_django.flows.running import running_agent

    return running_agent(agent, reload_s=float(get("FLOWS_RELOAD_S")))


def get_code_agent() -> Any:
    """The configured agent. `AGENT` may name an Agent or a zero-argument callable returning one."""
    value = get("AGENT")
    if value is None:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured('FALAI["AGENT"] is not set: point it at your agent, e.g. "project.agents.ana".')
    return resolve_agent(value)


def resolve_agent(value: Any) -> Any:
    """An agent from what `FALAI["AGENT"]` takes: an Agent, a dotted path to one, or a
    zero-argument callable (or a path to one) returning one."""
    agent = resolve(value)
    if not hasattr(agent, "turn") and callable(agent):
        agent = agent()
    return agent


_store: Any = None


def get_store() -> DjangoStore:
    """The host's store (`FALAI["STORE"]`), built once and rebuilt when `FALAI` changes. Every
    load and save of a conversation outside a running turn goes through it."""
    global _store
    if _store is None:
        _store = build_store(get("STORE"))
    return _store


def build_store(path: Any) -> Any:
    """The store `path` names: a class or a zero-argument factory is called, an instance is used as is."""
    value = resolve(path)
    return value() if callable(value) else value


def get_sender() -> Callable[..., Any]:
    return resolve(get("SENDER"))


def get_context_builder() -> Callable[..., Any] | None:
    value = get("CONTEXT")
    return resolve(value) if value else None


def clear_cache() -> None:
    """Forget imported dotted paths and the merged settings (tests that swap modules call this)."""
    _import.cache_clear()
    reload()


def agent_now(agent: Any = None) -> Any:
    """The agent's clock (a `fake_clock` in tests), else the wall clock, as an aware datetime."""
    try:
        agent = agent or get_agent()
        return agent.now()
    except Exception:  # noqa: BLE001 - no agent configured, or one without a clock
        from django.utils import timezone

        return timezone.now()


def media_settings() -> dict[str, Any]:
    """`FALAI["MEDIA"]` over its defaults (a project may set only some of the keys)."""
    configured = get("MEDIA")
    return {**DEFAULTS["MEDIA"], **(configured if isinstance(configured, dict) else {})}


_media_provider: tuple[Any, Any] | None = None  # (the setting's value, the object it gave)


def retention() -> dict[str, timedelta | None]:
    """`FALAI["RETENTION"]` over its defaults, each kept row's age limit as a `timedelta` (None:
    kept forever). Raises `ImproperlyConfigured` naming the key for an unknown key or a value
    that is not a duration like the engine's (`"30d"`, `"12h"`) nor None."""
    from django.core.exceptions import ImproperlyConfigured

    from falai_django.engine.durations import is_duration, parse_duration

    configured = get("RETENTION")
    if configured is None:
        configured = {}
    if not isinstance(configured, dict):
        raise ImproperlyConfigured(f'FALAI["RETENTION"] must be a dict with the keys {", ".join(DEFAULTS["RETENTION"])}; '
                                   f"got {configured!r}.")
    unknown = sorted(map(str, set(configured) - set(DEFAULTS["RETENTION"])))
    if unknown:
        raise ImproperlyConfigured(f'FALAI["RETENTION"] has unknown keys: {", ".join(unknown)}. Known keys: '
                                   f'{", ".join(DEFAULTS["RETENTION"])}.')
    limits: dict[str, timedelta | None] = {}
    for key, value in {**DEFAULTS["RETENTION"], **configured}.items():
        if value is None:
            limits[key] = None
        elif is_duration(value):
            limits[key] = timedelta(milliseconds=parse_duration(value))
        else:
            raise ImproperlyConfigured(f'FALAI["RETENTION"]["{key}"] = {value!r} is not a duration: write a number '
                                       'followed by s, m, h or d, such as "30d" or "12h", or None to keep forever.')
    return limits


def get_media_provider(agent: Any = None) -> Any:
    """What transcribes and describes media: `FALAI["MEDIA"]["PROVIDER"]` (an object with the
    methods, or a class / factory called once per process and settings change), else the
    running agent's own `provider`."""
    global _media_provider
    path = media_settings()["PROVIDER"]
    if path is None:
        return getattr(agent if agent is not None else get_agent(), "provider", None)
    if _media_provider is None or _media_provider[0] != path:
        value = resolve(path)
        if isinstance(value, type) or (callable(value) and not _has_media_methods(value)):
            value = value()
        _media_provider = (path, value)
    return _media_provider[1]


def _has_media_methods(value: Any) -> bool:
    return any(hasattr(value, name) for name in ("transcribe", "describe_image"))


def send_by_notify(vendor: str) -> bool:
    """Whether a turn's sends are handed over by PostgreSQL NOTIFY (see SEND_HANDOFF)."""
    mode = get("SEND_HANDOFF")
    return vendor == "postgresql" and mode in ("auto", "notify")


WHATSAPP_DEFAULTS: dict[str, Any] = {
    "PHONE_NUMBER_ID": "",
    "ACCESS_TOKEN": "",
    "APP_SECRET": "",  # signs webhook bodies (X-Hub-Signature-256)
    "VERIFY_TOKEN": "",  # the webhook's GET handshake
    "GRAPH_URL": "https://graph.facebook.com/v21.0",
    # The 24-hour customer service window: "skip" (talk and say steps skipped, do steps run),
    # "stop" (the plain reason: a fresh talk step ends its run) or None (no window rule).
    "WINDOW": "skip",
    "TIMEOUT_S": 10.0,  # per Graph API request
    "LANGUAGE": "en_US",  # the template action's default language code
    # Media a `say` step sends: slug -> a Cloud API media object, e.g.
    # {"tabela": {"type": "document", "link": "https://.../tabela.pdf", "filename": "tabela.pdf"}}
    # or {"logo": {"type": "image", "id": "<uploaded media id>"}}.
    "MEDIA": {},
}


def whatsapp_settings() -> dict[str, Any] | None:
    """`FALAI["WHATSAPP"]` over its defaults, or None when the channel is not configured."""
    configured = get("WHATSAPP")
    if not isinstance(configured, dict):
        return None
    merged = dict(WHATSAPP_DEFAULTS)
    merged.update(configured)
    return merged
