"""Demo project settings. SQLite by default; set DATABASE_URL=postgresql://... for PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def _flag(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ImproperlyConfigured(f"{name}={value!r}: use 1 or 0.")
    return value in ("1", "true", "yes", "on")


def _required(name: str, how: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ImproperlyConfigured(f"{name} must be set when DJANGO_DEBUG=0: {how}.")
    return value


# Development by default (`make run`). DJANGO_DEBUG=0 is production mode (README "Production"):
# it will not start without a secret key and the site's host names, and it turns on what
# `manage.py check --deploy` asks for (further down).
DEBUG = _flag("DJANGO_DEBUG", "1")
if DEBUG:
    SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-not-secret-change-me")
    ALLOWED_HOSTS = ["*"]
else:
    SECRET_KEY = _required("DJANGO_SECRET_KEY", "a long random value, e.g. from python -c \"from "
                           "django.core.management.utils import get_random_secret_key; print(get_random_secret_key())\"")
    ALLOWED_HOSTS = _required("DJANGO_ALLOWED_HOSTS", "the site's host names, comma-separated "
                              "(chat.example.com,10.0.0.5)").replace(" ", "").strip(",").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",          # the API's OpenAPI schema and its docs page (falai/docs/)
    "drf_spectacular_sidecar",  # the docs page's Swagger UI assets, served locally (no CDN)
    "django_q",
    "falai_django",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "project.wsgi.application"


def _database_from_url(url: str) -> dict:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"DATABASE_URL: only postgresql:// URLs are supported, got {parsed.scheme!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        # The host's few hot statements are prepared on the server after this many runs on a
        # connection (Django's default, None, prepares nothing). "none" behind a transaction-
        # pooling PgBouncer older than 1.21, which cannot keep prepared statements.
        "OPTIONS": {"prepare_threshold": _prepare_threshold(os.environ.get("DB_PREPARE_THRESHOLD", "5"))},
    }


def _prepare_threshold(value: str) -> int | None:
    if value.strip().lower() in ("", "none", "off"):
        return None
    return int(value)


if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": _database_from_url(os.environ["DATABASE_URL"])}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(BASE_DIR / "db.sqlite3")),
            # Several processes (web, worker, dispatcher) write one file: wait for the lock, don't
            # fail. WAL lets readers run beside the writer; IMMEDIATE takes the write lock when a
            # transaction begins (a read-then-write transaction that finds the file locked later
            # fails at once with "database is locked": SQLite's timeout does not apply to it).
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
        }
    }
# Keep connections between requests and tasks: django-q2's ORM broker otherwise reconnects on
# every enqueue (check falai_django.W003).
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("DB_CONN_MAX_AGE", "60"))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("pt-br", "Português (Brasil)")]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# One time format for people (the admin's lists included): project/formats/<lang>/formats.py.
FORMAT_MODULE_PATH = ["project.formats"]
STATIC_URL = "static/"
# `manage.py collectstatic` copies the admin's, the desk's, the flow editor's and the API docs
# page's files here; in production mode WhiteNoise serves them from here (in development
# `runserver` serves them from the apps).
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles"))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
}

# django-q2: the ORM broker works out of the box on SQLite; set FALAI_REDIS_URL for Redis.
Q_CLUSTER = {
    "name": "falai",
    "workers": 2,
    "timeout": 60,
    "retry": 120,
    "orm": "default",
    "catch_up": False,
}
if os.environ.get("FALAI_REDIS_URL"):
    Q_CLUSTER.pop("orm")
    Q_CLUSTER["redis"] = os.environ["FALAI_REDIS_URL"]

FALAI: dict[str, Any] = {
    "AGENT": "project.agents.ana",
    # Shared secret for HMAC-signed webhooks; empty refuses signed webhooks (token/session auth only).
    "WEBHOOK_SECRET": os.environ.get("FALAI_WEBHOOK_SECRET", ""),
    # A Prometheus scrape's `Authorization: Bearer <token>` for /falai/metrics ("" = the API's auth only).
    "METRICS_TOKEN": os.environ.get("FALAI_METRICS_TOKEN", ""),
}

# WhatsApp Cloud API (README "Going live on WhatsApp"): set the four WHATSAPP_* variables and Ana
# answers on WhatsApp through the webhook at /falai/whatsapp/webhook.
if os.environ.get("WHATSAPP_PHONE_NUMBER_ID"):
    FALAI["SENDER"] = "falai_django.channels.whatsapp.send"
    FALAI["WHATSAPP"] = {
        "PHONE_NUMBER_ID": os.environ["WHATSAPP_PHONE_NUMBER_ID"],
        "ACCESS_TOKEN": os.environ.get("WHATSAPP_ACCESS_TOKEN", ""),
        "APP_SECRET": os.environ.get("WHATSAPP_APP_SECRET", ""),
        "VERIFY_TOKEN": os.environ.get("WHATSAPP_VERIFY_TOKEN", ""),
        "GRAPH_URL": os.environ.get("WHATSAPP_GRAPH_URL", "https://graph.facebook.com/v21.0"),
        # "skip" (default), "stop", or "off" for no 24-hour window rule
        "WINDOW": None if os.environ.get("WHATSAPP_WINDOW") == "off" else os.environ.get("WHATSAPP_WINDOW", "skip"),
        "LANGUAGE": os.environ.get("WHATSAPP_TEMPLATE_LANGUAGE", "pt_BR"),
    }

# The demo's console: falai's own lines (the log sender's "falai send to ...", the playground's
# sandbox) at INFO, so a newcomer sees what would have reached the channel; others at WARNING.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Each line names its conversation and turn ("-" outside one): grep an id across the three processes.
    "formatters": {"line": {"()": "falai_django.observe.logs.Formatter", "datefmt": "%H:%M:%S",
                            "format": "%(asctime)s %(conversation_id)s %(turn_id)s %(name)s %(levelname)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "line"}},
    "loggers": {"falai_django": {"handlers": ["console"], "level": os.environ.get("FALAI_LOG_LEVEL", "INFO"),
                                 "propagate": True}},  # pytest's caplog listens on the root
}

# Production mode (DJANGO_DEBUG=0): HTTPS only, behind a proxy that terminates TLS and sets
# X-Forwarded-Proto (it must overwrite a client's own); static files from STATIC_ROOT by WhiteNoise,
# with hashed names cached for a year. `manage.py check --deploy --fail-level WARNING` passes
# (tests/deploy/test_production.py); the README's "Production" block is the same for your project.
if not DEBUG:
    MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                      "whitenoise.middleware.WhiteNoiseMiddleware")
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    # The probes come over plain HTTP from inside (kubelet, Compose): not redirected to HTTPS.
    SECURE_REDIRECT_EXEMPT = [r"^falai/health/"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # Start small; raise to a year (31536000) once every subdomain is served over HTTPS.
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "3600"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
