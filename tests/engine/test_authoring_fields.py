"""Fields (authoring note §2): known/pending, coercion with JS rules, the wire schema."""

from __future__ import annotations

import math

import pytest

from falai_django.engine.fields import (
    DEFAULT_MAX_ASKS,
    UNSET,
    Drop,
    FieldDef,
    coerce_field,
    deep_equal,
    field_defs,
    is_known,
    js_json,
    js_number,
    js_string,
    pending_fields,
    strict_equal,
    to_wire_schema,
)

STRING = {"type": "string"}
NUMBER = {"type": "number"}
INTEGER = {"type": "integer"}
BOOLEAN = {"type": "boolean"}


@pytest.mark.parametrize(
    ("defn", "raw", "expected"),
    [
        # strings: unchanged (no trim), numbers/booleans through JS String()
        (STRING, "  Ana ", "  Ana "),
        (STRING, 1.5, "1.5"),
        (STRING, 3.0, "3"),
        (STRING, 42, "42"),
        (STRING, True, "true"),
        (STRING, False, "false"),
        (STRING, 1e21, "1e+21"),
        (STRING, 1e-7, "1e-7"),
        (STRING, 0.000001, "0.000001"),
        (STRING, 123456789012345680000.0, "123456789012345680000"),
        # numbers: first comma becomes a point, then JS Number()
        (NUMBER, 12, 12),
        (NUMBER, 2.5, 2.5),
        (NUMBER, "1,5", 1.5),
        (NUMBER, "1500,50", 1500.5),
        (NUMBER, "1.500", 1.5),
        (NUMBER, " 42 ", 42),
        (NUMBER, "1e3", 1000),
        (NUMBER, "0x10", 16),
        (NUMBER, "", 0),
        (NUMBER, "   ", 0),
        (NUMBER, ".5", 0.5),
        (NUMBER, "-3", -3),
        # integers: as number, then truncated toward zero
        (INTEGER, "7", 7),
        (INTEGER, "7,9", 7),
        (INTEGER, -7.9, -7),
        (INTEGER, 3.0, 3),
        # booleans: words, trimmed and lower-cased
        (BOOLEAN, True, True),
        (BOOLEAN, False, False),
        (BOOLEAN, "sim", True),
        (BOOLEAN, " SIM ", True),
        (BOOLEAN, "yes", True),
        (BOOLEAN, "true", True),
        (BOOLEAN, "1", True),
        (BOOLEAN, "não", False),
        (BOOLEAN, "NÃO", False),
        (BOOLEAN, "nao", False),
        (BOOLEAN, "no", False),
        (BOOLEAN, "false", False),
        (BOOLEAN, "0", False),
    ],
)
def test_coercion_table(defn, raw, expected):
    value = coerce_field(defn, raw)
    assert not isinstance(value, Drop)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("defn", "raw"),
    [
        (STRING, {"a": 1}),
        (STRING, ["a"]),
        (NUMBER, "1.500,50"),
        (NUMBER, "abc"),
        (NUMBER, "Infinity"),
        (NUMBER, "inf"),
        (NUMBER, "nan"),
        (NUMBER, "1_000"),
        (NUMBER, math.inf),
        (NUMBER, math.nan),
        (NUMBER, True),
        (NUMBER, ["1"]),
        (INTEGER, "-0x10"),
        (BOOLEAN, 1),
        (BOOLEAN, 0),
        (BOOLEAN, "talvez"),
        (BOOLEAN, "s"),
    ],
)
def test_coercion_drops_bad_values(defn, raw):
    assert coerce_field(defn, raw) == Drop("bad-value")
    assert coerce_field(defn, raw).code == "bad-value"


def test_enum_membership_is_strict():
    sizes = {"type": "string", "enum": ["1-10", "11-50"]}
    assert coerce_field(sizes, "1-10") == "1-10"
    assert coerce_field(sizes, "51-200").code == "not-in-enum"

    numbered = {"type": "number", "enum": [1, 2]}
    assert coerce_field(numbered, "1") == 1  # coerced first, then compared
    assert coerce_field(numbered, 2.0) == 2
    assert coerce_field(numbered, 3).code == "not-in-enum"

    mixed = {"type": "string", "enum": ["1", "2"]}
    assert coerce_field(mixed, 1) == "1"  # String(1) is "1"

    # True never equals 1, whatever Python's `True in [1]` says
    one = {"type": "boolean", "enum": [1]}
    assert coerce_field(one, True).code == "not-in-enum"
    assert coerce_field(one, "sim").code == "not-in-enum"


def test_coercion_accepts_field_def_objects():
    defn = FieldDef.from_dict("n", {"type": "number", "enum": [1.5]})
    assert defn.coerce("1,5") == 1.5
    assert coerce_field(defn, "2").code == "not-in-enum"


def test_known_means_not_missing_none_or_empty():
    assert not is_known(None)
    assert not is_known("")
    assert not is_known(UNSET)
    for value in (0, False, " ", [], "x", 0.0):
        assert is_known(value)


