"""One validated turn input, from the request (or a Python caller) to the engine.

`parse_turn_input` is the one place that decides an input's kind, checks what that kind needs,
reads `at` and checks the per-turn options (`silenced`, `context`, `anchors`, `claims`).
Everything after it — the inbox row, the replay after a conflict, the engine call — uses the
`TurnInput` it returns, so bad input stops here with an `InputError` naming the field (the API
answers 400 with it) and never reaches the engine or leaves a failed inbox row.

The handoff in force is read here too (`handoff_of`, `silenced_for`): it decides the `silenced`
a turn gets when the caller gives none. `handoff/` writes it; the turn only reads it.
"""

from __future__ import annotations

import json
import reprlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from falai_django import jsondepth
from falai_django.engine.jstime import to_iso, try_parse_iso
from falai_django.engine.session import describe
from falai_django.models.sql import HANDOFF_KEY

INPUT_KINDS = ("message", "wake", "event", "start")
HANDOFF_MODES = ("stop", "skip", "understand")
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET", "__bool__": lambda self: False})()


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist, _SHOWN.maxstring, _SHOWN.maxother = 3, 4, 4, 60, 60


def shown(value: Any) -> str:
    """`repr(value)` cut short: three levels, a few items, 60 characters of text. An error message
    quoting what the caller sent stays readable, and never walks a value of any depth."""
    return _SHOWN.repr(value)


class InputError(ValueError):
    """The input is not one of the four kinds, lacks what its kind needs, or an option is malformed.

    `field` names the offending part of the request (`message`, `at`, `claims`, …).
    """

    def __init__(self, message: str, field: str = "detail") -> None:
        super().__init__(message)
        self.field = field


class UnknownConversationError(LookupError):
    """No conversation with this id. A handoff is state of an existing conversation: silencing
    or unsilencing an unknown id creates nothing (the API answers 404)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"conversation {session_id!r} does not exist")
        self.session_id = session_id


def handoff_of(session: Any) -> dict[str, Any] | None:
    """The handoff in force on an engine session, or None."""
    if session is None:
        return None
    handoff = (session.metadata or {}).get(HANDOFF_KEY)
    return handoff if isinstance(handoff, dict) and handoff.get("reason") else None


def silenced_for(session: Any, requested: Any) -> Any:
    """The `silenced` a turn runs with: the caller's wins; otherwise the conversation's handoff
    decides (its `mode` picks the form: the plain reason, `{reason, skip}` or `{reason, understand}`)."""
    if requested is not None:
        return requested
    handoff = handoff_of(session)
    if not handoff:
        return None
    mode = handoff.get("mode") or "stop"
    if mode == "skip":
        return {"reason": handoff["reason"], "skip": True}
    if mode == "understand":
        return {"reason": handoff["reason"], "understand": True}
    return handoff["reason"]


@dataclass(frozen=True)
class TurnInput:
    """One input, checked. `turn` holds the engine's keyword arguments for this input kind."""

    kind: str
    key: str  # the input key: message id (else its `at`), wake key, event key or start key
    turn: dict[str, Any]
    silenced: Any = None
    context: Any = UNSET
    anchors: dict[str, Any] | None = None
    claims: dict[str, Any] | None = None

    def stored(self) -> dict[str, Any]:
        """What the inbox row keeps (`TurnRecord.input`): enough to replay the input later."""
        out: dict[str, Any] = {"turn": self.turn}
        if self.silenced is not None:
            out["silenced"] = self.silenced
        if self.context is not UNSET and is_json(self.context):  # a Python caller's object is not kept
            out["context"] = self.context
        if self.anchors:
            out["anchors"] = self.anchors
        if self.claims:
            out["claims"] = self.claims
        return out

    @classmethod
    def from_stored(cls, kind: str, key: str, stored: dict[str, Any]) -> TurnInput:
        """The input an inbox row holds (written by `stored()`; trusted, not checked again)."""
        return cls(
            kind=kind,
            key=key,
            turn=stored["turn"],
            silenced=stored.get("silenced"),
            context=stored["context"] if "context" in stored else UNSET,
            anchors=stored.get("anchors") or None,
            claims=stored.get("claims") or None,
        )


