"""The handoff state of a conversation: who silenced the assistant, why and how.

It lives in the session itself (`session.metadata["handoff"] = {reason, mode, at, owner?}`), so
it travels with the row and is saved by the same compare-and-swap as every turn. `silence` and
`unsilence` are its one write path; `silenced_for` turns it into the `silenced` a turn gets.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from . import conf, deskstate
from .engine.errors import SessionConflictError
from .engine.jstime import to_iso
from .inputs import HANDOFF_MODES, InputError
from .stores.django import HANDOFF_KEY, DjangoStore


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
    """The caller's `silenced` wins; otherwise the conversation's handoff decides."""
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


def _update_metadata(session_id: str, change) -> Any:
    """Change `session.metadata` by compare-and-swap, replaying on a conflict."""
    store = DjangoStore()
    expected = 0
    for _ in range(conf.get("MAX_REPLAYS") + 1):
        session = store.load(session_id)  # a broken row raises InvalidSessionError: never replaced
        if session is None:
            raise UnknownConversationError(session_id)
        expected = session.version
        metadata = dict(session.metadata or {})
        change(metadata)
        try:
            return store.save(session.model_copy(update={"metadata": metadata}), expected)
        except SessionConflictError:
            continue
    raise SessionConflictError(session_id, expected, None)


def silence(session_id: str, reason: str, *, owner: str | None = None, mode: str = "stop", by: Any = None) -> Any:
    """Hand the conversation to a human (or pause it): every later input is `silenced`.

    The conversation must exist (`UnknownConversationError` otherwise; nothing is created).
    `mode` picks the form passed to the turn: "stop" (the plain string: a fresh talk step ends
    its run), "skip" (`{reason, skip: True}`: talk and say steps are skipped, `do` steps still
    run) or "understand" (`{reason, understand: True}`: fields keep landing).
    """
    if mode not in HANDOFF_MODES:
        raise InputError(f"mode must be one of {', '.join(HANDOFF_MODES)}", "mode")
    reason = (reason or "").strip()
    if not reason:
        raise InputError("a silence needs a reason", "reason")
    handoff = {"reason": reason, "mode": mode, "at": to_iso(datetime.now(UTC))}
    if owner:
        handoff["owner"] = owner
    with transaction.atomic():
        saved = _update_metadata(session_id, lambda metadata: metadata.__setitem__(
            HANDOFF_KEY, _continued(metadata.get(HANDOFF_KEY), handoff)))
        owner_user = deskstate.user_named(owner)
        if owner_user is not None:
            deskstate.set_assignee(session_id, owner_user)
        kind = "take_over" if owner else "silence"
        said = mode if owner and owner in reason else f"{reason} · {mode}"  # not "alice · human: alice · stop"
        # a take-over is marked with who owns it now (an assignment adds who assigned it)
        author = (owner_user or by) if owner else by
        deskstate.mark(session_id, kind, by=author, author_name=owner or "", text=said)
    return saved


def _continued(current: Any, handoff: dict[str, Any]) -> dict[str, Any]:
    """A new owner or form for a handoff already in force keeps when it began (`since`): the
    give-back resumes what was silenced during the whole of it."""
    if isinstance(current, dict) and current.get("reason"):
        return {**handoff, "since": current.get("since") or current.get("at")}
    return handoff


def unsilence(session_id: str, *, by: Any = None, note: str = "") -> Any:
    """Give the conversation back to the agent (`UnknownConversationError` for an unknown id).

    This is the state change alone; `host.unsilence` (`resume.unsilence`) also resumes the runs
    the handoff silenced. When a handoff was in force, a give-back marker goes in the transcript
    and the conversation is unassigned on the desk.
    """
    was: dict[str, Any] = {}

    def clear(metadata: dict[str, Any]) -> None:
        was.clear()
        was.update(metadata.pop(HANDOFF_KEY, None) or {})

    with transaction.atomic():
        saved = _update_metadata(session_id, clear)
        if was:  # back with the assistant: nobody on the desk owns it any more
            deskstate.set_assignee(session_id, None)
            deskstate.mark(session_id, "give_back", by=by, text=note)
    return saved
