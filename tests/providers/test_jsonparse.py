"""Lenient envelope parsing (persistence-and-LLM note §6.3)."""

from __future__ import annotations

import pytest

from falai_django.llm.jsonparse import (
    envelope_of,
    extract_embedded_json_object,
    is_json_shaped,
    is_record,
    parse_json_response,
    try_parse_json_response,
)


def test_plain_object_parses():
    assert parse_json_response('{"message": "oi", "nome": null}') == {"message": "oi", "nome": None}


@pytest.mark.parametrize("fence", ["```json\n{\"a\": 1}\n```", "```\n{\"a\": 1}\n```", "  ```json{\"a\": 1}```  "])
def test_surrounding_fence_is_stripped(fence):
    assert parse_json_response(fence) == {"a": 1}


def test_raw_newlines_inside_strings_are_repaired():
    text = '{\n"message": "Boa escolha!\nÀ vista: R$ 3.149\ttotal"\n}'
    assert parse_json_response(text) == {"message": "Boa escolha!\nÀ vista: R$ 3.149\ttotal"}


def test_stray_quote_never_becomes_a_reply():
    assert try_parse_json_response('{"message": "ele disse "oi" e saiu"}') is None


def test_javascript_rejects_nan_and_so_do_we():
    assert try_parse_json_response('{"a": NaN}') is None
    assert try_parse_json_response("Infinity") is None


def test_failure_raises_value_error_and_try_returns_none():
    with pytest.raises(ValueError, match="Failed to parse JSON response"):
        parse_json_response("not json")
    with pytest.raises(ValueError):
        parse_json_response("")
    assert try_parse_json_response("not json") is None
    assert try_parse_json_response('{"message": "cut') is None


def test_non_object_json_is_returned_as_is():
    assert try_parse_json_response("[1, 2]") == [1, 2]
    assert try_parse_json_response("42") == 42


def test_embedded_object_after_prose():
    text = 'Claro! Aqui está. {"message": "Olá {nome}", "toolCalls": []} obrigado'
    assert extract_embedded_json_object(text) == {"message": "Olá {nome}", "toolCalls": []}


def test_embedded_skips_braces_that_do_not_parse():
    assert extract_embedded_json_object('a {not json} then {"ok": true}') == {"ok": True}
    assert extract_embedded_json_object('brace in a string: {"m": "}{"}') == {"m": "}{"}


def test_embedded_returns_none_for_prose_or_a_truncated_envelope():
    assert extract_embedded_json_object("só um { solto") is None
    assert extract_embedded_json_object('{"message": "cut') is None
    assert extract_embedded_json_object("") is None
    assert extract_embedded_json_object("[1, 2]") is None


def test_embedded_object_tolerates_raw_newlines():
    assert extract_embedded_json_object('x {"message": "a\nb"} y') == {"message": "a\nb"}


def test_json_shaped():
    assert is_json_shaped('  {"message"')
    assert is_json_shaped("```json\n")
    assert not is_json_shaped("Olá {nome}")
    assert not is_json_shaped("")


def test_is_record():
    assert is_record({})
    assert not is_record([])
    assert not is_record(None)
    assert not is_record("{}")


def test_envelope_prefers_structured_then_whole_text_then_embedded():
    assert envelope_of({"message": "a"}, '{"message": "b"}') == {"message": "a"}
    assert envelope_of(None, '```json\n{"message": "b"}\n```') == {"message": "b"}
    assert envelope_of(None, 'Oi! {"message": "c"}') == {"message": "c"}
    assert envelope_of(None, "texto puro") is None
    assert envelope_of(None, "") is None
    assert envelope_of(None, "[1]") is None
