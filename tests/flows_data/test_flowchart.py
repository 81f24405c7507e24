"""The flow picture: steps as boxes, then / else / branches as labelled arrows, triggers on top,
targets outside the flow as their own boxes; text escaped; any JSON drawn without failing."""

from __future__ import annotations

import re

import pytest

from falai_django.flows.chart import flow_svg

SPEC = {
    "id": "triagem", "on": [{"message": []}, {"event": "pedido"}],
    "steps": [
        {"id": "quem", "kind": "collect", "collect": ["nome"],
         "branches": [{"when": "wants a human", "then": {"flow": "humano"}}]},
        {"id": "ok", "kind": "if", "if": {"known": ["nome"]}, "else": {"step": "quem", "clear": ["nome"]}},
        {"id": "tchau", "kind": "say", "say": "<script>alert(1)</script>", "then": "sumiu"},
    ],
}


def test_steps_triggers_and_every_kind_of_arrow():
    svg = flow_svg(SPEC)
    assert re.findall(r'<g class="step" data-step="([^"]+)"', svg) == ["quem", "ok", "tchau"]
    assert svg.count('<g class="trigger">') == 2 and "message: anything" in svg and "event: pedido" in svg
    assert re.findall(r'data-label="([^"]+)"', svg) == ["branch 1", "else", "then"]
    assert "flow humano" in svg and "missing step sumiu" in svg
    assert "<script>" not in svg and "&lt;script&gt;" in svg


@pytest.mark.parametrize("junk", [None, [], "x", {"steps": "no"}, {"steps": [1, {"id": 2}], "on": {"x": 1}}])
def test_anything_is_drawn_without_failing(junk):
    assert flow_svg(junk).startswith("<svg")