def parse_at(value: Any, name: str = "at", *, strict: bool = True) -> Any:
    """An ISO 8601 time (text or an aware datetime) as the host passes it on, or None.

    Not `strict` (a message's `at` from a Python caller): any text passes, as the engine (like
    upstream, `at?: string`) keeps text it cannot read. The API is strict.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InputError(f"{name} must carry a time zone", name)
        return to_iso(value)
    if isinstance(value, str) and (not strict or try_parse_iso(value) is not None):
        return value
    if not strict and isinstance(value, int | float) and not isinstance(value, bool):
        return to_iso(value)  # epoch milliseconds
    raise InputError(f"{name} must be an ISO 8601 time such as 2026-09-24T10:00:00Z, got {shown(value)}", name)


def parse_turn_input(
    raw: dict[str, Any],
    *,
    now: datetime | None,
    silenced: Any = None,
    context: Any = UNSET,
    anchors: Any = None,
    claims: Any = None,
) -> TurnInput:
    """Check one input and its options. Raises `InputError` naming the field.

    A message without `at` gets `at` = `now` here, once: a replay after a conflict then mints
    the same keys (and the same emissions) as the first attempt. `now` may be None for any
    other input.
    """
    if not isinstance(raw, dict):
        raise InputError("the input must be an object")
    kinds = [k for k in INPUT_KINDS if raw.get(k) is not None]
    if len(kinds) != 1:
        raise InputError(f"exactly one of {', '.join(INPUT_KINDS)} is required, got {kinds or 'none'}")
    kind = kinds[0]
    if kind == "message":
        turn: dict[str, Any] = {"message": _text(raw["message"], "message", allow_empty=True)}
        if raw.get("id"):
            turn["id"] = _text(raw["id"], "id")
        turn["at"] = parse_at(raw.get("at"), strict=False)
        if not turn["at"]:
            assert now is not None  # the caller passes `now` for a message without `at`
            turn["at"] = to_iso(now)
        key = turn.get("id") or turn["at"]
    elif kind == "wake":
        turn = {"wake": _text(raw["wake"], "wake")}
        key = turn["wake"]
    elif kind == "event":
        if not raw.get("key"):
            raise InputError("an event needs a key (the idempotency key)", "key")
        turn = {"event": _text(raw["event"], "event"), "key": _text(raw["key"], "key")}
        if raw.get("payload") is not None:
            turn["payload"] = check_json(raw["payload"], "payload")
        if raw.get("hop") is not None:
            turn["hop"] = _hop(raw["hop"])
        key = turn["key"]
    else:
        start = raw["start"]
        if not isinstance(start, dict) or not start.get("flow") or not start.get("key"):
            raise InputError("a start needs {flow, key}", "start")
        body: dict[str, Any] = {"flow": _text(start["flow"], "flow"), "key": _text(start["key"], "key")}
        if start.get("input") is not None:
            body["input"] = check_json(start["input"], "input")
        if start.get("hop") is not None:
            body["hop"] = _hop(start["hop"])
        turn = {"start": body}
        key = body["key"]
    return TurnInput(
        kind=kind,
        key=key[:1024],
        turn=turn,
        silenced=check_silenced(silenced),
        context=check_context(context),
        anchors=check_anchors(anchors),
        claims=check_claims(claims),
    )


def _text(value: Any, name: str, *, allow_empty: bool = False) -> str:
    if value is None or isinstance(value, dict | list | tuple | set):
        raise InputError(f"{name} must be text, got {describe(value)}", name)
    text = str(value)  # a number or an id object as text, as the engine would read it
    if not text and not allow_empty:
        raise InputError(f"{name} must not be empty", name)
    return text


def _hop(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"hop must be a whole number of at least 0, got {shown(value)}", "hop")
    return value


def _bounded(value: Any, name: str, kind: str) -> Any:
    """`value` when its dicts and lists nest at most `FALAI["MAX_JSON_DEPTH"]` levels and never
    contain themselves; else an `InputError` naming `name` (`kind`: what it must be, for a circle)."""
    try:
        jsondepth.check(value, name)  # walks without recursion, and refuses a circle
    except jsondepth.JSONDepthError as exc:
        raise InputError(str(exc), name) from None
    except ValueError as exc:
        raise InputError(f"{name} must be plain {kind} ({exc})", name) from None
    return value


def check_json(value: Any, name: str) -> Any:
    """A JSON value (what the inbox row and the engine can hold) nested at most
    `FALAI["MAX_JSON_DEPTH"]` levels, returned as is."""
    _bounded(value, name, "JSON")  # first: the encoder below recurses
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(f"{name} must be plain JSON ({exc})", name) from None
    return value


def check_context(value: Any) -> Any:
    """`context`, returned as is: any value a Python caller hands over, but its dicts and lists
    bounded like a payload's (the prompt and the templates read it)."""
    if value is UNSET or value is None:
        return value
    return _bounded(value, "context", "data")


