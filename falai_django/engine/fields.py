"""Fields: definitions, known/pending, coercion of model values, and the wire schema
(authoring note §2), plus the small JavaScript emulations the engine needs to agree with
`@falai/agent` byte for byte (`String()`, `Number()`, `===`, JSON text).

Public names the turn engine uses:

* `FieldDef` / `field_defs(defs)` — normalized field definitions keyed by slug.
* `is_known(value)`, `pending_fields(collect, data, asked, max_asks)`, `DEFAULT_MAX_ASKS`.
* `coerce_field(defn, raw)` → the coerced value, or a `Drop` whose `.code` is
  `"bad-value"` or `"not-in-enum"` (test with `isinstance(result, Drop)`).
* `to_wire_schema(defs, nullable=False)` — the only shape a field/parameter reaches a model in.
* `js_string`, `js_number`, `js_json`, `strict_equal`, `deep_equal`, `UNSET`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, NamedTuple

__all__ = [
    "DEFAULT_MAX_ASKS", "FIELD_TYPES", "PARAM_TYPES", "UNSET", "Drop", "FieldDef", "build_schema", "coerce_field",
    "deep_equal", "field_defs", "is_known", "is_number", "js_json", "js_number", "js_string",
    "pending_fields", "strict_equal", "to_wire_schema",
]

DEFAULT_MAX_ASKS = 3
FIELD_TYPES = ("string", "number", "integer", "boolean")
PARAM_TYPES = (*FIELD_TYPES, "array")

FieldType = Literal["string", "number", "integer", "boolean"]
ExtractMode = Literal["anywhere", "asked"]


class _Unset:
    """JavaScript `undefined`: a key that is not there (distinct from `None`, JSON null)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


# --------------------------------------------------------------------------- JS emulation

def is_number(value: Any) -> bool:
    """A JSON number: int or float, never bool (Python's bool is an int subclass)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number_to_string(x: float) -> str:
    # ECMAScript Number::toString: shortest round-trip digits, exponent only past 1e21 / 1e-7
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    digits_tuple = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits).rstrip("0") or "0"
    exponent = int(digits_tuple.exponent) + len(digits_tuple.digits)  # value = 0.digits × 10^exponent
    k, n = len(digits), exponent
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def js_string(value: Any) -> str:
    """JavaScript `String(x)` for JSON primitives: `3.0`→"3", `True`→"true", `None`→"null"."""
    if value is None:
        return "null"
    if value is UNSET:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**21 else _number_to_string(float(value))
    if isinstance(value, float):
        return _number_to_string(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):  # nested lists join flat: no recursion, whatever the depth
        return ",".join("" if v is None or v is UNSET else js_string(v) for v in list_leaves(value))
    if isinstance(value, Mapping):
        return "[object Object]"
    return str(value)


def list_leaves(items: list[Any] | tuple[Any, ...]) -> list[Any]:
    """The items of `items` in order with every non-empty nested list (or tuple) replaced by its own
    items, walked with a stack (no recursion). Joining these with a separator is what joining each
    nested list recursively gives, an empty nested list being one empty item (it is kept as is)."""
    out: list[Any] = []
    todo = [iter(items)]
    while todo:
        for item in todo[-1]:
            if isinstance(item, (list, tuple)) and item:
                todo.append(iter(item))
                break
            out.append(item)
        else:
            todo.pop()
    return out


_JS_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)", re.ASCII)
_JS_RADIX = re.compile(r"0([xXoObB])([0-9a-fA-F]+)")
_RADIX = {"x": 16, "o": 8, "b": 2}


def js_number(text: str) -> float:
    """JavaScript `Number(string)`: "" and blanks → 0, hex/octal/binary prefixes, "Infinity";
    anything else unparseable → NaN. Python's `float()` is too lenient ("inf", "1_0")."""
    s = text.strip()
    if s == "":
        return 0.0
    if s in ("Infinity", "+Infinity"):
        return math.inf
    if s == "-Infinity":
        return -math.inf
    radix = _JS_RADIX.fullmatch(s)
    if radix:
        try:
            return float(int(radix.group(2), _RADIX[radix.group(1).lower()]))
        except ValueError:
            return math.nan
    if _JS_DECIMAL.fullmatch(s):
        return float(s)
    return math.nan