def test_pending_fields_skip_known_and_exhausted():
    data = {"nome": "Ana", "empresa": "", "confirmado": False}
    collect = ["nome", "empresa", "tamanho", "confirmado"]
    assert pending_fields(collect, data, {}) == ["empresa", "tamanho"]
    assert pending_fields(collect, data, {"tamanho": DEFAULT_MAX_ASKS}) == ["empresa"]
    assert pending_fields(collect, data, {"tamanho": 1}, max_asks=2) == ["empresa", "tamanho"]
    assert pending_fields(collect, data, {"tamanho": 2}, max_asks=2) == ["empresa"]
    assert pending_fields(None, data) == []
    assert DEFAULT_MAX_ASKS == 3


def test_extract_defaults_by_type():
    defs = field_defs({
        "nome": {"type": "string"},
        "ok": {"type": "boolean"},
        "qtd": {"type": "integer", "extract": "asked"},
        "sim": {"type": "boolean", "extract": "anywhere", "label": "Sim?"},
    })
    assert [d.extract for d in defs.values()] == ["anywhere", "asked", "asked", "anywhere"]
    assert defs["sim"].label == "Sim?"


def test_wire_schema_allow_list():
    defs = {
        "nome": {"type": "string", "description": "Nome", "ask": "Pergunte", "label": "Nome", "extract": "asked"},
        "tamanho": {"type": "string", "enum": ["1-10", "11-50"], "description": ""},
    }
    assert to_wire_schema(defs) == {
        "type": "object",
        "properties": {
            "nome": {"type": "string", "description": "Nome"},
            "tamanho": {"type": "string", "enum": ["1-10", "11-50"]},
        },
        "required": ["nome", "tamanho"],
        "additionalProperties": False,
    }


def test_wire_schema_parameters_optional_and_arrays():
    params = {
        "message": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a"], "label": "x"}, "optional": True},
    }
    schema = to_wire_schema(params)
    assert schema["required"] == ["message"]
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string", "enum": ["a"]}}

    nullable = to_wire_schema(params, nullable=True)
    assert nullable["required"] == ["message", "tags"]
    assert nullable["properties"]["message"] == {"type": ["string", "null"]}
    # items are never nullable
    assert nullable["properties"]["tags"] == {"type": ["array", "null"], "items": {"type": "string", "enum": ["a"]}}


def test_wire_schema_nullable_keeps_enum_without_null():
    schema = to_wire_schema({"t": {"type": "string", "enum": ["a"]}}, nullable=True)
    assert schema["properties"]["t"] == {"type": ["string", "null"], "enum": ["a"]}


def test_js_helpers():
    assert js_number("0b11") == 3
    assert js_number("0o17") == 15
    assert math.isnan(js_number("12px"))
    assert js_number("-Infinity") == -math.inf
    assert js_string(None) == "null"
    assert js_string(-0.0) == "0"
    assert js_string(0.1 + 0.2) == "0.30000000000000004"
    assert js_string(-1.5e-10) == "-1.5e-10"
    assert js_json({"a": [1.0, "é", None]}) == '{"a":[1,"é",null]}'
    assert strict_equal(1, 1.0)
    assert not strict_equal(True, 1)
    assert not strict_equal(0, False)
    assert not strict_equal("1", 1)
    assert deep_equal({"a": [1, {"b": True}]}, {"a": [1.0, {"b": True}]})
    assert not deep_equal({"a": [1]}, {"a": [True]})
    assert not deep_equal({"a": 1}, {"a": 1, "b": 2})
    assert not deep_equal([1, 2], [1])
    assert not deep_equal(UNSET, None)
    assert deep_equal(None, None)


def test_build_schema_merges_field_rows():
    from falai_django.engine.errors import FlowConfigurationError
    from falai_django.engine.fields import build_schema

    merged = build_schema([
        {"id": "a", "fields": {"nome": {"type": "string"}, "porte": {"type": "string", "enum": ["P", "G"]}}},
        {"id": "b", "fields": {"nome": {"type": "string", "ask": "Nome?", "label": "Nome"}, "porte": {"type": "string"}}},
    ])
    assert merged == {
        "nome": {"type": "string", "ask": "Nome?", "label": "Nome"},
        "porte": {"type": "string", "enum": ["P", "G"]},
    }
    with pytest.raises(FlowConfigurationError) as err:
        build_schema([{"id": "a", "fields": {"x": {"type": "string"}}}, {"id": "b", "fields": {"x": {"type": "number"}}}])
    assert str(err.value).startswith(
        '[FlowConfigurationError] field "x" has two types: "string" in "a", "number" in "b". '
    )
    with pytest.raises(FlowConfigurationError) as err:
        build_schema([
            {"id": "a", "fields": {"x": {"type": "number", "enum": [1]}}},
            {"id": "b", "fields": {"x": {"type": "number", "enum": [True]}}},
        ])
    assert str(err.value).startswith('[FlowConfigurationError] field "x" has two option lists: in "a" and "b". ')
