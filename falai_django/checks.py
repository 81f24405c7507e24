"""System checks for the `FALAI` setting (ids `falai_django.E001`…, `falai_django.W001`…)."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from falai_django.conf import DEFAULTS, build_store


def _import_error(name: str, path: Any, exc: Exception, check_id: str) -> Error:
    return Error(
        f'FALAI["{name}"] = {path!r} cannot be imported: {type(exc).__name__}: {exc}.',
        hint=f'Point FALAI["{name}"] at an importable dotted path ("package.module.attribute").',
        id=check_id,
    )


def _build_error(path: Any, exc: Exception) -> Error:
    """The agent's module ran and raised while building the agent (a flow or field mistake)."""
    return Error(
        f'FALAI["AGENT"] = {path!r}: the agent fails to build: {exc}',
        hint="The module imports, but building the agent raised. Fix the definition the message points "
        "at (a field, step or flow name); run `python -c \"import <module>\"` to see the traceback.",
        id="falai_django.E011",
    )


@register(Tags.compatibility)
def check_falai_settings(app_configs=None, **kwargs) -> list:
    from django.utils.module_loading import import_string

    problems: list = []
    configured = getattr(settings, "FALAI", None)
    if configured is None or not isinstance(configured, dict):
        return [
            Error(
                "The FALAI setting is missing or is not a dict.",
                hint='Add FALAI = {"AGENT": "yourproject.agents.agent"} to your settings.',
                id="falai_django.E001",
            )
        ]
    unknown = sorted(set(configured) - set(DEFAULTS))
    if unknown:
        problems.append(
            Warning(
                f"FALAI has unknown keys: {', '.join(unknown)}.",
                hint=f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                id="falai_django.W002",
            )
        )

    agent_path = configured.get("AGENT")
    if not agent_path:
        problems.append(
            Error(
                'FALAI["AGENT"] is not set: the host has no agent to run.',
                hint='Set FALAI["AGENT"] to the dotted path of your Agent, e.g. "project.agents.ana".',
                id="falai_django.E001",
            )
        )
    else:
        try:
            agent = import_string(agent_path) if isinstance(agent_path, str) else agent_path
        except ImportError as exc:
            problems.append(_import_error("AGENT", agent_path, exc, "falai_django.E002"))
        except Exception as exc:  # noqa: BLE001 - the module imports, but building the agent failed
            problems.append(_build_error(agent_path, exc))
        else:
            if not hasattr(agent, "turn") and callable(agent):
                try:  # a zero-argument callable builds the agent: build it now, as the host will
                    agent()
                except Exception as exc:  # noqa: BLE001 - reported, not raised
                    problems.append(_build_error(agent_path, exc))
            elif not hasattr(agent, "turn"):
                problems.append(
                    Error(
                        f'FALAI["AGENT"] = {agent_path!r} is a {type(agent).__name__}, not an agent.',
                        hint="Point it at the object falai().fields(...).agent(...) returns, or at a "
                        "zero-argument callable returning one.",
                        id="falai_django.E003",
                    )
                )

    for name, check_id in (("SENDER", "falai_django.E004"), ("CONTEXT", "falai_django.E005")):
        path = configured.get(name, DEFAULTS[name])
        if not path:
            continue
        try:
            target = import_string(path) if isinstance(path, str) else path
        except Exception as exc:  # noqa: BLE001
            problems.append(_import_error(name, path, exc, check_id))
            continue
        if not callable(target):
            problems.append(
                Error(
                    f'FALAI["{name}"] = {path!r} is not callable.',
                    hint=f'FALAI["{name}"] must name a function.',
                    id=check_id,
                )
            )

    problems.extend(_store_problems(configured.get("STORE", DEFAULTS["STORE"])))

    secret = configured.get("WEBHOOK_SECRET", "")
    if not isinstance(secret, str):
        problems.append(
            Error(
                'FALAI["WEBHOOK_SECRET"] must be a string.',
                hint="Use the shared secret your channel signs webhooks with, as text.",
                id="falai_django.E006",
            )
        )
    elif not secret:
        problems.append(
            Warning(
                'FALAI["WEBHOOK_SECRET"] is empty: signed webhooks are refused; only token and session '
                "authentication work.",
                hint="Set it to the shared secret your channel signs webhook bodies with.",
                id="falai_django.W001",
            )
        )

    if "django_q" not in settings.INSTALLED_APPS:
        problems.append(
            Error(
                '"django_q" is not in INSTALLED_APPS: sends and wakes cannot be handed to django-q2.',
                hint='Add "django_q" to INSTALLED_APPS and configure Q_CLUSTER (the ORM broker works out of the box).',
                id="falai_django.E007",
            )
        )
    elif not getattr(settings, "Q_CLUSTER", None):
        problems.append(
            Error(
                "Q_CLUSTER is not configured.",
                hint='Set Q_CLUSTER = {"name": "falai", "orm": "default"} (or "redis": ... for several machines).',
                id="falai_django.E008",
            )
        )
    q_cluster = getattr(settings, "Q_CLUSTER", None) or {}
    orm_alias = q_cluster.get("orm")
    if orm_alias and settings.DATABASES.get(orm_alias, {}).get("CONN_MAX_AGE", 0) == 0:
        problems.append(
            Warning(
                f'django-q2 uses the ORM broker on "{orm_alias}" with CONN_MAX_AGE = 0: every send hand-off '
                "closes the database connection and the next query reconnects.",
                hint=f'Set DATABASES["{orm_alias}"]["CONN_MAX_AGE"] (e.g. 60) with CONN_HEALTH_CHECKS = True.',
                id="falai_django.W003",
            )
        )
    default_db = settings.DATABASES.get("default", {})
    if default_db.get("ENGINE", "").endswith("sqlite3") and str(
        (default_db.get("OPTIONS") or {}).get("transaction_mode") or ""
    ).upper() not in ("IMMEDIATE", "EXCLUSIVE"):
        problems.append(
            Warning(
                'DATABASES["default"] is SQLite without OPTIONS "transaction_mode": "IMMEDIATE": while the web '
                "server, the worker and the dispatcher write at once, a transaction that reads and then writes "
                '(an admin save) fails with "database is locked" instead of waiting.',
                hint='Add "transaction_mode": "IMMEDIATE", "timeout": 20 and "init_command": '
                '"PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;" to DATABASES["default"]["OPTIONS"] '
                "(README, Adding the app).",
                id="falai_django.W004",
            )
        )
    handoff = configured.get("SEND_HANDOFF", DEFAULTS["SEND_HANDOFF"])
    if handoff not in ("auto", "notify", "queue"):
        problems.append(
            Error(
                f'FALAI["SEND_HANDOFF"] = {handoff!r} is not one of "auto", "notify", "queue".',
                hint='Use "auto" (NOTIFY on PostgreSQL, django-q2 elsewhere), "notify" or "queue".',
                id="falai_django.E010",
            )
        )
    for name in ("WEBHOOK_TOLERANCE_S", "HISTORY_LIMIT", "MAX_REPLAYS", "DISPATCH_POLL_S", "SEND_THREADS",
                 "SEND_BATCH", "TURN_LEASE_S", "TURN_WAIT_S", "METRICS_FLUSH_S"):
        value = configured.get(name, DEFAULTS[name])
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
            problems.append(
                Error(
                    f'FALAI["{name}"] = {value!r} must be a positive number.',
                    hint=f"Remove it to use the default ({DEFAULTS[name]!r}).",
                    id="falai_django.E009",
                )
            )
    token = configured.get("METRICS_TOKEN", DEFAULTS["METRICS_TOKEN"])
    if not isinstance(token, str):
        problems.append(
            Error(
                f'FALAI["METRICS_TOKEN"] must be text (the Bearer token a scrape sends), not {type(token).__name__}.',
                hint='Set it from a secret, e.g. os.environ.get("FALAI_METRICS_TOKEN", ""); "" leaves only the '
                "API's authentication.",
                id="falai_django.E013",
            )
        )
    problems += _price_problems(configured.get("MODEL_PRICES", DEFAULTS["MODEL_PRICES"]))
    return problems