def _js_numeric(x: float | int) -> float | int:
    # keep integral numbers as int so JSON reads "3", as JavaScript writes it
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


class _Written(str):
    """Text `js_json` has already produced, queued between the values still to write."""


def js_json(value: Any) -> str:
    """`JSON.stringify(value)`: compact, non-ASCII kept, numbers written as JavaScript writes
    them (`1.0` → `1`, `1e16` → `10000000000000000`, `1e-6` → `0.000001`, NaN → `null`).

    Written with a stack of its own, so a value nested thousands of levels deep (a customer's
    payload rendered by `{{input.x}}`) is written out, never a `RecursionError`."""
    out: list[str] = []
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if type(item) is _Written:
            out.append(item)
        elif isinstance(item, Mapping):
            pieces: list[Any] = []
            for k, v in item.items():
                if v is not UNSET:
                    pieces += [_Written(("," if pieces else "") + json.dumps(str(k), ensure_ascii=False) + ":"), v]
            out.append("{")
            todo.append(_Written("}"))
            todo.extend(reversed(pieces))
        elif isinstance(item, (list, tuple)):
            pieces = []
            for v in item:
                pieces += [_Written(","), v] if pieces else [v]
            out.append("[")
            todo.append(_Written("]"))
            todo.extend(reversed(pieces))
        else:
            out.append(_json_scalar(item))
    return "".join(out)


def _json_scalar(value: Any) -> str:
    if value is UNSET:
        return "null"
    if value is None or isinstance(value, (str, bool)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value) if abs(value) < 10**21 else _number_to_string(float(value))
    if isinstance(value, float):
        return _number_to_string(value) if math.isfinite(value) else "null"
    return json.dumps(str(value), ensure_ascii=False)


def strict_equal(a: Any, b: Any) -> bool:
    """JavaScript `===` on JSON primitives: True never equals 1, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if a is None or b is None or a is UNSET or b is UNSET:
        return a is b
    return a is b


def deep_equal(a: Any, b: Any) -> bool:
    """Strict structural equality (`equals`): primitives by `strict_equal`, lists item by item,
    dicts with the same key set; `UNSET` (missing) equals nothing but itself."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple, Mapping)) or isinstance(b, (list, tuple, Mapping)):
        return False
    return strict_equal(a, b)


# --------------------------------------------------------------------------- definitions

@dataclass(frozen=True, slots=True)
class FieldDef:
    """One collected field, keyed by its slug in the agent's `fields`.

    Attributes:
        slug: the key in `session.data`, `collect` lists, templates and envelopes.
        type: "string" | "number" | "integer" | "boolean".
        enum: allowed values (strings and/or numbers) or None.
        description: sent to the model with the field, or None.
        ask: template for how the model should ask while the field is pending, or None.
        extract: where a value may be harvested — "anywhere" (understand call) or "asked"
            (only the speak envelope of the step collecting it). Already defaulted:
            booleans "asked", everything else "anywhere".
        label: human name for editors/logs; never sent to the model.
        raw: the definition dict as authored (for the wire schema / editors).
    """

    slug: str
    type: FieldType
    enum: tuple[Any, ...] | None = None
    description: str | None = None
    ask: str | None = None
    extract: ExtractMode = "anywhere"
    label: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, slug: str, d: Mapping[str, Any]) -> FieldDef:
        """Normalize one authored definition (assumed valid; see `check_field_defs`)."""
        type_ = d.get("type", "string")
        enum = d.get("enum")
        extract: ExtractMode = d.get("extract") or ("asked" if type_ == "boolean" else "anywhere")
        return cls(
            slug=slug,
            type=type_,
            enum=tuple(enum) if enum else None,
            description=d.get("description") or None,
            ask=d.get("ask"),
            extract=extract,
            label=d.get("label"),
            raw=dict(d),
        )

    def coerce(self, raw: Any) -> Any:
        """Shorthand for `coerce_field(self, raw)`."""
        return coerce_field(self, raw)


