"""The fast substring test in front of the JS-number regex never changes its answer."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from falai_django.engine.fields import _UNLIKE_JS_NUMBER, unlike_js_numbers
from falai_django.engine.session import Session

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet="ae+-.0123456789,}] :x", max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_the_hint_agrees_with_the_regex(value):
    text = json.dumps(value, separators=(",", ":"))
    assert unlike_js_numbers(text) == (_UNLIKE_JS_NUMBER.search(text) is not None)


def test_a_session_with_whole_floats_is_written_as_javascript_writes_it():
    session = Session.from_json({"id": "s", "v": 4, "version": 1, "data": {"x": 1.0, "y": 1e16, "z": 2.5},
                                 "runs": [], "claims": {}, "inputs": [], "metadata": {}})
    assert '"data":{"x":1,"y":10000000000000000,"z":2.5}' in session.to_json_text()


def _blob(**parts):
    run = {"id": "f#k", "flowId": "f", "anchor": "s", "dedupeKey": "f:s:", "stepId": "a", "status": "waiting",
           "trigger": {"kind": "start", "key": "k"}, "hop": 0, "startedAt": "2026-01-01T00:00:00.000Z",
           "asked": {}, "visits": {}, "outcomes": []}
    run.update(parts.pop("run", {}))
    blob = {"id": "s", "v": 4, "version": 1, "data": {}, "runs": [run], "claims": {}, "inputs": [], "metadata": {}}
    blob.update(parts)
    return Session.from_json(blob)


@given(st.sampled_from([
    {"metadata": {"deep": [{"n": 3.0}]}},
    {"claims": {"c": {"at": "2026-01-01T00:00:00.000Z", "w": 1.0}}},
    {"run": {"input": {"valor": 1500.0}}},
    {"run": {"trigger": {"kind": "event", "key": "k", "payload": [1e16]}}},
    {"run": {"trigger": {"kind": "event", "key": "k", "extra": 2.0}}},
    {"run": {"waiting": {"kind": "timer", "setAt": "2026-01-01T00:00:00.000Z", "extra": 7.0}}},
    {"history": [{"role": "user", "content": "oi", "score": 1.0}]},
]))
def test_a_whole_float_in_any_free_form_part_is_written_as_javascript_writes_it(parts):
    # Where the float sits decides whether the text is looked at: every place must be seen.
    text = _blob(**parts).to_json_text()
    assert json.loads(text) == json.loads(json.dumps(_blob(**parts).to_json()))
    assert not _UNLIKE_JS_NUMBER.search(text), text


def test_a_session_without_floats_is_not_scanned(monkeypatch):
    from falai_django.engine import session as module

    def scanned(text):
        raise AssertionError("a session with no float was scanned")

    monkeypatch.setattr(module, "unlike_js_numbers", scanned)
    text = _blob(data={"n": 1, "s": "1.0,"}, run={"input": {"k": [1, "e+16"]}}).to_json_text()
    assert '"data":{"n":1,"s":"1.0,"}' in text
