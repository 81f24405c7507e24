"""Fields (authoring note §2): known/pending, coercion table §2.3, extract defaults §2.4,
wire schema §2.5, build_schema §2.6. Written from the spec alone."""

from __future__ import annotations

import math

import pytest

from falai_django import FlowConfigurationError
from falai_django.engine.fields import (
    build_schema,
    coerce_field,
    field_defs,
    is_known,
    pending_fields,
    to_wire_schema,
)


def drop_code(result):
    return getattr(result, "code", None)


S = {"type": "string"}
N = {"type": "number"}
INT = {"type": "integer"}
B = {"type": "boolean"}


# ----------------------------------------------------------------------------- known / pending

@pytest.mark.parametrize("value", [0, False, " ", "x", 0.0, [], {}])
def test_known(value):
    assert is_known(value)


@pytest.mark.parametrize("value", [None, ""])
def test_not_known(value):
    assert not is_known(value)


def test_pending_order_known_and_max_asks():
    data = {"a": "x", "c": 0}
    assert pending_fields(["d", "a", "b", "c"], data) == ["d", "b"]
    assert pending_fields(["d", "b"], {}, {"d": 3}) == ["b"]          # default maxAsks 3
    assert pending_fields(["d", "b"], {}, {"d": 2}) == ["d", "b"]
    assert pending_fields(["d", "b"], {}, {"d": 1}, 1) == ["b"]


def test_extract_defaults():
    defs = field_defs({"s": S, "n": N, "i": INT, "b": B, "b2": {"type": "boolean", "extract": "anywhere"},
                       "s2": {"type": "string", "extract": "asked"}})
    assert [defs[k].extract for k in ("s", "n", "i", "b", "b2", "s2")] == [
        "anywhere", "anywhere", "anywhere", "asked", "anywhere", "asked"]


# ----------------------------------------------------------------------------- string

@pytest.mark.parametrize(("raw", "out"), [
    ("abc", "abc"), ("  pad  ", "  pad  "), (1.5, "1.5"), (3.0, "3"), (3, "3"), (True, "true"),
    (False, "false"), (0, "0"), (-2.5, "-2.5"), (1e21, "1e+21"), (0.1, "0.1"), (1e-7, "1e-7"),
    (123456789012, "123456789012"),
])
def test_string_coercion(raw, out):
    assert coerce_field(S, raw) == out
    assert isinstance(coerce_field(S, raw), str)


@pytest.mark.parametrize("raw", [{"a": 1}, ["a"], []])
def test_string_bad_value(raw):
    assert drop_code(coerce_field(S, raw)) == "bad-value"


# ----------------------------------------------------------------------------- number

@pytest.mark.parametrize(("raw", "out"), [
    (1500.5, 1500.5), (3, 3), ("1500,50", 1500.5), ("1,5", 1.5), ("1.500", 1.5), (" 42 ", 42),
    ("", 0), (" ", 0), ("0x10", 16), ("1e3", 1000), ("-2", -2), (".5", 0.5), ("5.", 5),
    ("+3", 3), ("0b11", 3), ("0o17", 15), ("1,5,5", None),
])
def test_number_coercion(raw, out):
    result = coerce_field(N, raw)
    if out is None:
        assert drop_code(result) == "bad-value"
    else:
        assert result == out
        assert not isinstance(result, bool)


@pytest.mark.parametrize("raw", [
    "1.500,50", "abc", "１", "Infinity", "-Infinity", "inf", "nan", "NaN", "1_000", "R$ 10", "10 reais",
    True, False, math.nan, math.inf, -math.inf, {"a": 1}, [1],
])
def test_number_bad_value(raw):
    assert drop_code(coerce_field(N, raw)) == "bad-value"


# ----------------------------------------------------------------------------- integer

@pytest.mark.parametrize(("raw", "out"), [
    (3.9, 3), (-3.9, -3), ("2,7", 2), ("-0,5", 0), ("10", 10), (7, 7), ("1e3", 1000), (" ", 0),
])
def test_integer_truncates(raw, out):
    result = coerce_field(INT, raw)
    assert result == out
    assert isinstance(result, int) and not isinstance(result, bool)


@pytest.mark.parametrize("raw", [True, "x", math.nan, "Infinity", "1.500,50"])
def test_integer_bad_value(raw):
    assert drop_code(coerce_field(INT, raw)) == "bad-value"


# ----------------------------------------------------------------------------- boolean

@pytest.mark.parametrize("raw", [True, "true", "TRUE", " Sim ", "sim", "yes", "Yes", "1", " 1 "])
def test_boolean_true(raw):
    assert coerce_field(B, raw) is True