def check_field_defs(defs: Any) -> None:
    """Raise FlowConfigurationError when `defs` is not a map of valid field definitions."""
    from .errors import FlowConfigurationError

    if defs is None:
        return
    if not isinstance(defs, Mapping):
        raise FlowConfigurationError(
            "fields: is not a mapping of slug to definition. Pass fields as a dict such as "
            '{"nome": {"type": "string"}}.'
        )
    for slug, d in defs.items():
        if isinstance(d, FieldDef):
            continue
        if not isinstance(d, Mapping):
            raise FlowConfigurationError(
                f'field "{slug}": is not an object. Write it as {{"type": "string"}} or another field type.'
            )
        if d.get("type") not in FIELD_TYPES:
            raise FlowConfigurationError(
                f'field "{slug}": type {js_json(d.get("type"))} is not one of "string", "number", '
                '"integer", "boolean". Give the field one of those types.'
            )
        if d.get("extract") not in (None, "anywhere", "asked"):
            raise FlowConfigurationError(
                f'field "{slug}": extract {js_json(d.get("extract"))} is not "anywhere" or "asked". '
                "Use one of those, or leave it out."
            )
        enum = d.get("enum")
        if enum is not None and (
            not isinstance(enum, (list, tuple))
            or not all(isinstance(v, str) or is_number(v) for v in enum)
        ):
            raise FlowConfigurationError(
                f'field "{slug}": enum is not a list of strings and numbers. List the allowed values.'
            )


def field_defs(defs: Mapping[str, Any] | None) -> dict[str, FieldDef]:
    """Normalize the agent's `fields` option into {slug: FieldDef}, keeping order."""
    out: dict[str, FieldDef] = {}
    for slug, d in (defs or {}).items():
        out[slug] = d if isinstance(d, FieldDef) else FieldDef.from_dict(slug, d)
    return out


# --------------------------------------------------------------------------- known / pending

def is_known(value: Any) -> bool:
    """Known = not missing, not None, not "" (0, False and " " are known)."""
    return value is not UNSET and value is not None and not (isinstance(value, str) and value == "")


def pending_fields(
    collect: Iterable[str] | None,
    data: Mapping[str, Any],
    asked: Mapping[str, int] | None = None,
    max_asks: int | None = None,
) -> list[str]:
    """The `collect` slugs, in order, that are still unknown and asked fewer than `max_asks`
    times (default `DEFAULT_MAX_ASKS`)."""
    limit = DEFAULT_MAX_ASKS if max_asks is None else max_asks
    asked = asked or {}
    return [slug for slug in (collect or ()) if not is_known(data.get(slug)) and asked.get(slug, 0) < limit]


# --------------------------------------------------------------------------- coercion

class Drop(NamedTuple):
    """A model value that did not survive coercion; `code` is "bad-value" or "not-in-enum"."""

    code: str


BAD_VALUE = Drop("bad-value")
NOT_IN_ENUM = Drop("not-in-enum")

_TRUE_WORDS = ("true", "sim", "yes", "1")
_FALSE_WORDS = ("false", "não", "nao", "no", "0")


def _coerce_scalar(type_: str | None, raw: Any) -> Any:
    if type_ == "string":
        if isinstance(raw, str):
            return raw
        if isinstance(raw, bool) or is_number(raw):
            return js_string(raw)
        return UNSET
    if type_ in ("number", "integer"):
        if is_number(raw):
            n: float | int = raw
        elif isinstance(raw, str):
            # only the first comma turns into a point: "1,5" → 1.5, "1.500,50" → NaN
            n = js_number(raw.strip().replace(",", ".", 1))
        else:
            return UNSET
        if not math.isfinite(n):
            return UNSET
        if type_ == "integer":
            return int(n)  # Math.trunc
        return _js_numeric(n)
    if type_ == "boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            word = raw.strip().lower()
            if word in _TRUE_WORDS:
                return True
            if word in _FALSE_WORDS:
                return False
        return UNSET
    return UNSET


def coerce_field(defn: FieldDef | Mapping[str, Any], raw: Any) -> Any:
    """Turn a model-provided value into the field's type.

    Returns the coerced value, or `Drop("bad-value")` / `Drop("not-in-enum")`.
    Enum membership is strict: "1" is not 1 and a boolean never matches.
    """
    type_ = defn.type if isinstance(defn, FieldDef) else defn.get("type")
    enum = defn.enum if isinstance(defn, FieldDef) else defn.get("enum")
    value = _coerce_scalar(type_, raw)
    if value is UNSET:
        return BAD_VALUE
    if enum and not any(strict_equal(value, option) for option in enum):
        return NOT_IN_ENUM
    return value