def _price_problems(prices: Any) -> list:
    """`FALAI["MODEL_PRICES"]`: prices per million tokens by model (`observe.prices`); None for none."""
    from falai_django.observe.prices import parse_price

    if prices is None:
        return []
    example = '{"gemini-2.5-flash": {"input": 0.30, "cached_input": 0.03, "output": 2.50}}'
    hint = (f'Per million tokens: {{"input": …, "cached_input": …, "output": …}} (cached_input is optional) '
            f"or (input, cached input, output), e.g. {example}.")
    if not isinstance(prices, dict):
        return [Error(f'FALAI["MODEL_PRICES"] must be a dict of prices by model, not {type(prices).__name__}.',
                      hint=hint, id="falai_django.E014")]
    problems = []
    for model, price in prices.items():
        _, wrong = parse_price(price)
        if wrong is None and not isinstance(model, str):
            wrong = "the model must be text"
        if wrong is not None:
            problems.append(Error(f'FALAI["MODEL_PRICES"][{model!r}] = {price!r}: {wrong}.', hint=hint,
                                  id="falai_django.E014"))
    return problems


def _store_problems(path: Any) -> list:
    """`FALAI["STORE"]` must build a `DjangoStore`: the host writes the session row in the same
    transaction as its transcript, outbox and wakes, so the sessions live in the app's tables."""
    from falai_django.stores.django import DjangoStore

    try:
        store = build_store(path)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return [_import_error("STORE", path, exc, "falai_django.E012")]
    if isinstance(store, DjangoStore):
        return []
    return [Error(
        f'FALAI["STORE"] = {path!r} builds a {type(store).__name__}, not a DjangoStore.',
        hint="The host saves each session with its transcript, outbox and wakes in one transaction, so its "
             "store keeps sessions in the app's tables: name DjangoStore or a subclass of it (e.g. one with "
             "another database alias). MemoryStore, PostgresStore and the others serve `agent.turn()` "
             "without the host.",
        id="falai_django.E012",
    )]


