"""Templates (authoring note §7): value, unknown (kept), blank (removed and tidied)."""

from __future__ import annotations

from dataclasses import dataclass

from falai_django.engine.templates import has_template, render, render_deep, scope_of

SCOPE = {
    "data": {"nome": "Ana", "idade": 30, "nota": 1.5, "vip": True, "tags": ["a", "b"], "vazio": "", "nada": None},
    "context": {"lead": {"name": "Bia", "score": 0}, "empresa": None, "itens": [{"n": 1}, {"n": 2}]},
    "input": {"trecho": "concorrente X"},
}


def test_values_are_formatted_like_javascript():
    assert render("Oi {{data.nome}}!", SCOPE) == "Oi Ana!"
    assert render("{{ data.idade }} anos", SCOPE) == "30 anos"
    assert render("{{data.nota}} {{data.vip}}", SCOPE) == "1.5 true"
    assert render("tags: {{data.tags}}", SCOPE) == "tags: a, b"
    assert render("lead {{context.lead}}", SCOPE) == 'lead {"name":"Bia","score":0}'
    assert render("score {{context.lead.score}}", SCOPE) == "score 0"
    assert render("item {{context.itens.1.n}}", SCOPE) == "item 2"
    assert render('"{{input.trecho}}"', SCOPE) == '"concorrente X"'


def test_unknown_paths_keep_their_placeholder():
    assert render("Oi {{data.nomee}}", SCOPE) == "Oi {{data.nomee}}"
    assert render("{{lead.name}}", SCOPE) == "{{lead.name}}"  # not one of the three roots
    assert render("{{data.nada}}", SCOPE) == "{{data.nada}}"  # null at the end is unknown
    assert render("{{data.nome.first}}", SCOPE) == "{{data.nome.first}}"  # through a string
    assert render("{{context.itens.9.n}}", SCOPE) == "{{context.itens.9.n}}"
    assert render("{{input.x}}", {"data": {}}) == "{{input.x}}"  # no input at all (idle)
    assert render("{{context.x}}", scope_of(data={}, context=None)) == "{{context.x}}"
    assert render("{{ data.a b }}", SCOPE) == "{{ data.a b }}"  # spaces inside the path: no match


def test_blank_values_vanish_and_the_text_is_tidied():
    assert render("Olá {{data.vazio}}, tudo bem?", SCOPE) == "Olá, tudo bem?"
    # walking through a null is blank, not unknown
    assert render("Olá {{context.empresa.nome}}, tudo bem?", SCOPE) == "Olá, tudo bem?"
    assert render("a {{data.vazio}}  b", SCOPE) == "a b"
    assert render("fim {{data.vazio}}\nlinha  {{data.vazio}}", SCOPE) == "fim\nlinha"
    assert render("x {{data.vazio}} !", SCOPE) == "x!"


def test_tidy_only_runs_after_a_blank_substitution():
    assert render("a  b ,c {{data.nome}}", SCOPE) == "a  b ,c Ana"
    # indentation (spaces before the first visible character) survives tidying
    assert render("  - {{data.vazio}}item  x", SCOPE) == "  - item x"


def test_render_deep_renders_every_string():
    value = {"msg": "Oi {{data.nome}}", "list": ["{{data.idade}}", 3, None], "n": 1, "b": False}
    assert render_deep(value, SCOPE) == {"msg": "Oi Ana", "list": ["30", 3, None], "n": 1, "b": False}


def test_host_objects_stand_in_for_js_objects():
    @dataclass
    class Lead:
        name: str

    assert render("{{context.lead.name}}", {"context": {"lead": Lead("Caio")}}) == "Caio"


def test_has_template():
    assert has_template("{{data.x}}")
    assert not has_template("plain")
    assert not has_template(5)
