"""Running `manage.py` as a deploy pipeline does: in a subprocess, with only the environment it is
given (`environment` and `manage` are the newcomer tests': nothing of the test run's DJANGO_/FALAI_/
model settings leaks in)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from newcomer.test_readme_adding_the_app import environment, manage, wait_listening

ROOT = Path(__file__).resolve().parents[2]
HOST = "chat.example.com"  # the site's name in DJANGO_ALLOWED_HOSTS, sent as Host by `get`
SECRET = "k3v$9-" + "q8Zr!x2Lw@5mNp^7Tb&4Yc*6Hd(1Jf)0Gs+3Va=8Ue_2Ki" * 2  # long and varied: no W009
__all__ = ["HOST", "ROOT", "SECRET", "environment", "exported_schema", "get", "manage", "served_schema",
           "wait_listening"]

# What `GET <app>/schema` answers, read in the project's own process: the URL's view, called as a
# request would call it, by a superuser (no database needed: the user is never saved).
SERVED_SCHEMA = """
import json
from django.contrib.auth import get_user_model
from django.urls import resolve, reverse
from rest_framework.test import APIRequestFactory, force_authenticate

url = reverse("falai:schema")
request = APIRequestFactory().get(url, HTTP_ACCEPT="application/json")
force_authenticate(request, user=get_user_model()(username="ops", is_superuser=True, is_active=True))
response = resolve(url).func(request)
response.render()
assert response.status_code == 200, response.content[:500]
print(response.content.decode())
"""


def exported_schema(project: Path, out: Path, **extra: str) -> dict:
    """`manage.py spectacular --validate --fail-on-warn --file …`, the way a pipeline exports the
    project's OpenAPI file: it must run, validate and warn of nothing."""
    done = manage(project, "spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json",
                  "--file", str(out), **extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text(encoding="utf-8"))


def served_schema(project: Path, **extra: str) -> dict:
    done = manage(project, "shell", "--no-imports", "-c", SERVED_SCHEMA, **extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes, list[str]]:
    """GET from a server on 127.0.0.1 as the proxy in front would send it (Host: HOST): the status,
    the headers (lower-case names), the body and every Set-Cookie."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers={"Host": HOST, **headers})
        response = connection.getresponse()
        body = response.read()
        cookies = response.msg.get_all("Set-Cookie") or []
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body, cookies
    finally:
        connection.close()