@pytest.mark.parametrize("raw", [False, "false", "não", "NÃO", "nao", "no", "No", "0", " Não "])
def test_boolean_false(raw):
    assert coerce_field(B, raw) is False


@pytest.mark.parametrize("raw", [1, 0, 1.0, "talvez", "y", "n", "s", "verdadeiro", {"a": 1}, [True]])
def test_boolean_bad_value(raw):
    assert drop_code(coerce_field(B, raw)) == "bad-value"


# ----------------------------------------------------------------------------- enum

def test_enum_strict_membership():
    e = {"type": "string", "enum": ["1-10", "11-50", "1"]}
    assert coerce_field(e, "1-10") == "1-10"
    assert drop_code(coerce_field(e, "1-10 ")) == "not-in-enum"
    assert coerce_field(e, 1) == "1"  # String(1) then member
    n = {"type": "number", "enum": [1, 2.5]}
    assert coerce_field(n, "1") == 1
    assert coerce_field(n, 1.0) == 1
    assert coerce_field(n, "2,5") == 2.5
    assert drop_code(coerce_field(n, 3)) == "not-in-enum"
    assert drop_code(coerce_field(n, True)) == "bad-value"
    sn = {"type": "string", "enum": [1, 2]}
    assert drop_code(coerce_field(sn, "1")) == "not-in-enum"  # "1" is not 1


def test_true_never_equals_one_in_enum():
    b = {"type": "boolean", "enum": [1, 0]}
    assert drop_code(coerce_field(b, True)) == "not-in-enum"
    assert drop_code(coerce_field(b, "sim")) == "not-in-enum"
    i = {"type": "integer", "enum": [True, 1]}
    assert coerce_field(i, 1) == 1


# ----------------------------------------------------------------------------- wire schema

DEFS = {
    "nome": {"type": "string", "description": "Nome", "ask": "Pergunte", "label": "Nome", "extract": "anywhere"},
    "porte": {"type": "string", "enum": ["a", "b"], "description": ""},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["x"], "label": "L"}, "optional": True},
    "n": {"type": "integer", "optional": True},
}


def test_wire_schema_plain():
    w = to_wire_schema(DEFS)
    assert w == {
        "type": "object",
        "properties": {
            "nome": {"type": "string", "description": "Nome"},
            "porte": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["x"]}},
            "n": {"type": "integer"},
        },
        "required": ["nome", "porte"],
        "additionalProperties": False,
    }
    assert list(w) == ["type", "properties", "required", "additionalProperties"]


def test_wire_schema_nullable():
    w = to_wire_schema(DEFS, nullable=True)
    assert w["required"] == ["nome", "porte", "tags", "n"]
    assert w["properties"]["nome"] == {"type": ["string", "null"], "description": "Nome"}
    assert w["properties"]["porte"] == {"type": ["string", "null"], "enum": ["a", "b"]}  # enum not extended
    assert w["properties"]["tags"]["type"] == ["array", "null"]
    assert w["properties"]["tags"]["items"] == {"type": "string", "enum": ["x"]}  # items never nullable
    assert w["additionalProperties"] is False


def test_wire_schema_does_not_mutate_enum_list():
    enum = ["a", "b"]
    w = to_wire_schema({"x": {"type": "string", "enum": enum}})
    w["properties"]["x"]["enum"].append("c")
    assert enum == ["a", "b"]


# ----------------------------------------------------------------------------- build_schema

def test_build_schema_merges_first_wins():
    merged = build_schema([
        {"id": "f1", "fields": {"nome": {"type": "string"}, "porte": {"type": "string", "enum": ["a"]}}},
        {"id": "f2", "fields": {"nome": {"type": "string", "ask": "A", "label": "L"}, "porte": {"type": "string"}}},
    ])
    assert merged["nome"]["ask"] == "A" and merged["nome"]["label"] == "L"
    assert merged["porte"]["enum"] == ["a"]


def test_build_schema_type_conflict():
    with pytest.raises(FlowConfigurationError) as exc:
        build_schema([{"id": "f1", "fields": {"x": {"type": "string"}}}, {"id": "f2", "fields": {"x": {"type": "number"}}}])
    assert 'field "x" has two types: "string" in "f1", "number" in "f2"' in str(exc.value)


def test_build_schema_enum_conflict():
    with pytest.raises(FlowConfigurationError) as exc:
        build_schema([{"id": "f1", "fields": {"x": {"type": "string", "enum": ["a"]}}},
                      {"id": "f2", "fields": {"x": {"type": "string", "enum": ["b"]}}}])
    assert 'field "x" has two option lists' in str(exc.value)
