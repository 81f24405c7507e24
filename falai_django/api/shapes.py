"""What the API's values look like, written once for both readers: the server's checks
(`serializers`) and the OpenAPI schema (`schema`). A value the schema calls valid is one the
server takes, so a client generated from the schema, or a fuzzer, is never refused for a shape
the schema allowed.

The schema is OpenAPI 3.1 (JSON Schema 2020-12): `propertyNames` holds object keys to the same
rule as values, which OpenAPI 3.0's older JSON Schema could not say. Text is kept as sent (never
trimmed). PostgreSQL cannot store NUL in text or jsonb, so no text
of the API carries one, in values and in object keys alike.
"""

from __future__ import annotations

from typing import Any

NO_NUL = r"^[^\x00]*$"
# A reason: something besides white space. The white space is spelt out (what `str.isspace` calls
# white space, what `strip()` strips): regex engines and generators disagree on what `\s` holds.
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NOT_BLANK = rf"^[{_SPACE}]*[^{_SPACE}\x00][^\x00]*$"
# The RFC 3339 form of a time, with its zone, between 1970 and 9899 (clock arithmetic stays in
# range), on a day every month has, or the month's own 29th, 30th, 31st (Feb 29 is left to the
# server, which takes it, as it takes every other ISO 8601 form the engine reads).
ISO_TIME = (r"^(?:19[7-9]\d|[2-8]\d{3}|9[0-8]\d{2})-"
            r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
            r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$")
# A conversation id in a path: 1 to 255 characters (the view's check), no `/` (the URL pattern's),
# not only dots (`.` and `..` are path segments a client's URL library folds away).
SESSION_ID = r"^[^/\x00]*[^/.\x00][^/\x00]*$"
# A slug, as Django's `slug` converter and SlugField read it (a flow's id).
SLUG = r"^[-a-zA-Z0-9_]+$"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # an IntegerField's column

_TEXT: dict[str, Any] = {"type": "string", "pattern": NO_NUL}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time", "pattern": ISO_TIME}

# Any JSON value but null (`JsonValue`); inside an object or a list, null too (`JsonItem`). Both
# are components (the schema hook adds them): a JSON value nests.
JSON_VALUE: dict[str, Any] = {"$ref": "#/components/schemas/JsonValue"}
_JSON_ITEM: dict[str, Any] = {"$ref": "#/components/schemas/JsonItem"}
COMPONENTS: dict[str, dict[str, Any]] = {
    "JsonValue": {
        "description": "Any JSON value but null; no text (keys included) with a NUL character.",
        "anyOf": [
            _TEXT, {"type": "number"}, {"type": "boolean"},
            {"type": "array", "items": _JSON_ITEM},
            {"type": "object", "additionalProperties": _JSON_ITEM, "propertyNames": {"pattern": NO_NUL}},
        ],
    },
    "JsonItem": {"description": "Any JSON value, null included.", "anyOf": [JSON_VALUE, {"type": "null"}]},
}

FLOW_SPEC: dict[str, Any] = {
    "type": "object", "propertyNames": {"pattern": NO_NUL},
    "description": "The FlowSpec; its `id` is the flow's id (left out, the URL's goes in). Checked against the agent "
                   "like the admin's form: a spec that does not hold is a 400 naming the flow and the step, nothing "
                   "saved.",
}

SILENCED: dict[str, Any] = {"oneOf": [
    {"type": "string", "pattern": NOT_BLANK, "description": "The reason: the assistant says nothing."},
    {"type": "object", "required": ["reason"], "additionalProperties": False, "properties": {
        "reason": {"type": "string", "pattern": NOT_BLANK},
        "understand": {"type": "boolean", "description": "Fields keep landing while silent."},
        "skip": {"type": "boolean", "description": "Talk and say steps are skipped; do steps still run."}}},
]}

_ANCHOR: dict[str, Any] = {
    "type": "object", "required": ["key"], "additionalProperties": False,
    "properties": {
        "key": {**_TEXT, "minLength": 1, "description": "The anchor's key, e.g. the lead's id."},
        "lastInboundAt": {**_TIME, "type": ["string", "null"], "description": "The customer's last message under this anchor."},
        "last_inbound_at": {**_TIME, "type": ["string", "null"], "description": "Another spelling of lastInboundAt."},
    },
}
ANCHORS: dict[str, Any] = {
    "type": "object", "additionalProperties": _ANCHOR, "propertyNames": {"pattern": NO_NUL},
    "description": "Host anchors by name: {name: {key, lastInboundAt?}}.",
}
CLAIMS: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "description": "Claims from the customer's other sessions: {held: {dedupeKey: ISO time}, active: [pair]}.",
    "properties": {
        "held": {"type": ["object", "null"], "propertyNames": {"pattern": NO_NUL},
                 "additionalProperties": {"oneOf": [
                     _TIME,
                     {"type": "object", "required": ["at"], "additionalProperties": False, "properties": {"at": _TIME}},
                 ]}},
        "active": {"description": '"flowId:anchor" texts: a list, or an object keyed by them.',
                   "oneOf": [{"type": "array", "items": {**_TEXT, "minLength": 1}},
                             {"type": "object", "propertyNames": {"minLength": 1, "pattern": NO_NUL}},
                             {"type": "null"}]},
    },
}


def for_version(schema: Any) -> Any:
    """`schema` as the OpenAPI version being generated writes it. These shapes are written for
    3.1 (the app's own schema); a project exporting 3.0 gets `nullable` for a null alternative,
    and no `propertyNames` (3.0's JSON Schema has no word for what keys may hold)."""
    from drf_spectacular.settings import spectacular_settings

    if str(spectacular_settings.OAS_VERSION).startswith("3.1"):
        return schema
    return _to_30(schema)


def _to_30(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_to_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _to_30(value) for key, value in schema.items() if key != "propertyNames"}
    kind = out.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [k for k in kind if k != "null"]
        out["type"], out["nullable"] = (rest[0] if len(rest) == 1 else rest), True
    for key in ("anyOf", "oneOf"):
        if isinstance(out.get(key), list) and {"type": "null"} in out[key]:
            out[key] = [branch for branch in out[key] if branch != {"type": "null"}]
            out["nullable"] = True
    return out
