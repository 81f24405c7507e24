"""The README's settings reference gives every key's default, and it is the library's own
(`conf.DEFAULTS`, `conf.WHATSAPP_DEFAULTS`), read from README.md itself; and the WhatsApp
section tells `make run` users which command already runs what."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from falai_django import conf

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (`[A-Z_]+`(?: / `[A-Z_]+`)*) \| ([^|]+) \|", re.M)
REQUIRED = "— (required)"


def table_after(heading: str) -> dict[str, str]:
    """{key: its default cell} of the first table after `heading` (rows `| \\`KEY\\` | default |`)."""
    start = README.index(heading)
    table = README[start:].split("\n\n| ", 1)[1].split("\n\n", 1)[0]
    rows: dict[str, str] = {}
    for keys, default in ROW.findall("| " + table):
        names = re.findall(r"`([A-Z_]+)`", keys)
        values = [default.strip()] if len(names) == 1 else [v.strip() for v in default.split(" / ")]
        assert len(values) == len(names), (keys, default)
        rows.update(zip(names, values, strict=True))
    return rows


def literal(cell: str) -> object:
    code = re.fullmatch(r"`([^`]+)`", cell)
    assert code, f"the default {cell!r} is not written as a value"
    return ast.literal_eval(code.group(1))


@pytest.mark.library_defaults
def test_every_falai_key_has_its_default_in_the_table():
    rows = table_after("## Settings reference")
    assert set(rows) == set(conf.DEFAULTS), set(rows) ^ set(conf.DEFAULTS)
    for key, default in conf.DEFAULTS.items():
        if key == "AGENT":
            assert rows[key] == REQUIRED
        else:
            assert literal(rows[key]) == default, (key, rows[key], default)


def test_every_whatsapp_key_has_its_default_in_the_table():
    rows = table_after("`FALAI[\"WHATSAPP\"]`, when set, is read over these defaults")
    assert set(rows) == set(conf.WHATSAPP_DEFAULTS), set(rows) ^ set(conf.WHATSAPP_DEFAULTS)
    for key, default in conf.WHATSAPP_DEFAULTS.items():
        if default == "":
            assert rows[key] == REQUIRED, key
        else:
            assert literal(rows[key]) == default, (key, rows[key], default)


def test_the_whatsapp_snippet_suggests_the_library_s_language_default():
    section = README[README.index("## Going live on WhatsApp"):README.index("## Testing your own flows")]
    suggested = re.findall(r'"LANGUAGE": "(\w+)"', section)
    assert suggested == [conf.WHATSAPP_DEFAULTS["LANGUAGE"]], suggested


def test_the_whatsapp_steps_say_make_run_already_runs_the_workers():
    step = re.search(r"^4\. (.*?)^5\. ", README[README.index("## Going live on WhatsApp"):], re.S | re.M).group(1)
    make_run = re.search(r"\*\*`make run`\*\*[^\n]*\n(?:   [^\n]*\n)*", step).group(0)
    assert "already runs all three" in make_run and "Start nothing else" in make_run
    for process in ("qcluster", "falai_dispatch_wakes"):
        assert process in make_run
