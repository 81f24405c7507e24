"""Predicates and conditions (authoring note §6.0) and the action context."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from falai_django.engine.errors import FlowConfigurationError
from falai_django.engine.predicates import (
    ActionContext,
    Condition,
    PredicateContext,
    evaluate,
    silenced_reason,
)

NOW = datetime(2026, 9, 20, 10, 0, tzinfo=UTC)


def ctx(data=None, **kw):
    return PredicateContext(data=data if data is not None else {}, now=NOW, **kw)


def test_empty_and_missing_predicates_hold():
    assert evaluate(None, ctx())
    assert evaluate({}, ctx())
    assert evaluate({"equals": None, "known": None}, ctx())  # None arguments are skipped


def test_equals_is_strict_and_structural():
    data = {"confirmado": True, "qtd": 1, "tags": ["a", "b"], "meta": {"x": 1}}
    assert evaluate({"equals": {"confirmado": True}}, ctx(data))
    assert not evaluate({"equals": {"confirmado": 1}}, ctx(data))  # True is not 1
    assert not evaluate({"equals": {"qtd": True}}, ctx(data))
    assert evaluate({"equals": {"qtd": 1.0}}, ctx(data))
    assert not evaluate({"equals": {"qtd": "1"}}, ctx(data))
    assert evaluate({"equals": {"tags": ["a", "b"]}}, ctx(data))
    assert not evaluate({"equals": {"tags": ["b", "a"]}}, ctx(data))
    assert evaluate({"equals": {"meta": {"x": 1}}}, ctx(data))
    assert not evaluate({"equals": {"meta": {"x": 1, "y": None}}}, ctx(data))
    assert not evaluate({"equals": {"ausente": None}}, ctx(data))  # missing is not null
    # templates are not rendered inside equals
    assert not evaluate({"equals": {"qtd": "{{context.x}}"}}, ctx(data, context={"x": 1}))


def test_known_uses_is_known():
    data = {"nome": "Ana", "zero": 0, "vazio": "", "nulo": None}
    assert evaluate({"known": ["nome", "zero"]}, ctx(data))
    assert not evaluate({"known": ["nome", "vazio"]}, ctx(data))
    assert not evaluate({"known": ["nulo"]}, ctx(data))
    assert not evaluate({"known": ["ausente"]}, ctx(data))


def test_silenced_is_the_only_negation():
    assert evaluate({"silenced": True}, ctx(silenced="humano"))
    assert not evaluate({"silenced": False}, ctx(silenced="humano"))
    assert evaluate({"silenced": False}, ctx())
    assert not evaluate({"silenced": True}, ctx())


def test_keys_are_anded():
    data = {"nome": "Ana", "vip": True}
    assert evaluate({"known": ["nome"], "equals": {"vip": True}, "silenced": False}, ctx(data))
    assert not evaluate({"known": ["nome"], "equals": {"vip": False}}, ctx(data))


def test_named_conditions_get_ctx_and_arg():
    seen = []

    def check(c, arg):
        seen.append((c.context["plano"], arg))
        return c.context["plano"] == arg

    conditions = {"plano": Condition(check=check), "sempre": {"check": lambda c, a: True}, "bare": lambda c, a: a}
    assert evaluate({"plano": "pro"}, ctx(context={"plano": "pro"}), conditions)
    assert not evaluate({"plano": "free"}, ctx(context={"plano": "pro"}), conditions)
    assert seen == [("pro", "pro"), ("pro", "free")]
    assert evaluate({"sempre": 1, "bare": True}, ctx(), conditions)
    assert not evaluate({"bare": False}, ctx(), conditions)


def test_unknown_condition_raises_at_evaluation():
    with pytest.raises(FlowConfigurationError) as err:
        evaluate({"vip": True}, ctx(), {})
    assert str(err.value).startswith(
        '[FlowConfigurationError] unknown condition "vip": it is not one of the agent\'s conditions.'
    )


def test_functions_receive_the_context():
    got = []
    assert evaluate(lambda c: got.append(c) or c.data.get("n") == 2, ctx({"n": 2}, input={"a": 1}, run="r"))
    assert got[0].input == {"a": 1}
    assert got[0].run == "r"
    assert got[0].now == NOW
    assert not evaluate(lambda c: 0, ctx())


def test_silenced_reason_of_every_form():
    assert silenced_reason(None) is None
    assert silenced_reason("humano") == "humano"
    assert silenced_reason({"reason": "janela", "skip": True}) == "janela"
    assert silenced_reason({"reason": "x", "understand": True}) == "x"


def test_action_context_set_merges_into_live_data():
    data = {"nome": "Ana", "empresa": "X"}
    patches = []
    c = ActionContext(data=data, key="triagem#m1:s:1", dedupe_key="triagem:5511:", on_set=patches.append)
    c.set({"empresa": "Y", "novo": 1})
    c.set({"nome": None})
    assert data == {"empresa": "Y", "novo": 1}
    assert patches == [{"empresa": "Y", "novo": 1}, {"nome": None}]
    assert c.key == "triagem#m1:s:1"
    assert c.dedupe_key == "triagem:5511:"
    assert c.silenced is None
