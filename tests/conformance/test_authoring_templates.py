"""Templates (authoring note §7). Written from the spec alone."""

from __future__ import annotations

import pytest

from falai_django.engine.templates import render, render_deep

SCOPE = {
    "data": {"nome": "Ana", "n": 3, "x": 1.5, "f": 3.0, "ok": True, "no": False, "vazio": "", "nulo": None,
             "lista": ["a", 1, True], "obj": {"a": 1, "b": "ç"}, "zero": 0},
    "context": {"lead": None, "empresa": {"nome": "Acme", "tags": ["x", "y"]}, "s": "txt"},
    "input": {"cidade": "Recife", "itens": [{"n": "um"}, {"n": "dois"}]},
}


@pytest.mark.parametrize(("tpl", "out"), [
    ("Oi {{data.nome}}!", "Oi Ana!"),
    ("Oi {{ data.nome }}!", "Oi Ana!"),
    ("Oi {{   data.nome}}", "Oi Ana"),
    ("{{data.n}}|{{data.x}}|{{data.f}}|{{data.ok}}|{{data.no}}|{{data.zero}}", "3|1.5|3|true|false|0"),
    ("{{data.lista}}", "a, 1, true"),
    ("{{data.obj}}", '{"a":1,"b":"ç"}'),
    ("{{context.empresa.nome}} {{context.empresa.tags}}", "Acme x, y"),
    ("{{input.cidade}} {{input.itens.1.n}}", "Recife dois"),
    ("{{context.empresa.tags.0}}", "x"),
    ("sem placeholders", "sem placeholders"),
])
def test_values(tpl, out):
    assert render(tpl, SCOPE) == out


@pytest.mark.parametrize("tpl", [
    "Oi {{data.sobrenome}}!",             # undefined
    "Oi {{data.nulo}}!",                  # ends in null
    "Oi {{data.nome.first}}!",            # walks through a non-object (string)
    "Oi {{data.n.x}}!",                   # through a number
    "Oi {{lead.name}}!",                  # unknown root
    "Oi {{input.itens.9.n}}!",            # index past the end
    "Oi {{input.itens.01.n}}!",           # not a canonical array index
    "Oi {{input.itens.-1.n}}!",
    "Oi {{context.nada.mais}}!",          # through undefined
    "Oi {{ data.nome x }}!",              # space inside the path: not a placeholder
])
def test_unknown_kept_verbatim(tpl):
    assert render(tpl, SCOPE) == tpl


def test_unknown_does_not_tidy():
    tpl = "Oi  {{data.zz}} , tudo  bem ?"
    assert render(tpl, SCOPE) == tpl


@pytest.mark.parametrize(("tpl", "out"), [
    ("Oi {{data.vazio}}, tudo bem?", "Oi, tudo bem?"),
    ("Oi {{context.lead.name}}!", "Oi!"),
    ("Olá {{data.vazio}} {{data.nome}} .", "Olá Ana."),
    ("a {{data.vazio}}\tb", "a b"),
    ("linha {{data.vazio}}\nnova  linha", "linha\nnova linha"),
    ("Oi {{data.vazio}} ; x {{data.vazio}} : y ! z ? w … ok", "Oi; x: y! z? w… ok"),
    ("  recuo {{data.vazio}}", "  recuo"),
    ("{{data.vazio}}", ""),
])
def test_blank_and_tidy(tpl, out):
    assert render(tpl, SCOPE) == out


def test_leading_indentation_kept_when_tidying():
    assert render("x{{data.vazio}}\n    indent  two", SCOPE) == "x\n    indent two"


def test_no_tidy_without_blank():
    assert render("Oi  {{data.nome}} , tudo", SCOPE) == "Oi  Ana , tudo"


def test_no_html_escape_and_literal_braces_survive():
    scope = {"data": {"h": "<b>&</b>"}, "context": None}
    assert render("{{data.h}} {{foo}} {{}}", scope) == "<b>&</b> {{foo}} {{}}"


def test_missing_root_values():
    assert render("{{input.x}}", {"data": {}, "context": {}}) == "{{input.x}}"


def test_render_deep():
    value = {"a": "{{data.nome}}", "b": ["{{data.n}}", 5, None, {"c": "{{input.cidade}}"}], "d": True}
    assert render_deep(value, SCOPE) == {"a": "Ana", "b": ["3", 5, None, {"c": "Recife"}], "d": True}