# --------------------------------------------------------------------------- wire schema

def _def_get(d: Any, key: str) -> Any:
    if isinstance(d, FieldDef):
        return d.raw.get(key) if key not in ("type", "enum", "description") else getattr(d, key)
    return d.get(key)


def _wire_property(d: Any, nullable: bool) -> dict[str, Any]:
    type_ = _def_get(d, "type")
    out: dict[str, Any] = {"type": type_}
    if type_ == "array":
        out["items"] = _wire_property(_def_get(d, "items") or {}, False)
    description = _def_get(d, "description")
    if description:
        out["description"] = description
    enum = _def_get(d, "enum")
    if type_ != "array" and enum:
        out["enum"] = list(enum)
    if nullable:
        out["type"] = [type_, "null"]
    return out


def to_wire_schema(defs: Mapping[str, Any], nullable: bool = False) -> dict[str, Any]:
    """The JSON schema a provider sees for fields, action parameters or mention `extract`.

    Allow-list of keys (type, items, description, enum); `label`, `ask`, `extract`, `optional`
    stripped; closed object. `nullable=True` (envelope style): every type also admits null and
    every key is required (the enum list is not extended with null). Otherwise every key is
    required except parameters marked `optional: True`.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, d in defs.items():
        properties[name] = _wire_property(d, nullable)
        if nullable or not _def_get(d, "optional"):
            required.append(name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


# --------------------------------------------------------------------------- merging field rows

def build_schema(groups: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Merge field definitions authored per flow (`[{"id", "fields"}, ...]`) into one agent
    field set (authoring note §2.6; a host helper). The first definition of a slug is kept;
    a later one must agree on `type` and on a non-empty `enum`; the first non-empty `enum`,
    `label`, `ask`, `description` and `extract` win."""
    from .errors import FlowConfigurationError

    merged: dict[str, dict[str, Any]] = {}
    owner: dict[str, str | None] = {}
    for group in groups:
        group_id = group.get("id")
        for slug, defn in (group.get("fields") or {}).items():
            seen = merged.get(slug)
            if seen is None:
                merged[slug] = dict(defn)
                owner[slug] = group_id
                continue
            if seen.get("type") != defn.get("type"):
                raise FlowConfigurationError(
                    f'[FlowConfigurationError] field "{slug}" has two types: "{seen.get("type")}" in '
                    f'"{owner[slug]}", "{defn.get("type")}" in "{group_id}". Use one type for one slug, '
                    "or rename one of the fields."
                )
            enum_a, enum_b = seen.get("enum"), defn.get("enum")
            if enum_a and enum_b and not (
                len(enum_a) == len(enum_b) and all(strict_equal(a, b) for a, b in zip(enum_a, enum_b, strict=True))
            ):
                raise FlowConfigurationError(
                    f'[FlowConfigurationError] field "{slug}" has two option lists: in "{owner[slug]}" and '
                    f'"{group_id}". Give the slug a single list of options.'
                )
            for key in ("enum", "label", "ask", "description", "extract"):
                if not seen.get(key) and defn.get(key):
                    seen[key] = defn[key]
    return merged


_UNLIKE_JS_NUMBER = re.compile(r"\d\.0(?=[,}\]])|\de(?:\+(?:1[5-9]|20)|-[1-6])(?=[,}\]])")
# Every match of the pattern contains one of these; substring tests run in C at memchr speed,
# while the regex costs more than the serialisation itself on a 30 KB blob.
_UNLIKE_JS_HINTS = (".0,", ".0}", ".0]", "e+1", "e+2", "e-")


def unlike_js_numbers(text: str) -> bool:
    """Whether JSON text (as pydantic writes it) holds a number `JSON.stringify` writes otherwise."""
    return any(hint in text for hint in _UNLIKE_JS_HINTS) and _UNLIKE_JS_NUMBER.search(text) is not None
