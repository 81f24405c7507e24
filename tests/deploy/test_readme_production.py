"""The README's "Production" section, followed as written on a fresh `startproject` that first
followed "Adding the app": its settings block appended, its deploy commands run in order (migrate,
collectstatic, check --deploy at warning level, the OpenAPI export), then its web server command
served behind a stand-in for the TLS proxy. The blocks are read from README.md itself."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import yaml
from newcomer.test_readme_adding_the_app import FENCE, ROOT, apply, startproject

from deploy.support import HOST, SECRET, environment, get, manage, served_schema, wait_listening
from falai_django.testing.postgres import free_port

SECTION = re.compile(r"^## Production\n(.*?)(?=^## )", re.S | re.M)
SETTINGS = "# myproject/settings.py — append, for production"


def section() -> str:
    found = SECTION.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, 'README.md has no section "## Production"'
    return found.group(1)


def block(first_line: str) -> str:
    found = [text for _language, text in FENCE.findall(section()) if text.startswith(first_line)]
    assert len(found) == 1, f"the Production section has {len(found)} blocks starting {first_line!r}"
    return found[0]


def lines(first_line: str) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in block(first_line).splitlines()[1:] if line.strip()]


def test_the_section_names_the_three_processes_and_the_deploy_steps():
    processes = [words[:3] for words in lines("# the three processes")]
    assert processes == [["gunicorn", "myproject.wsgi", "--bind"], ["python", "manage.py", "qcluster"],
                         ["python", "manage.py", "falai_dispatch_wakes"]], processes
    steps = [words[2] for words in lines("# in a terminal, in the folder with manage.py, at each deploy")
             if words[:2] == ["python", "manage.py"]]
    assert steps == ["migrate", "collectstatic", "check", "spectacular"], steps
    assert "#deployment-restarts-and-probes" in section()  # where the supervisors' recipes are


def test_a_project_deployed_by_the_section_passes_check_deploy_and_serves_over_https(tmp_path):
    (tmp_path / "site").mkdir()
    project = startproject(tmp_path / "site")
    apply(project)
    settings = project / "myproject" / "settings.py"
    settings.write_text(settings.read_text(encoding="utf-8") + "\n" + block(SETTINGS), encoding="utf-8")
    env = {"DJANGO_SECRET_KEY": SECRET, "DJANGO_ALLOWED_HOSTS": HOST, "FALAI_WEBHOOK_SECRET": "shared"}

    deploy = lines("# in a terminal, in the folder with manage.py, at each deploy")
    assert deploy[0][:2] == ["pip", "install"] and {"gunicorn", "whitenoise"} <= set(deploy[0])
    for words in deploy[1:]:
        done = manage(project, *words[2:], **env)
        assert done.returncode == 0, (words, done.stdout + done.stderr)
        if words[2] == "check":
            assert "no issues" in done.stdout + done.stderr, done.stdout + done.stderr
    assert (project / "staticfiles" / "staticfiles.json").is_file()
    exported = yaml.safe_load((project / "schema.yml").read_text(encoding="utf-8"))
    served = served_schema(project, **env)
    assert {p: ops for p, ops in exported["paths"].items() if p.startswith("/falai/")} == served["paths"]

    web = lines("# the three processes")[0]
    port = free_port()
    web[web.index("--bind") + 1] = f"127.0.0.1:{port}"
    web[web.index("--workers") + 1] = "1"
    log = tmp_path / "gunicorn.log"
    with log.open("a", encoding="utf-8") as output:
        server = subprocess.Popen([sys.executable, "-m", *web], cwd=project, env=environment(project, **env),
                                  stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, server, log)
        status, headers, _, _ = get(port, "/falai/playground/", {})
        assert status == 301 and headers["location"].startswith(f"https://{HOST}/"), (status, headers)
        status, _, body, _ = get(port, "/falai/health/live", {})
        assert status == 200 and json.loads(body) == {"status": "ok"}
        status, headers, body, cookies = get(port, "/admin/login/", {"X-Forwarded-Proto": "https"})
        assert status == 200 and "strict-transport-security" in headers
        assert all("Secure" in cookie for cookie in cookies), cookies
        statics = re.findall(r'(?:src|href)="(/static/[^"]+)"', body.decode())
        assert statics
        for url in statics:
            status, headers, content, _ = get(port, url, {"X-Forwarded-Proto": "https"})
            assert status == 200 and content and "immutable" in headers.get("cache-control", ""), url
    finally:
        server.terminate()
        server.wait(timeout=30)
