"""How deeply a JSON value nests, and the bound every request's JSON is held to (issue 28).

`FALAI["MAX_JSON_DEPTH"]` (default 32) bounds every JSON value a request carries: an event
payload, a start input, a message's context, a flow spec, the playground's payload, a signed
WhatsApp body. Depth counts arrays and objects: a scalar is 0 deep, `[]` and `{}` 1, `{"a": [1]}` 2.

An API body is the envelope of its values (`{"event": ..., "payload": <value>}`), so its text
may nest one level more than the limit (`check_body_text`): a payload exactly at the limit is
taken, as it is from a Python caller, and the value one level deeper is refused by name.

Everything here is iterative (no recursion), so a value nested a hundred thousand levels deep
is measured and refused with a sentence naming the limit, never a `RecursionError`. The checks
run before anything else walks the value, so the recursive walks after them (the serializers'
text check, the WhatsApp body's cleaning, the JSON encoder) only ever see bounded values.

No Django import: the setting is read through `conf` inside `max_depth()`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

SETTING = "FALAI['MAX_JSON_DEPTH']"
DEFAULT = 32
# The most the setting can raise the bound to: deeper values would reach Python's recursion limit
# in code that walks them recursively (the JSON encoder and decoder, pydantic, the serializers).
CEILING = 256

_CONTAINERS = (Mapping, list, tuple)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JSONDepthError(ValueError):
    """A JSON value nests deeper than the limit. `str()` names the depth, the limit and the setting."""

    def __init__(self, depth: int, limit: int, what: str = "the JSON") -> None:
        self.depth = depth
        self.limit = limit
        self.what = what
        super().__init__(f"{what} is nested {depth} levels deep; the limit is {limit} ({SETTING})")


def max_depth() -> int:
    """The configured bound: `FALAI["MAX_JSON_DEPTH"]`, at least 1 and at most `CEILING`."""
    from falai_django import conf

    return max(1, min(int(conf.get("MAX_JSON_DEPTH")), CEILING))


def depth(value: Any) -> int:
    """How many arrays/objects deep `value` nests, walked with a stack of its own.

    Raises `ValueError` for a value that contains itself (only a Python caller can build one).
    """
    deepest = 0
    on_path: set[int] = set()
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if level == 0:  # leaving a container: (its id, 0)
            on_path.discard(item)
            continue
        if not isinstance(item, _CONTAINERS):
            continue
        if id(item) in on_path:
            raise ValueError("the value contains itself (a circular reference)")
        on_path.add(id(item))
        todo.append((id(item), 0))
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, Mapping) else item
        todo.extend((child, level + 1) for child in children if isinstance(child, _CONTAINERS))
    return deepest


def text_depth(text: str | bytes) -> int:
    """How deeply JSON text nests, read from its brackets (strings left out), without parsing.

    Exact for valid JSON; for text that is not, at least the depth a parser reaches before failing.
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "replace")
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(0, max(accumulate(_STEP[char] for char in brackets)))


def _refuse_past(found: int, limit: int | None, what: str) -> None:
    """Raise `JSONDepthError` when `found` is past `limit` (default `max_depth()`)."""
    limit = max_depth() if limit is None else limit
    if found > limit:
        raise JSONDepthError(found, limit, what)


def check(value: Any, what: str = "the JSON", limit: int | None = None) -> Any:
    """`value`, returned as is when it nests at most `limit` (default `max_depth()`) levels.

    Raises `JSONDepthError` naming the depth and the limit.
    """
    _refuse_past(depth(value), limit, what)
    return value


def check_text(text: str | bytes, what: str = "the JSON", limit: int | None = None) -> None:
    """Refuse JSON text nested deeper than `limit` before it is parsed (`JSONDepthError`)."""
    _refuse_past(text_depth(text), limit, what)


def check_body_text(text: str | bytes, what: str = "a value in the body", limit: int | None = None) -> None:
    """Refuse an API body whose values nest deeper than `limit`: the body's own object or array is
    the envelope, so its text may be `limit + 1` deep. The error names the values' depth."""
    _refuse_past(text_depth(text) - 1, limit, what)


def loads(text: str | bytes, what: str = "the body", limit: int | None = None, **kwargs: Any) -> Any:
    """`json.loads`, refusing text nested deeper than `limit` with `JSONDepthError` (a `ValueError`,
    like the decoder's own errors) before the decoder can run out of stack."""
    check_text(text, what, limit)
    return json.loads(text, **kwargs)
