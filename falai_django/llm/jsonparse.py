"""Lenient parsing of the JSON envelopes models reply with (persistence-and-LLM note §6.3).

How the turn engine reads a reply::

    from falai_django.llm.jsonparse import envelope_of, try_parse_json_response

    envelope = envelope_of(output.structured, output.message)   # dict | None

`envelope_of` is the whole rule ("the structured object wins; otherwise an embedded JSON
object is extracted from the message"). The pieces are public too:

- `parse_json_response(text)` trims, strips one surrounding code fence (```` ``` ```` or
  ```` ```json ````), then parses strictly, and if that fails once more allowing raw control
  characters (a literal newline a model pretty-printed into a string). Raises `ValueError`
  when both readings fail. Like JavaScript's `JSON.parse`, `NaN` / `Infinity` are refused.
- `try_parse_json_response(text)` is the same but returns `None` instead of raising. The
  result may be any JSON value (a list, a number); check it with `is_record`.
- `extract_embedded_json_object(text)` finds the first balanced `{...}` in surrounding prose
  that parses (leniently) as an object; braces inside string literals are ignored.
- `is_json_shaped(text)` is true when the text starts, after whitespace, with a fence or `{`
  (a reply that fails to parse but looks like this is a broken envelope, never shown).
- `is_record(value)` is true for a dict.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCED = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)
_JSON_SHAPED = re.compile(r"^\s*(```|\{)")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str, *, strict: bool) -> Any:
    try:
        return json.loads(text, strict=strict, parse_constant=_refuse_constant)
    except RecursionError:  # nested past the decoder's stack: as unreadable as any other bad JSON
        raise ValueError("the JSON is nested too deeply to read") from None


def _parse_lenient(text: str) -> Any:
    """Strict JSON first; then once more allowing raw control characters inside strings."""
    try:
        return _loads(text, strict=True)
    except ValueError as strict_error:
        try:
            return _loads(text, strict=False)
        except ValueError:
            raise strict_error from None


def parse_json_response(text: str) -> Any:
    """Parse a model reply that should be JSON, tolerating a fence and raw newlines."""
    if not text or not isinstance(text, str):
        raise ValueError("Invalid JSON response: the text is empty or not a string")
    cleaned = text.strip()
    fenced = _FENCED.match(cleaned)
    if fenced:
        cleaned = fenced.group(1).strip()
    try:
        return _parse_lenient(cleaned)
    except ValueError as exc:
        raise ValueError(f"Failed to parse JSON response: {exc}. Content: {cleaned[:200]}...") from None


def try_parse_json_response(text: str) -> Any | None:
    """`parse_json_response`, returning None where it would raise."""
    try:
        return parse_json_response(text)
    except ValueError:
        return None


def _object_end(text: str, start: int) -> int:
    """Index of the brace closing the object opened at `start`, or -1 if the text ends first."""
    depth = 0
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def extract_embedded_json_object(text: str) -> dict[str, Any] | None:
    """The first complete JSON object inside `text` (e.g. prose followed by the envelope)."""
    if not text:
        return None
    start = text.find("{")
    while start != -1:
        end = _object_end(text, start)
        if end != -1:
            try:
                parsed = _parse_lenient(text[start : end + 1])
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return parsed
        start = text.find("{", start + 1)
    return None


def is_json_shaped(text: str) -> bool:
    """True when `text` opens (after whitespace) with a code fence or a brace."""
    return bool(text) and _JSON_SHAPED.match(text) is not None


def is_record(value: Any) -> bool:
    """True for a plain JSON object (a dict), false for lists, None and scalars."""
    return isinstance(value, dict)


def envelope_of(structured: Any, message: str | None) -> dict[str, Any] | None:
    """The reply's envelope: `structured` when it is a dict, else one parsed from `message`.

    The message is parsed whole first (fences and raw newlines tolerated), then searched for
    an embedded object. None when the reply carries no object at all (plain text).
    """
    if isinstance(structured, dict):
        return structured
    if not message:
        return None
    parsed = try_parse_json_response(message)
    if isinstance(parsed, dict):
        return parsed
    return extract_embedded_json_object(message)