@register(Tags.compatibility)
def check_api_docs_apps(app_configs=None, **kwargs) -> list:
    """The schema works without them; the docs page (`falai/docs/`) needs their templates and assets."""
    missing = [app for app in ("drf_spectacular", "drf_spectacular_sidecar") if app not in settings.INSTALLED_APPS]
    if not missing:
        return []
    return [
        Warning(
            f"{' and '.join(repr(app) for app in missing)} not in INSTALLED_APPS: the API docs page "
            "(falai/docs/) cannot render; the schema (falai/schema) still works.",
            hint='Add "drf_spectacular" and "drf_spectacular_sidecar" to INSTALLED_APPS (the sidecar serves '
                 "Swagger UI's files from your static files: no CDN).",
            id="falai_django.W010",
        )
    ]


@register(Tags.compatibility)
def check_flows_settings(app_configs=None, **kwargs) -> list:
    """Flows as data (issue 16): `FLOWS_DB` a boolean, `FLOWS_RELOAD_S` a number of seconds >= 0."""
    configured = getattr(settings, "FALAI", None)
    if not isinstance(configured, dict):
        return []  # check_falai_settings reports it
    problems: list = []
    if "FLOWS_DB" in configured and not isinstance(configured["FLOWS_DB"], bool):
        problems.append(Error(
            f'FALAI["FLOWS_DB"] = {configured["FLOWS_DB"]!r} is not True or False.',
            hint="True runs the enabled Flow rows beside the code agent's flows; False runs the code agent alone.",
            id="falai_django.E161"))
    reload_s = configured.get("FLOWS_RELOAD_S", DEFAULTS["FLOWS_RELOAD_S"])
    if isinstance(reload_s, bool) or not isinstance(reload_s, (int, float)) or reload_s < 0:
        problems.append(Error(
            f'FALAI["FLOWS_RELOAD_S"] = {reload_s!r} is not a number of seconds of 0 or more.',
            hint="How often, at most, each process looks for a new version of the stored flows (e.g. 2.0).",
            id="falai_django.E162"))
    return problems


