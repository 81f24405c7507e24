"""`{{ path }}` templates (authoring note §7).

A path starts at one of three roots — `data`, `context`, `input` — and walks dot-separated
keys (numeric keys index lists). Three outcomes per placeholder:

* **value**: replaced by its text (strings as-is, numbers/booleans as JS `String()`, lists
  joined with ", ", anything else as JSON);
* **unknown** (nothing there, a `None` at the very end, a walk through a non-container, any
  other root): the placeholder stays verbatim, so a typo stays visible;
* **blank** (an empty string, or a walk *through* a `None`): replaced by "" and the whole
  string is tidied (double spaces, space before punctuation, trailing spaces).

Python has no `undefined`, so a root that is `None` (e.g. no host context) counts as absent
(unknown), while a `None` deeper down is JSON `null` (blank when walked through).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .fields import js_json, js_string, list_leaves

__all__ = ["PLACEHOLDER_RE", "ROOTS", "has_template", "render", "render_deep", "scope_of"]

PLACEHOLDER_RE = re.compile(r"\{\{\s*([^}\s]+)\s*\}\}")
ROOTS = ("data", "context", "input")

_MISSING = object()  # JS undefined: keep the placeholder
_ABSENT = object()   # walked through a null: blank


def scope_of(data: Any = None, context: Any = None, input: Any = _MISSING) -> dict[str, Any]:
    """Build a render scope; leave `input` out when there is no run (idle speaker)."""
    scope: dict[str, Any] = {"data": data, "context": context}
    if input is not _MISSING:
        scope["input"] = input
    return scope


def has_template(text: Any) -> bool:
    """True when a string contains `{{` (such strings skip enum checks at build time)."""
    return isinstance(text, str) and "{{" in text


def _step_into(current: Any, key: str) -> Any:
    if isinstance(current, Mapping):
        return current.get(key, _MISSING)
    if isinstance(current, (list, tuple)):
        if key == "length":
            return len(current)
        if key.isdigit() and key.isascii() and str(int(key)) == key:  # JS array index: "1", not "01"
            index = int(key)
            return current[index] if index < len(current) else _MISSING
        return _MISSING
    if isinstance(current, (str, int, float, bool)):
        return _MISSING  # JS: typeof !== 'object' resolves to nothing
    # host objects (dataclasses, pydantic models) stand in for JS objects
    if key.startswith("_"):
        return _MISSING
    return getattr(current, key, _MISSING)


def _lookup(scope: Mapping[str, Any], path: str) -> Any:
    keys = path.split(".")
    root = keys[0]
    if root not in ROOTS:
        return _MISSING
    current = scope.get(root, _MISSING)
    if current is None:  # a root of None means "not passed" in Python
        return _MISSING
    for key in keys[1:]:
        if current is None:
            return _ABSENT
        if current is _MISSING:
            return _MISSING
        current = _step_into(current, key)
    return current


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return js_string(value)
    if isinstance(value, (list, tuple)):  # nested lists join flat: no recursion, whatever the depth
        return ", ".join(_text(item) for item in list_leaves(value))
    return js_json(value)  # written with a stack of its own, however deep


_TIDY_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")
_TIDY_PUNCT = re.compile(r" +([,.;:!?\u2026])")
_TIDY_EOL = re.compile(r"[ \t]+$", re.MULTILINE)


def _tidy(text: str) -> str:
    text = _TIDY_SPACES.sub(" ", text)
    text = _TIDY_PUNCT.sub(r"\1", text)
    return _TIDY_EOL.sub("", text)


def render(template: str, scope: Mapping[str, Any]) -> str:
    """Render one template string with `scope` = {"data", "context", "input"}."""
    if "{{" not in template:
        return template
    emptied = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal emptied
        value = _lookup(scope, match.group(1))
        if value is _ABSENT:
            emptied = True
            return ""
        if value is _MISSING or value is None:
            return match.group(0)
        text = _text(value)
        if text == "":
            emptied = True
        return text

    out = PLACEHOLDER_RE.sub(substitute, template)
    return _tidy(out) if emptied else out


def render_deep(value: Any, scope: Mapping[str, Any]) -> Any:
    """`render` applied to every string at any depth of lists/dicts; other values pass through."""
    if isinstance(value, str):
        return render(value, scope)
    if isinstance(value, (list, tuple)):
        return [render_deep(item, scope) for item in value]
    if isinstance(value, Mapping):
        return {key: render_deep(item, scope) for key, item in value.items()}
    return value
