"""Shared fixtures. PostgreSQL and Redis tests use the real servers on 127.0.0.1.

Outside CI a missing server skips those tests with a loud reason; with CI=true a missing
server is a failure, never a skip.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

PG_DSN = os.environ.get("FALAI_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("FALAI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
IN_CI = os.environ.get("CI", "").lower() == "true"
SPEC_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "spec"
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True, scope="session")
def _metrics_flushed_by_scrapes_only():
    """In this process the metrics are written by the scrapes the tests make, not by a thread that
    would write to the test database between (and after) tests; the processes the tests start
    (qcluster, the dispatcher, the demo) keep their thread."""
    from falai_django.observe.metrics import flusher

    flusher.enabled = False
    yield


def _unavailable(what: str, error: Exception) -> None:
    message = f"{what} is NOT reachable ({error}); its tests cannot run. Start it or run `bash scripts/services.sh`."
    if IN_CI:
        pytest.fail(message + " CI=true: this is a failure, not a skip.")
    pytest.skip("LOUD SKIP: " + message)


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """A DSN to the real PostgreSQL test database (checked reachable)."""
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        _unavailable("PostgreSQL at " + PG_DSN, exc)
    return PG_DSN


@pytest.fixture
def pg_conn(pg_dsn):
    """An autocommit psycopg connection to the real server."""
    import psycopg

    conn = psycopg.connect(pg_dsn, autocommit=True)
    yield conn
    conn.close()


@pytest.fixture
def pg_table(pg_conn) -> str:
    """A fresh, unique table name; dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    pg_conn.execute(f'DROP TABLE IF EXISTS "{name}"')


@pytest.fixture(scope="session")
def redis_url() -> str:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001
        _unavailable("Redis at " + REDIS_URL, exc)
    return REDIS_URL


@pytest.fixture
def redis_client(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def legacy_blobs_dir() -> Path:
    """The spec's fixture blobs: tests/fixtures/legacy-blobs (a copy kept in the repo)."""
    return FIXTURES_DIR / "legacy-blobs"


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    """Django's test database, whichever test folder creates it first (it is one per session):
    on SQLite a file, not the shared-cache in-memory database (where racing threads get "table is
    locked" instead of waiting); on PostgreSQL a name of this run's own, so suites running at the
    same time on one server never drop each other's database."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        db.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("falai-db") / "test.sqlite3")
        db.setdefault("OPTIONS", {})["timeout"] = 30
    else:
        db.setdefault("TEST", {})["NAME"] = f"test_falai_{os.getpid()}"


@pytest.fixture
def demo_settings(settings, monkeypatch):
    """The demo agent (Ana: offline, fake clock) behind the host, with a recording sender standing
    for a project's channel (`demo.support.record_send`); django-q2 runs tasks in-line. Yields the
    agent, reset. Used by tests/demo, tests/newcomer and tests/api_list."""
    from demo import support
    from django_q.conf import Conf

    from falai_django import conf

    # "queue": sends go through django-q2 (in-line here) on any database; "auto" would hand them
    # to the dispatcher by NOTIFY on PostgreSQL, and none runs here (tests/host covers NOTIFY).
    settings.FALAI = {"AGENT": "demo.support.current_agent", "SENDER": "demo.support.record_send",
                      "SEND_HANDOFF": "queue"}
    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2 reads Q_CLUSTER once, at import
    conf.clear_cache()
    agent = support.reset()
    yield agent
    conf.clear_cache()


@pytest.fixture
def keep_signal_handlers():
    """Put SIGINT's and SIGTERM's handlers back after a test that runs `run_demo.main()` (it installs its own)."""
    import signal

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


@pytest.fixture(autouse=True)
def _database_flows_off_outside_their_tests(request, monkeypatch):
    """The running agent checks the flows table at most once every FLOWS_RELOAD_S per process
    (issue 16). Outside tests/flows_data that check is off, so the statement counts other
    suites pin (two statements per turn on PostgreSQL) never catch it by chance."""
    from falai_django import conf

    if "flows_data" in request.node.path.parts or request.node.get_closest_marker("library_defaults"):
        yield
        return

    monkeypatch.setitem(conf.DEFAULTS, "FLOWS_DB", False)
    conf.reload()
    yield
    conf.reload()


CHROMIUM = Path(os.environ.get("FALAI_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"  # screenshots the browser tests save


def _browser_unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}; CI=true: the browser tests must run, this is a failure, not a skip.")
    pytest.skip(f"LOUD SKIP: {reason}; this browser test did not run.")


@pytest.fixture
def chromium(monkeypatch):
    """Debian's Chromium driven by Playwright (headless; `executable_path`, never a download): the
    Browser. Outside CI a missing browser or Playwright skips loudly; with CI=true it fails."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _browser_unavailable(f"playwright is not installed ({exc}): pip install -e '.[dev]'")
    if not os.access(CHROMIUM, os.X_OK):
        _browser_unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; Django's ORM calls from the test
    # body then look "async" to Django's guard.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            _close_connections_opened_under_playwright()


def _close_connections_opened_under_playwright() -> None:
    """Close the database connections the test body opened while Playwright's event loop ran.

    Django keeps a thread's connections in an asgiref Local that, while an event loop runs in the
    thread (Playwright's sync API keeps one running for the whole `with` block), is keyed by the
    context rather than by the thread: the test body's ORM calls get connections of their own,
    which the teardown outside the block (the flush, `destroy_test_db`) never sees. Left open,
    on PostgreSQL the test database "is being accessed by other users" and is never dropped.
    Called inside the block, this reaches exactly those connections."""
    from django.db import connections

    connections.close_all()


@pytest.fixture
def new_page(chromium):
    """`new_page(width=, height=, javascript=)`: a page of `chromium` in a fresh context (English
    admin, a 15 s default timeout)."""

    def make(*, width: int = 1400, height: int = 1000, javascript: bool = True):
        context = chromium.new_context(viewport={"width": width, "height": height}, locale="en-US",
                                       java_script_enabled=javascript)
        page = context.new_page()
        page.set_default_timeout(15_000)
        return page

    return make
