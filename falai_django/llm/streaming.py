"""The customer-facing text inside a streamed JSON envelope (persistence-and-LLM note §4.2).

Providers stream the raw envelope (`{"message":"Hel`), not the message. The speaker makes
one `StreamingMessageDecoder` per provider call (so each tool round gets a fresh one) and
pushes every chunk's **accumulated** text, never its delta::

    decoder = StreamingMessageDecoder()
    for chunk in provider.generate_message_stream(request):
        message, delta = decoder.push(chunk.accumulated)
        if delta:
            yield {"delta": delta}

`extract_message_so_far(accumulated)` is the stateless core:

- leading whitespace is skipped; a fence of three or more backticks is skipped with its
  opening line (while that line is still arriving, or while only backticks have arrived,
  the answer is `""`); one or two backticks are prose;
- text that is not a JSON object passes through verbatim (a provider streaming plain
  text), except behind a fence, where it yields `""`;
- inside the top-level object, only the top-level key `message` with a string value
  counts; its decoded prefix so far is returned. Escapes are decoded (`\\uXXXX` too, and a
  surrogate pair becomes one character); a dangling backslash, a partial `\\uXXXX` or a
  high surrogate whose partner has not arrived are held back, so the text only ever grows;
- values of earlier keys are skipped (strings, nested objects/arrays, primitives); while
  one is incomplete the answer is `""`. A nested `"message"` key never matches, nor does
  the word inside another value; a null or non-string `message` yields `""`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

_WHITESPACE = " \t\n\r"
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")
_PRIMITIVE_END = frozenset(",}]" + _WHITESPACE)


def _hex4(s: str, at: int) -> int | None:
    """The code unit of the four hex digits at s[at:at+4], or None when they are not hex."""
    digits = s[at : at + 4]
    if len(digits) < 4 or not all(c in _HEX for c in digits):
        return None
    return int(digits, 16)


def _read_string(s: str, start: int) -> tuple[str, int, bool]:
    """Decode the JSON string whose opening quote is at s[start].

    Returns (decoded text, index after the closing quote or len(s), complete). An
    incomplete string returns its decoded prefix with any unfinished escape held back.
    """
    out: list[str] = []
    n = len(s)
    i = start + 1
    while i < n:
        ch = s[i]
        if ch == '"':
            return "".join(out), i + 1, True
        if ch != "\\":
            # copy the run of plain characters in one slice
            j = i + 1
            while j < n and s[j] != '"' and s[j] != "\\":
                j += 1
            out.append(s[i:j])
            i = j
            continue
        if i + 1 >= n:
            return "".join(out), n, False  # dangling backslash
        esc = s[i + 1]
        if esc != "u":
            out.append(_SIMPLE_ESCAPES.get(esc, esc))  # unknown escape: its character, leniently
            i += 2
            continue
        unit = _hex4(s, i + 2)
        if unit is None:
            return "".join(out), n, False  # partial \uXXXX: hold back
        i += 6
        if 0xD800 <= unit <= 0xDBFF:
            # A high surrogate: pair it with a following \uDC00-\uDFFF escape (JS strings
            # are UTF-16; Python's are code points). Hold it back until the pair can be seen.
            if i >= n or s[i:] == "\\" or (s.startswith("\\u", i) and _hex4(s, i + 2) is None):
                return "".join(out), n, False
            low = _hex4(s, i + 2) if s.startswith("\\u", i) else None
            if low is not None and 0xDC00 <= low <= 0xDFFF:
                out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)))
                i += 6
                continue
        out.append(chr(unit))
    return "".join(out), n, False


def _skip_value(s: str, i: int) -> tuple[int, bool]:
    """Skip one JSON value at s[i]; returns (index after it, complete)."""
    n = len(s)
    if i >= n:
        return n, False
    ch = s[i]
    if ch == '"':
        _, end, complete = _read_string(s, i)
        return end, complete
    if ch in "{[":
        depth = 0
        j = i
        while j < n:
            c = s[j]
            if c == '"':
                _, j, complete = _read_string(s, j)
                if not complete:
                    return n, False
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1, True
            j += 1
        return n, False
    j = i
    while j < n and s[j] not in _PRIMITIVE_END:
        j += 1
    return (j, True) if j < n else (n, False)


def _after_fence(s: str, i: int) -> int:
    """Index past a leading fence line, `i` when there is none, -1 while it is still arriving."""
    if i >= len(s) or s[i] != "`":
        return i
    j = i
    while j < len(s) and s[j] == "`":
        j += 1
    if j == len(s):
        return -1  # only backticks so far: a fence may be opening
    if j - i < 3:
        return i  # inline code in prose
    newline = s.find("\n", j)
    return -1 if newline == -1 else newline + 1


def _skip_ws(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WHITESPACE:
        i += 1
    return i


def extract_message_so_far(accumulated: str) -> str:
    """The decoded top-level `message` string available so far (see the module docstring)."""
    s = accumulated
    n = len(s)
    i = _skip_ws(s, 0)
    past_fence = _after_fence(s, i)
    if past_fence == -1:
        return ""
    fenced = past_fence != i
    i = _skip_ws(s, past_fence)
    if i >= n or s[i] != "{":
        return "" if fenced else accumulated
    i += 1
    while i < n:
        while i < n and (s[i] in _WHITESPACE or s[i] == ","):
            i += 1
        if i >= n or s[i] != '"':
            return ""  # the object closed, or the next key has not arrived
        key, i, complete = _read_string(s, i)
        if not complete:
            return ""
        i = _skip_ws(s, i)
        if i >= n or s[i] != ":":
            return ""
        i = _skip_ws(s, i + 1)
        if i >= n:
            return ""
        if key == "message":
            if s[i] != '"':
                return ""  # null or not a string: no message
            return _read_string(s, i)[0]
        i, complete = _skip_value(s, i)
        if not complete:
            return ""
    return ""


class Pushed(NamedTuple):
    """What `StreamingMessageDecoder.push` returns: unpacks as `(message, delta)`, and reads as
    `.message` / `.delta` or upstream's `{message, delta}` (`pushed["delta"]`)."""

    message: str
    delta: str

    def __getitem__(self, key: Any) -> Any:  # also by name, as upstream's {message, delta}
        if isinstance(key, str):
            if key not in self._fields:
                raise KeyError(key)
            return getattr(self, key)
        return tuple.__getitem__(self, key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):
            return other == {"message": self.message, "delta": self.delta}
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:  # defining __eq__ would otherwise drop the tuple's hash
        return tuple.__hash__(self)


class StreamingMessageDecoder:
    """Turns successive accumulated envelopes of one stream into (message, delta) pairs.

    `delta` is the new suffix when the message extends the previous one; otherwise (an
    anomaly: the text shrank or changed) it is the whole message. Each push re-scans the
    whole buffer, O(n) per chunk, which is negligible at reply sizes.
    """

    __slots__ = ("previous",)

    def __init__(self) -> None:
        self.previous = ""

    def push(self, accumulated: str) -> Pushed:
        message = extract_message_so_far(accumulated)
        delta = message[len(self.previous):] if message.startswith(self.previous) else message
        self.previous = message
        return Pushed(message, delta)
