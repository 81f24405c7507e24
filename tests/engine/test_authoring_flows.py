"""The normalized flow model (flows.py) the turn engine reads."""

from __future__ import annotations

from falai_django.engine.fields import UNSET
from falai_django.engine.flows import Flow, Next, canonical_flow, split_phrases, strip_nulls

FLOW = {
    "id": "tudo",
    "name": "Tudo",
    "description": "Quando o lead pede tudo",
    "anchor": "lead",
    "on": [
        {"message": ["quero tudo", " !só olhando ", "  ", "!"]},
        {"mention": [], "if": {"known": ["nome"]}},
        {"silence": "1.5h", "business_hours": True},
        {"event": "pago", "after": "5m"},
        {"message": [], "repeat": {"cooldown": "1d"}},
    ],
    "clear_on_start": ["confirmado"],
    "collect": ["nome"],
    "on_end": "stay",
    "tools": [],
    "instructions": [{"prompt": "Seja breve", "when": "sempre"}],
    "steps": [
        {"id": "c", "collect": ["nome"], "max_asks": 2, "question": "Nome?", "ask": {"nome": "?"},
         "branches": [{"when": "quer humano", "then": {"flow": "humano"}}, {"if_": {"known": ["x"]}, "then": "end"}]},
        {"id": "p", "prompt": "Oi", "tools": ["buscar"], "then": "c"},
        {"id": "s", "say": "Até", "once": True, "media": {"slug": "logo"}},
        {"id": "d", "do": "notify", "with": {"message": "{{data.nome}}"}, "on_fail": {"step": "c", "clear": ["nome"]}},
        {"id": "w", "wait": "1d", "business_hours": True, "else": "p"},
        {"id": "e", "wait": {"event": "pago", "up_to": "7d"}},
        {"id": "e2", "wait": {"event": "pago"}, "else": "c"},
        {"id": "i", "if": {"equals": {"ok": True}}},
        {"id": "f", "prompt": "Tchau", "then": {"flow": "{{context.next}}", "input": {"a": 1}}},
    ],
}


def test_flow_attributes_and_defaults():
    flow = Flow.from_dict(FLOW)
    assert (flow.id, flow.name, flow.anchor, flow.on_end) == ("tudo", "Tudo", "lead", "stay")
    assert flow.clear_on_start == ("confirmado",)
    assert flow.collect == ("nome",)
    assert flow.tools == ()
    assert flow.instructions[0].when == ("sempre",) and flow.instructions[0].kind == "should"
    assert flow.while_ is None
    bare = Flow.from_dict({"id": "x", "name": "X", "steps": []})
    assert (bare.anchor, bare.on_end, bare.tools, bare.collect, bare.on) == ("session", "end", None, None, ())
    assert bare.first_step is None


def test_triggers():
    on = Flow.from_dict(FLOW).on
    assert [t.kind for t in on] == ["message", "mention", "silence", "event", "message"]
    assert on[0].counts == ("quero tudo",) and on[0].excludes == ("só olhando",)
    assert not on[0].is_catch_all and on[4].is_catch_all
    assert on[1].is_code_only and on[1].if_ == {"known": ["nome"]}
    assert (on[2].silence_ms, on[2].business_hours) == (5_400_000, True)
    assert (on[3].event, on[3].after_ms) == ("pago", 300_000)
    assert [t.repeat_mode for t in on] == ["once", "once", "once", "always", "cooldown"]
    assert on[4].cooldown_ms == 86_400_000
    assert [t.index for t in on] == [0, 1, 2, 3, 4]


def test_steps():
    flow = Flow.from_dict(FLOW)
    kinds = [s.kind for s in flow.steps]
    assert kinds == ["talk", "talk", "say", "do", "wait", "wait_event", "wait_event", "if", "talk"]
    c, p, s, d, w, e, e2, i, f = flow.steps
    assert (c.max_asks, c.question, c.ask, c.outcome_kind, c.spec_kind) == (2, "Nome?", {"nome": "?"}, "collect", "collect")
    assert c.branches[0].kind == "when" and c.branches[0].then == Next("flow", flow="humano")
    assert c.branches[1].kind == "if" and c.branches[1].if_ == {"known": ["x"]} and c.branches[1].then.kind == "end"
    assert (p.outcome_kind, p.spec_kind, p.max_asks, p.tools, p.then) == ("prompt", "prompt", 3, ("buscar",), Next("step", step="c"))
    assert (s.say, s.once, s.media) == ("Até", True, {"slug": "logo"})
    assert (d.action, d.params) == ("notify", {"message": "{{data.nome}}"})
    assert d.on_fail == Next("step", step="c", clear=("nome",))
    assert (w.wait_ms, w.business_hours, w.else_) == (86_400_000, True, Next("step", step="p"))
    assert (e.event, e.up_to, e.up_to_ms, e.else_.kind, e.outcome_kind, e.spec_kind) == (
        "pago", "7d", 604_800_000, "end", "wait", "waitEvent")
    assert (e2.up_to, e2.up_to_ms, e2.else_.step) == ("30d", 2_592_000_000, "c")
    assert i.if_ == {"equals": {"ok": True}} and i.else_ == Next.end() and i.then is None
    assert f.then.kind == "flow" and f.then.flow == "{{context.next}}" and f.then.input == {"a": 1} and f.then.has_input
    assert not flow.step("p").then.has_input and Next.parse({"flow": "x"}).input is UNSET


def test_lookups():
    flow = Flow.from_dict(FLOW)
    assert flow.step("w").index == 4
    assert flow.step("nada") is None and flow.step(None) is None
    assert flow.step_after("w").id == "e" and flow.step_after("f") is None
    assert flow.first_trigger("message").index == 0
    assert [t.index for t in flow.triggers("message")] == [0, 4]
    assert flow.last_talk_step.id == "f"
    assert [s.id for s in flow.talk_steps] == ["c", "p", "f"]


def test_canonical_flow_and_helpers():
    canon = canonical_flow({"id": "x", "on_end": "stay", "onEnd": "end", "steps": [{"id": "a", "with_": {"max_asks": 1}}]})
    assert canon == {"id": "x", "onEnd": "end", "steps": [{"id": "a", "with": {"max_asks": 1}}]}  # user keys untouched
    assert strip_nulls({"a": None, "b": [None, {"c": None}]}) == {"b": [None, {}]}
    assert split_phrases(["  a ", "! b", "!", ""]) == (("a",), ("b",))


def test_an_empty_collect_list_is_a_prompt_at_run_time_and_collect_in_a_spec():
    from falai_django.engine.spec import to_spec, validate_flow

    f = {"id": "x", "name": "X", "steps": [{"id": "a", "collect": []}]}
    assert validate_flow(f, {"fields": {}}).warnings == []  # collect is present, so it does something
    step = Flow.from_dict(f).steps[0]
    assert (step.kind, step.collect, step.outcome_kind, step.spec_kind) == ("talk", (), "prompt", "collect")
    assert to_spec(f)["steps"][0]["kind"] == "collect"
