"""The demo's production mode (`DJANGO_DEBUG=0`, README "Production"): `check --deploy` passes at
warning level; it refuses to start without its secrets; after `collectstatic`, gunicorn behind a
TLS-terminating proxy serves every page people use with all their static files (WhiteNoise), HTTPS
only, with secure cookies and HSTS, and the probes still answer over plain HTTP."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.support import HOST, ROOT, SECRET, environment, get, manage, wait_listening
from falai_django.testing.postgres import free_port

# Log a staff user in as the browser would end up (a session row and its cookie), and name the
# pages a team uses: the admin, the conversation list, the flow editor, the desk, the playground
# and the API's docs page.
PREPARE = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

user = get_user_model().objects.create_superuser("ops", "ops@example.com", "a-long-pass-phrase-1")
client = Client()
client.force_login(user)
print(json.dumps({"session": client.cookies["sessionid"].value, "pages": [
    reverse("admin:index"), reverse("admin:falai_django_conversation_changelist"),
    reverse("admin:falai_django_flow_add"), reverse("admin:falai_django_conversation_desk"),
    reverse("falai:playground"), reverse("falai:docs")]}))
"""


def production(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": SECRET, "DJANGO_ALLOWED_HOSTS": HOST,
            "FALAI_WEBHOOK_SECRET": "shared-with-the-channel", "SQLITE_PATH": str(tmp_path / "db.sqlite3"),
            "DJANGO_STATIC_ROOT": str(tmp_path / "static"), **extra}


def test_check_deploy_passes_at_warning_level_in_production_mode(tmp_path):
    done = manage(ROOT, "check", "--deploy", "--fail-level", "WARNING", **production(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout + done.stderr


def test_development_mode_is_what_check_deploy_warns_about(tmp_path):
    """The same check on `make run`'s settings: the warnings production mode answers are real."""
    done = manage(ROOT, "check", "--deploy", "--fail-level", "WARNING", SQLITE_PATH=str(tmp_path / "db.sqlite3"))
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W009", "security.W012", "security.W016",
                    "security.W018"):
        assert warning in done.stderr, warning


@pytest.mark.parametrize(("missing", "words"), [
    ("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG=0"),
    ("DJANGO_ALLOWED_HOSTS", "DJANGO_ALLOWED_HOSTS must be set when DJANGO_DEBUG=0"),
])
def test_production_mode_will_not_start_without_its_secret_or_hosts(tmp_path, missing, words):
    env = production(tmp_path)
    del env[missing]
    done = manage(ROOT, "check", **env)
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and words in done.stderr, done.stderr[-2000:]


def test_a_debug_flag_it_cannot_read_is_refused(tmp_path):
    done = manage(ROOT, "check", **production(tmp_path, DJANGO_DEBUG="maybe"))
    assert done.returncode != 0 and "DJANGO_DEBUG='maybe': use 1 or 0." in done.stderr, done.stderr[-2000:]


def test_gunicorn_serves_every_page_with_its_static_files_over_https_only(tmp_path):
    env = production(tmp_path)
    for step in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
        done = manage(ROOT, *step, **env)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "static" / "staticfiles.json").is_file()  # the manifest of hashed names
    prepared = manage(ROOT, "shell", "--no-imports", "-c", PREPARE, **env)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    prepared = json.loads(prepared.stdout)

    port = free_port()
    log = tmp_path / "gunicorn.log"
    with log.open("a", encoding="utf-8") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
             "--access-logfile", "-"],
            cwd=ROOT, env=environment(ROOT, **env), stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, server, log)
        https = {"X-Forwarded-Proto": "https"}  # what the proxy in front says
        signed_in = {**https, "Cookie": f"sessionid={prepared['session']}"}

        status, headers, _, _ = get(port, "/admin/", {})
        assert status == 301 and headers["location"] == f"https://{HOST}/admin/"  # plain HTTP goes to HTTPS
        status, _, body, _ = get(port, "/falai/health/live", {})  # a probe, from inside, over HTTP
        assert status == 200 and json.loads(body) == {"status": "ok"}

        status, headers, _, cookies = get(port, "/admin/login/", https)
        assert status == 200
        assert headers["strict-transport-security"] == "max-age=3600; includeSubDomains; preload"
        csrf = [cookie for cookie in cookies if cookie.startswith("csrftoken=")]
        assert csrf and "Secure" in csrf[0], cookies

        served: set[str] = set()
        for page in prepared["pages"]:
            status, _, body, _ = get(port, page, signed_in)
            assert status == 200, (page, status, body[:500])
            statics = set(re.findall(r'(?:src|href)="(/static/[^"]+)"', body.decode()))
            assert statics, f"{page} links no static file"
            for url in statics - served:
                status, headers, content, _ = get(port, url, https)
                assert status == 200 and content, (page, url, status)
                # a hashed name (collectstatic's manifest) is cached for good by the browser
                assert re.search(r"\.[0-9a-f]{12}\.\w+$", url), url
                assert "immutable" in headers.get("cache-control", ""), (url, headers)
            served |= statics
        assert any(url.startswith("/static/falai_django/flow_editor.") for url in served), served
        assert any("swagger-ui-dist/swagger-ui-bundle." in url for url in served), served
    finally:
        server.terminate()
        server.wait(timeout=30)
