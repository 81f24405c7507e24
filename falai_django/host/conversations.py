"""Reading conversations for people: the one read model the admin, the desk, the playground, the
API and `manage.py falai_chat` share (reads only; nothing here writes).

- `read_conversation(session_id)`: one conversation as stored — its session (or why its blob is
  refused, the row left as it is), the handoff in force and its pending wakes;
- `pending_wakes(...)`: the one wake rule — what the session waits on now (`agent.pending_wakes`),
  each with its queued row's state when the dispatcher holds one. A queued row the session no
  longer waits on is stale (firing it changes nothing), so it is not listed; when the agent
  cannot compute its wakes, the queued rows alone are shown with the reason;
- `session_state(session_id)`: the API's JSON of a conversation;
- the list's status rules and search (`conversation_status`, `STATUS_FILTERS`, `search`), derived
  from the indexed columns of the session row (never from the blob), so a filter is one indexed
  condition.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils.translation import gettext_lazy as _

from falai_django import conf
from falai_django.engine.errors import InvalidSessionError
from falai_django.engine.results import ScheduleEntry
from falai_django.engine.session import Session
from falai_django.host.inbox import public_turn_error
from falai_django.host.inputs import handoff_of
from falai_django.host.turns import context_for
from falai_django.models import History, TurnRecord, Wake
from falai_django.models import Session as SessionRow
from falai_django.models.sql import read_blob

SILENCED, ASKING, WAITING, IDLE = "silenced", "asking", "waiting", "idle"
STATUSES = (ASKING, WAITING, IDLE, SILENCED)  # every answer of conversation_status, in the admin's order
STATUS_LABELS = {
    ASKING: _("asking"),
    WAITING: _("waiting"),
    IDLE: _("idle"),
    SILENCED: _("silenced"),
}
STATUS_FILTERS = {
    SILENCED: Q(silenced_reason__isnull=False),
    ASKING: Q(silenced_reason__isnull=True, asking_flow__isnull=False),
    WAITING: Q(silenced_reason__isnull=True, asking_flow__isnull=True, run_count__gt=0),
    IDLE: Q(silenced_reason__isnull=True, asking_flow__isnull=True) & (Q(run_count__isnull=True) | Q(run_count=0)),
}
logger = logging.getLogger("falai_django.host")

COMPUTED = "computed"  # the state of a wake the session waits on that no queued row holds yet


@dataclass(frozen=True)
class PendingWake:
    """A wake the conversation waits on: `state` is its queued row's (`pending`, `queued`) or
    "computed" when no row holds it; `entry` is the agent's schedule entry (None when the agent
    could not compute its wakes and the queued row is all there is)."""

    key: str
    at: datetime
    state: str
    entry: ScheduleEntry | None = None

    @property
    def queued(self) -> bool:
        return self.state != COMPUTED


@dataclass(frozen=True)
class ConversationRead:
    """One conversation as stored, for people. `session` is None when the row does not exist
    (`exists` False) or its blob is refused (`invalid` says why; the row is never touched)."""

    session_id: str
    exists: bool
    session: Session | None
    blob: Any  # the stored blob as the database hands it over (the admin shows it raw)
    invalid: str
    handoff: dict[str, Any] | None
    wakes: list[PendingWake] = field(default_factory=list)
    wakes_problem: str = ""  # why the agent could not compute the wakes ("" when it could)


def read_conversation(session_id: str, *, agent: Any = None, wakes: bool = True) -> ConversationRead:
    """The conversation `session_id` as stored, with its handoff and (unless `wakes=False`) its
    pending wakes. Never raises for a broken blob: `invalid` carries the reason."""
    row = SessionRow.objects.filter(pk=session_id).values_list("blob", flat=True)[:1]
    blobs = list(row)
    if not blobs:  # no row, so no wakes either (they cascade with it)
        return ConversationRead(session_id, False, None, None, "", None)
    blob = blobs[0]
    try:
        session, invalid = read_blob(blob, session_id), ""
    except InvalidSessionError as exc:
        session, invalid = None, str(exc)
    found, problem = pending_wakes(session_id, session, agent) if wakes else ([], "")
    return ConversationRead(session_id, True, session, blob, invalid, handoff_of(session), found, problem)


def pending_wakes(session_id: str, session: Session | None, agent: Any = None) -> tuple[list[PendingWake], str]:
    """The conversation's pending wakes, soonest first, and why the agent could not compute them
    ("" when it could). See the module docstring for the rule."""
    queued = {w.key: w for w in Wake.objects.filter(conversation_id=session_id).open().order_by("at")}
    if session is None:
        return [PendingWake(w.key, w.at, w.state) for w in queued.values()], ""
    try:
        agent = agent or conf.get_agent()
        computed = agent.pending_wakes(session=session, context=context_for(session_id, session, {}))
    except Exception as exc:  # noqa: BLE001 - a page must render without a working agent
        logger.warning("falai: the agent cannot compute the wakes of %s: %s", session_id, exc, exc_info=True)
        return [PendingWake(w.key, w.at, w.state) for w in queued.values()], f"{type(exc).__name__}: {exc}"
    found = []
    for entry in computed:
        row = queued.get(entry.key)
        found.append(PendingWake(entry.key, row.at, row.state, entry) if row is not None
                     else PendingWake(entry.key, entry.at, COMPUTED, entry))
    return sorted(found, key=lambda w: w.at), ""


def session_state(session_id: str, *, history_limit: int = 50, agent: Any = None) -> dict[str, Any] | None:
    """The conversation as the API shows it: session, handoff, pending wakes, recent transcript.
    None for an unknown id; `InvalidSessionError` for a blob the stores refuse."""
    read = read_conversation(session_id, agent=agent)
    if not read.exists:
        return None
    if read.session is None:
        read_blob(read.blob, session_id)  # raises the InvalidSessionError the API reports
    items = list(History.objects.filter(conversation_id=session_id).order_by("-id")[:history_limit])
    items.reverse()
    turns = TurnRecord.objects.filter(conversation_id=session_id).order_by("-id")[:20]
    return {
        "session": read.session.to_json(),
        "handoff": read.handoff,
        "pending_wakes": [w.entry.to_json() for w in read.wakes if w.entry is not None],
        "queued_wakes": [{"key": w.key, "at": w.at, "state": w.state} for w in read.wakes if w.queued],
        "history": [
            {"role": i.role, "content": i.content, "message_key": i.message_key, "at": i.at, "kind": i.kind,
             "send_status": i.send_status}
            for i in items
        ],
        "turns": [
            {"id": t.pk, "kind": t.kind, "input_key": t.input_key, "status": t.status, "replays": t.replays,
             "received_at": t.received_at, "error": public_turn_error(t.error)}
            for t in turns
        ],
    }


def conversation_status(row: Any) -> str:
    if row.silenced_reason:
        return SILENCED
    if row.asking_flow:
        return ASKING
    if row.run_count:
        return WAITING
    return IDLE


def search(queryset: QuerySet, text: str) -> QuerySet:
    """What the admin's search box finds: the conversation id, a collected value, transcript words."""
    words = History.objects.filter(conversation_id=OuterRef("pk"), content__icontains=text)
    return queryset.filter(Q(id__icontains=text) | Q(blob__data__icontains=text) | Exists(words))