def is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def check_silenced(value: Any) -> Any:
    """`silenced`: None, a non-empty reason, or `{reason, understand?: bool, skip?: bool}`."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise InputError("silenced: the reason must be non-empty text", "silenced")
        return value
    if not isinstance(value, dict):
        raise InputError(f"silenced must be a reason or an object {{reason, understand?, skip?}}, got "
                         f"{describe(value)}", "silenced")
    unknown = sorted(set(value) - {"reason", "understand", "skip"})
    if unknown:
        raise InputError(f"silenced: unknown keys {', '.join(unknown)}", "silenced")
    if not isinstance(value.get("reason"), str) or not value["reason"].strip():
        raise InputError("silenced: reason must be non-empty text", "silenced")
    for flag in ("understand", "skip"):
        if flag in value and not isinstance(value[flag], bool):
            raise InputError(f"silenced: {flag} must be true or false", "silenced")
    return dict(value)


def check_anchors(value: Any) -> dict[str, Any] | None:
    """`anchors`: `{name: {key: text, lastInboundAt?: ISO}}` (engine-turn §2)."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise InputError(f"anchors must be an object of {{name: {{key, lastInboundAt?}}}}, got {describe(value)}",
                         "anchors")
    out: dict[str, Any] = {}
    for name, anchor in value.items():
        if not isinstance(anchor, dict):
            raise InputError(f"anchors.{name} must be an object {{key, lastInboundAt?}}, got {describe(anchor)}",
                             "anchors")
        unknown = sorted(set(anchor) - {"key", "lastInboundAt", "last_inbound_at"})
        if unknown:
            raise InputError(f"anchors.{name}: unknown keys {', '.join(unknown)}", "anchors")
        key = anchor.get("key")
        if not isinstance(key, str) or not key:
            raise InputError(f"anchors.{name}.key must be non-empty text", "anchors")
        entry: dict[str, Any] = {"key": key}
        for spelling in ("last_inbound_at", "lastInboundAt"):  # both checked; the spec's spelling wins
            if anchor.get(spelling) is not None:
                entry["lastInboundAt"] = parse_at(anchor[spelling], f"anchors.{name}.{spelling}")
        out[str(name)] = entry
    return out


def check_claims(value: Any) -> dict[str, Any] | None:
    """`claims` from the customer's other sessions: `{held: {dedupeKey: ISO}, active: [pair]}`.

    The spec's form (engine-turn §2) is what the engine gets. `held` values may also be written
    `{"at": ISO}` (the stored claims' shape) and `active` as an object whose keys are the pairs;
    both are normalized here.
    """
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise InputError(f"claims must be an object {{held?, active?}}, got {describe(value)}", "claims")
    unknown = sorted(set(value) - {"held", "active"})
    if unknown:
        raise InputError(f"claims: unknown keys {', '.join(unknown)}", "claims")
    out: dict[str, Any] = {}
    held = value.get("held")
    if held is not None:
        if not isinstance(held, dict):
            raise InputError(f"claims.held must be an object of {{dedupeKey: ISO time}}, got {describe(held)}",
                             "claims")
        out["held"] = {}
        for key, at in held.items():
            if isinstance(at, dict):
                if set(at) != {"at"}:
                    raise InputError(f"claims.held.{key} must be an ISO time or {{at: ISO time}}", "claims")
                at = at["at"]
            parsed = parse_at(at, f"claims.held.{key}") if isinstance(at, str) else None
            if parsed is None:
                raise InputError(f"claims.held.{key} must be an ISO time or {{at: ISO time}}, got {describe(at)}",
                                 "claims")
            out["held"][str(key)] = parsed
    active = value.get("active")
    if active is not None:
        if isinstance(active, dict):
            active = list(active)
        if not isinstance(active, list) or not all(isinstance(pair, str) and pair for pair in active):
            raise InputError("claims.active must be a list of \"flowId:anchor\" texts", "claims")
        out["active"] = list(active)
    return out or None

