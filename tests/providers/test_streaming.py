"""The message inside a streamed envelope (persistence-and-LLM note §4.2)."""

from __future__ import annotations

import json

import pytest

from falai_django.llm.streaming import StreamingMessageDecoder
from falai_django.llm.streaming import extract_message_so_far as extract


def feed_char_by_char(text: str) -> tuple[list[str], str]:
    decoder = StreamingMessageDecoder()
    deltas = []
    message = ""
    for end in range(1, len(text) + 1):
        message, delta = decoder.push(text[:end])
        deltas.append(delta)
    return deltas, message


@pytest.mark.parametrize("message", [
    "Olá, tudo bem?",
    'aspas "duplas", barra \\ e /barra',
    "linhas\nnovas\r\ttab \b\f",
    "emoji 😀 e acentuação ção",
    "",
])
def test_every_prefix_grows_monotonically_to_the_message(message):
    for ensure_ascii in (True, False):
        text = json.dumps({"flows": {"a": [1, {"message": "decoy"}]}, "message": message, "nome": None},
                          ensure_ascii=ensure_ascii)
        deltas, final = feed_char_by_char(text)
        assert final == message
        assert "".join(deltas) == message  # never a non-prefix reset


def test_escapes_are_decoded():
    assert extract(r'{"message": "a\"b\\c\/d\ne\tf\u00e9"}') == 'a"b\\c/d\ne\tfé'


def test_unknown_escape_passes_its_character():
    assert extract(r'{"message": "a\qb"}') == "aqb"


@pytest.mark.parametrize("partial", ['{"message": "ab\\', r'{"message": "ab\u', r'{"message": "ab\u00',
                                     r'{"message": "ab\u00e'])
def test_partial_escape_is_held_back(partial):
    assert extract(partial) == "ab"


def test_partial_surrogate_pair_is_held_back_then_joined():
    assert extract(r'{"message": "x\ud83d') == "x"
    assert extract(r'{"message": "x\ud83d\ude0') == "x"
    assert extract(r'{"message": "x\ud83d\ude00') == "x😀"


def test_message_prefix_while_the_string_is_open():
    assert extract('{"message": "Hel') == "Hel"
    assert extract('{"message"') == ""
    assert extract('{"message":') == ""
    assert extract('{"mess') == ""
    assert extract("{") == ""


def test_earlier_keys_are_skipped_and_incomplete_ones_block():
    assert extract('{"nome": "Ana", "n": 12, "ok": true, "x": null, "message": "oi"}') == "oi"
    assert extract('{"nome": "An') == ""
    assert extract('{"n": 12') == ""  # a primitive still streaming
    assert extract('{"obj": {"message": "decoy"') == ""


def test_nested_message_key_never_matches():
    assert extract('{"a": {"message": "decoy"}, "b": ["message"]}') == ""
    assert extract('{"a": {"message": "decoy"}, "message": "real"}') == "real"
    assert extract('{"note": "the message is here", "message": "real"}') == "real"


def test_null_or_non_string_message_yields_nothing():
    assert extract('{"message": null}') == ""
    assert extract('{"message": 12}') == ""
    assert extract('{"message": {"text": "x"}}') == ""


def test_object_without_message():
    assert extract('{"flows": {}}') == ""


def test_plain_text_passes_through_verbatim():
    assert extract("Olá, tudo bem?") == "Olá, tudo bem?"
    assert extract("  Olá") == "  Olá"
    assert extract("[1, 2]") == "[1, 2]"
    assert extract("") == ""


def test_fences():
    assert extract('```json\n{"message": "oi') == "oi"
    assert extract('```\n{"message": "oi"}\n```') == "oi"
    assert extract("```") == ""  # only backticks: maybe a fence
    assert extract("``") == ""
    assert extract("```json") == ""  # the opening line is still arriving
    assert extract("```json\nnot an object") == ""  # behind a fence nothing is shown
    assert extract("`code` in prose") == "`code` in prose"
    assert extract("``two`` ticks") == "``two`` ticks"


def test_decoder_deltas_and_non_prefix_anomaly():
    decoder = StreamingMessageDecoder()
    assert decoder.push('{"message": "Ol') == ("Ol", "Ol")
    assert decoder.push('{"message": "Olá') == ("Olá", "á")
    assert decoder.push('{"message": "Olá"}') == ("Olá", "")
    assert decoder.push('{"message": "Tchau"}') == ("Tchau", "Tchau")  # not an extension: whole message


def test_decoder_with_plain_text_yields_one_delta_per_growth():
    decoder = StreamingMessageDecoder()
    assert decoder.push("Olá") == ("Olá", "Olá")
    assert decoder.push("Olá mundo") == ("Olá mundo", " mundo")
