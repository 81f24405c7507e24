"""The README's promises: its testing example runs as written, and it names what exists."""

from __future__ import annotations

import re
from pathlib import Path

from django.urls import reverse

from falai_django import conf

README = Path(__file__).resolve().parents[2] / "README.md"


def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_testing_example_runs_as_written():
    block = re.search(r"<!-- readme-example:start -->\n```python\n(.*?)```\n<!-- readme-example:end -->",
                      readme(), re.DOTALL)
    assert block, "the README lost its marked testing example"
    exec(compile(block.group(1), str(README), "exec"), {"__name__": "readme_example"})


def test_the_two_commands_are_documented_and_exist():
    text = readme()
    assert "`make run`" in text and "`make test`" in text
    makefile = (README.parent / "Makefile").read_text()
    assert re.search(r"(?m)^run:", makefile) and re.search(r"(?m)^test:", makefile)


def test_every_setting_is_documented():
    text = readme()
    for key in conf.DEFAULTS:
        assert f"`{key}`" in text or f"`{key}` /" in text or f"/ `{key}`" in text, key


def test_every_api_route_is_documented():
    from falai_django import urls

    text = readme()
    for pattern in urls.urlpatterns:
        if getattr(pattern, "name", None) == "api-not-found":  # not a route to call: what any other API path answers
            assert "other path under `sessions/` or `flows/` is a JSON `404`" in text
            continue
        route = str(pattern.pattern).replace("<str:session_id>", "<id>").replace("<str:flow_id>", "<flow_id>")
        assert route.rstrip("/") in text, route
    assert reverse("falai:playground") == "/falai/playground/"


def test_every_management_command_is_documented():
    commands = (README.parent / "falai_django" / "management" / "commands").glob("falai_*.py")
    text = readme()
    for command in commands:
        assert command.stem in text, command.stem