@register(Tags.compatibility)
def check_media_settings(app_configs=None, **kwargs) -> list:
    """`FALAI["MEDIA"]` (issue 48): a dict of known keys; PROVIDER importable; the limits positive."""
    configured = getattr(settings, "FALAI", None)
    if not isinstance(configured, dict) or "MEDIA" not in configured:
        return []
    media = configured["MEDIA"]
    if not isinstance(media, dict):
        return [Error('FALAI["MEDIA"] must be a dict.', hint=f"Known keys: {', '.join(DEFAULTS['MEDIA'])}.",
                      id="falai_django.E170")]
    problems: list = []
    unknown = sorted(set(media) - set(DEFAULTS["MEDIA"]))
    if unknown:
        problems.append(Warning(f'FALAI["MEDIA"] has unknown keys: {", ".join(map(str, unknown))}.',
                                hint=f"Known keys: {', '.join(DEFAULTS['MEDIA'])}.", id="falai_django.W170"))
    provider = media.get("PROVIDER")
    if isinstance(provider, str):
        from django.utils.module_loading import import_string

        try:
            import_string(provider)
        except Exception as exc:  # noqa: BLE001 - reported
            problems.append(Error(f'FALAI["MEDIA"]["PROVIDER"] = {provider!r} cannot be imported: '
                                  f"{type(exc).__name__}: {exc}.",
                                  hint="Name an object with transcribe() / describe_image(), or a factory "
                                       "returning one; None uses the agent's own provider.", id="falai_django.E171"))
    if "DESCRIBE_IMAGES" in media and not isinstance(media["DESCRIBE_IMAGES"], bool):
        problems.append(Error(f'FALAI["MEDIA"]["DESCRIBE_IMAGES"] = {media["DESCRIBE_IMAGES"]!r} is not True or '
                              "False.", id="falai_django.E172"))
    for key in ("MAX_BYTES", "TIMEOUT"):
        value = media.get(key, DEFAULTS["MEDIA"][key])
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            problems.append(Error(f'FALAI["MEDIA"]["{key}"] = {value!r} must be a positive number.',
                                  hint=f"Remove it to use the default ({DEFAULTS['MEDIA'][key]}).",
                                  id="falai_django.E172"))
    return problems


@register(Tags.compatibility)
def check_retention_settings(app_configs=None, **kwargs) -> list:
    """`FALAI["RETENTION"]` (issue 51): known keys, each a duration like the engine's or None."""
    from django.core.exceptions import ImproperlyConfigured

    from falai_django import conf

    configured = getattr(settings, "FALAI", None)
    if not isinstance(configured, dict) or "RETENTION" not in configured:
        return []
    try:
        conf.retention()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint='For example FALAI["RETENTION"] = {"run_log": "90d", "transcript": None, '
                                     '"wakes": "30d", "desk": "365d"}.', id="falai_django.E180")]
    return []


@register(Tags.database)
def check_search_indexes(app_configs=None, databases=None, **kwargs) -> list:
    """PostgreSQL databases the app is migrated on have the list's and the search's indexes
    (migration 0016; `pg_trgm` may have been refused). Run by `check --database default` and
    `migrate`, which ask for database checks."""
    from django.db import connections

    from falai_django.models import search_indexes

    problems = []
    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor != "postgresql":
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('agent_sessions') IS NOT NULL")
            if not cursor.fetchone()[0]:
                continue  # not migrated (yet) on this database
            cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname = ANY(%s)", [list(search_indexes.INDEXES)])
            present = {name for (name,) in cursor.fetchall()}
        missing = [name for name in search_indexes.INDEXES if name not in present]
        if missing:
            problems.append(Warning(
                f"Database {alias!r} lacks the conversation list's indexes {', '.join(missing)}: searching and "
                "listing a large number of conversations scans the tables.",
                hint="Create the pg_trgm extension as a superuser (CREATE EXTENSION pg_trgm), then run "
                     "`manage.py migrate falai_django 0015` and `migrate` again to build them.",
                id="falai_django.W190"))
    return problems


@register(Tags.security, deploy=True)
def check_probes_not_redirected(app_configs=None, **kwargs) -> list:
    """`SECURE_SSL_REDIRECT` answers plain HTTP with a 301 to HTTPS; the health probes come over
    plain HTTP from inside (kubelet, a Compose healthcheck) and would never see the app's answer."""
    if not getattr(settings, "SECURE_SSL_REDIRECT", False):
        return []
    from django.urls import NoReverseMatch, reverse

    try:
        probes = [reverse("falai:health-live"), reverse("falai:health-ready")]
    except NoReverseMatch:  # the app's URLs are not routed: no probe to redirect
        return []
    exempt = [re.compile(pattern) for pattern in getattr(settings, "SECURE_REDIRECT_EXEMPT", [])]
    redirected = [path for path in probes if not any(p.search(path.lstrip("/")) for p in exempt)]
    if not redirected:
        return []
    prefix = re.escape(probes[0].lstrip("/").removesuffix("live"))
    return [Warning(
        f"SECURE_SSL_REDIRECT redirects the health probes ({', '.join(redirected)}) to HTTPS: a probe "
        "over plain HTTP gets a 301, not the app's answer.",
        hint=f'Add r"^{prefix}" to SECURE_REDIRECT_EXEMPT (README "Production").',
        id="falai_django.W011",
    )]
