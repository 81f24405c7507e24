"""Delta extraction from a streamed JSON envelope (engine-persistence-llm.md §4.2), rule by rule,
and the provider stream chunk contract (§4.3)."""

from __future__ import annotations

import json

import pytest

from falai_django.providers import StreamingMessageDecoder
from falai_django.providers import extract_message_so_far as x


def test_leading_whitespace_is_skipped():
    assert x('  \n\t{"message":"Oi"}') == "Oi"


def test_plain_text_passes_through_verbatim():
    assert x("Olá, tudo bem?") == "Olá, tudo bem?"
    assert x("") == ""
    # verbatim, leading whitespace included
    assert x("  oi") == "  oi"


def test_three_or_more_backticks_open_a_fence_whose_line_is_skipped():
    assert x('```json\n{"message":"Oi') == "Oi"
    assert x('````\n{"message":"Oi"}') == "Oi"
    # while the opening line is still arriving: ""
    assert x("```") == ""
    assert x("```js") == ""
    assert x("``") == ""  # could still become a fence


def test_one_or_two_backticks_are_prose():
    assert x("`code` aqui") == "`code` aqui"
    assert x("``dois`` aqui") == "``dois`` aqui"


def test_non_object_text_behind_a_fence_yields_empty():
    assert x("```\nOlá") == ""
    assert x("```text\nsó texto") == ""


def test_top_level_message_string_prefix_is_returned():
    assert x('{"message":"Hel') == "Hel"
    assert x('{"message": "Hello"') == "Hello"
    assert x('{"message":"Hello","nome":null}') == "Hello"
    assert x('{ "message" : "Hi') == "Hi"


def test_nothing_before_the_value_arrives():
    for partial in ["{", '{"', '{"mess', '{"message"', '{"message":', '{"message": ', '{"message":"']:
        assert x(partial) == ""


@pytest.mark.parametrize(
    ("escape", "char"),
    [('\\"', '"'), ("\\\\", "\\"), ("\\/", "/"), ("\\b", "\b"), ("\\f", "\f"), ("\\n", "\n"), ("\\r", "\r"),
     ("\\t", "\t"), ("\\u00e9", "é"), ("\\u0041", "A")],
)
def test_escapes_are_decoded(escape, char):
    assert x('{"message":"a' + escape + 'b') == "a" + char + "b"


def test_unknown_escape_passes_its_character_through():
    assert x('{"message":"a\\qb"}') == "aqb"


def test_dangling_backslash_and_partial_unicode_are_held_back():
    assert x('{"message":"ab\\') == "ab"
    assert x('{"message":"ab\\u') == "ab"
    assert x('{"message":"ab\\u00') == "ab"
    assert x('{"message":"ab\\u00e') == "ab"
    assert x('{"message":"ab\\u00e9') == "abé"


def test_surrogate_pair_becomes_one_character():
    assert x('{"message":"\\ud83d\\ude00!"}') == "😀!"


def test_earlier_keys_are_skipped_strings_objects_arrays_primitives():
    assert x('{"nome":"Ana","message":"Oi"}') == "Oi"
    assert x('{"a":{"b":[1,{"c":"}"}]},"message":"Oi"}') == "Oi"
    assert x('{"a":[1,2,"]"],"message":"Oi"}') == "Oi"
    assert x('{"n":12.5,"t":true,"z":null,"message":"Oi"}') == "Oi"
    assert x('{"s":"with \\"quote\\" and \\\\","message":"Oi"}') == "Oi"


def test_an_incomplete_earlier_value_yields_empty():
    assert x('{"nome":"An') == ""
    assert x('{"a":{"b":1') == ""
    assert x('{"a":[1,2') == ""
    assert x('{"n":12') == ""


def test_nested_message_key_or_word_inside_a_value_never_matches():
    assert x('{"data":{"message":"não"},"message":"sim"}') == "sim"
    assert x('{"data":{"message":"não"}') == ""
    assert x('{"note":"\\"message\\":\\"x\\"","nome":"A"}') == ""
    assert x('{"note":"message"}') == ""


def test_null_or_non_string_message_yields_empty():
    assert x('{"message":null}') == ""
    assert x('{"message":42}') == ""
    assert x('{"message":{"text":"x"}}') == ""
    assert x('{"message":["x"]}') == ""


def test_object_without_message_yields_empty():
    assert x('{"nome":"Ana"}') == ""
    assert x("{}") == ""


def test_decoder_delta_is_the_new_suffix():
    d = StreamingMessageDecoder()
    assert d.push('{"mess') == ("", "")
    assert d.push('{"message":"Ol') == ("Ol", "Ol")
    assert d.push('{"message":"Olá, ') == ("Olá, ", "á, ")
    assert d.push('{"message":"Olá, Ana"}') == ("Olá, Ana", "Ana")
    assert d.push('{"message":"Olá, Ana"}') == ("Olá, Ana", "")


def test_decoder_non_prefix_anomaly_gives_the_whole_message():
    d = StreamingMessageDecoder()
    d.push('{"message":"abc')
    assert d.push('{"message":"xyz') == ("xyz", "xyz")


def test_decoder_over_a_streamed_envelope_char_by_char_rebuilds_the_message():
    env = json.dumps({"nome": "Ana \"A\"", "message": "Olá!\nTudo bem? \u00e9 😀 \\ fim", "x": [1]}, ensure_ascii=True)
    d = StreamingMessageDecoder()
    out = ""
    for i in range(1, len(env) + 1):
        _, delta = d.push(env[:i])
        out += delta
    assert out == "Olá!\nTudo bem? é 😀 \\ fim"


def test_decoder_plain_text_stream_passes_through():
    d = StreamingMessageDecoder()
    deltas = [d.push(t)[1] for t in ["Ol", "Olá", "Olá!"]]
    assert deltas == ["Ol", "á", "!"]


def test_fenced_envelope_stream():
    d = StreamingMessageDecoder()
    text = '```json\n{"message":"Oi, Ana"}\n```'
    out = "".join(d.push(text[:i])[1] for i in range(1, len(text) + 1))
    assert out == "Oi, Ana"


def test_push_reads_as_upstreams_message_delta_pair():
    d = StreamingMessageDecoder()
    pushed = d.push('{"message":"Oi')
    message, delta = pushed
    assert (message, delta) == ("Oi", "Oi")
    assert pushed.message == "Oi" and pushed.delta == "Oi"
    assert pushed["message"] == "Oi" and pushed["delta"] == "Oi"
    assert pushed == {"message": "Oi", "delta": "Oi"}
