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
