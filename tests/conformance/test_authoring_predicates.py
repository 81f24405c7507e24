"""Predicates and conditions (authoring note §6.0). Written from the spec alone."""

from __future__ import annotations

import pytest

from falai_django import FlowConfigurationError, falai
from falai_django.engine.predicates import PredicateContext, evaluate

f = falai()
seen = []
CONDITIONS = {
    "vip": f.condition(lambda ctx, arg: (seen.append(arg) or True) and ctx.context.get("vip") is True),
    "never": f.condition(lambda ctx, arg: False),
}


def ctx(data=None, context=None, silenced=None, **kw):
    return PredicateContext(context=context if context is not None else {}, data=data if data is not None else {},
                            silenced=silenced, **kw)


def test_empty_spec_and_none_hold():
    assert evaluate({}, ctx())
    assert evaluate(None, ctx())


@pytest.mark.parametrize(("pred", "data", "holds"), [
    ({"equals": {"a": 1}}, {"a": 1}, True),
    ({"equals": {"a": 1}}, {"a": 1.0}, True),
    ({"equals": {"a": 1}}, {"a": True}, False),
    ({"equals": {"a": True}}, {"a": 1}, False),
    ({"equals": {"a": 0}}, {"a": False}, False),
    ({"equals": {"a": "1"}}, {"a": 1}, False),
    ({"equals": {"a": "x"}}, {}, False),
    ({"equals": {"a": ["x", 1]}}, {"a": ["x", 1]}, True),
    ({"equals": {"a": ["x", 1]}}, {"a": ["x", True]}, False),
    ({"equals": {"a": {"k": 1}}}, {"a": {"k": 1}}, True),
    ({"equals": {"a": {"k": 1}}}, {"a": {"k": 1, "j": 2}}, False),
    ({"equals": {"a": 1, "b": "x"}}, {"a": 1, "b": "y"}, False),
    ({"equals": {"a": "{{context.x}}"}}, {"a": "{{context.x}}"}, True),
    ({"known": ["a", "b"]}, {"a": 0, "b": False}, True),
    ({"known": ["a"]}, {"a": ""}, False),
    ({"known": ["a"]}, {"a": None}, False),
    ({"known": ["a"]}, {}, False),
    ({"known": []}, {}, True),
])
def test_builtins(pred, data, holds):
    assert evaluate(pred, ctx(data)) is holds


def test_equals_values_not_rendered():
    assert not evaluate({"equals": {"a": "{{context.x}}"}}, ctx({"a": "v"}, {"x": "v"}))


def test_silenced():
    assert evaluate({"silenced": True}, ctx(silenced="humano"))
    assert not evaluate({"silenced": True}, ctx())
    assert evaluate({"silenced": False}, ctx())
    assert not evaluate({"silenced": False}, ctx(silenced="humano"))


def test_and_over_keys():
    p = {"known": ["a"], "silenced": False, "vip": None}
    assert evaluate(p, ctx({"a": 1}), CONDITIONS)
    assert not evaluate({"known": ["a"], "never": 1}, ctx({"a": 1}), CONDITIONS)


def test_named_condition_gets_ctx_and_raw_arg():
    seen.clear()
    assert evaluate({"vip": {"tier": [1, "x"]}}, ctx(context={"vip": True}), CONDITIONS)
    assert seen == [{"tier": [1, "x"]}]
    assert not evaluate({"vip": 1}, ctx(context={"vip": False}), CONDITIONS)


def test_function_predicate_gets_ctx():
    got = []
    assert evaluate(lambda c: got.append(c) or True, ctx({"a": 1}))
    assert got[0].data == {"a": 1}
    assert not evaluate(lambda c: False, ctx())


def test_unknown_condition_at_evaluation_raises():
    with pytest.raises(FlowConfigurationError) as exc:
        evaluate({"nope": 1}, ctx(), CONDITIONS)
    assert 'unknown condition "nope"' in str(exc.value)
    assert str(exc.value).startswith("[FlowConfigurationError] ")


def test_no_or_not_builtins():
    with pytest.raises(FlowConfigurationError):
        evaluate({"not": {"known": ["a"]}}, ctx())
    with pytest.raises(FlowConfigurationError):
        evaluate({"any": [{"known": ["a"]}]}, ctx())


def test_pred_ctx_attributes():
    c = PredicateContext()
    for name in ("context", "data", "input", "run", "silenced", "now"):
        assert hasattr(c, name)
