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
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
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
    assert read.session is not None  # read_blob raised above for the blob read_conversation refused
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


# The list's order (the admin's and `GET sessions`): newest customer message first, conversations
# without one last, the id breaking ties. PostgreSQL walks `falai_sess_recent` for it.
LIST_ORDER = (F("last_user_at").desc(nulls_last=True), "id")
OWNERS_SHOWN = 200
SEARCH_LIST_UP_TO = 1000  # matches a search hands over as a list of ids (more: a subquery)


def owners(limit: int = OWNERS_SHOWN) -> list[str]:
    """The people conversations are handed to now (`human_owner`), sorted: the admin's owner
    filter. On PostgreSQL a loose index scan of the partial `falai_sess_owner` index (one probe
    per distinct owner, however many conversations each holds); elsewhere a DISTINCT."""
    connection = connections[SessionRow.objects.db]
    if connection.vendor != "postgresql":
        rows = (SessionRow.objects.filter(human_owner__isnull=False).order_by("human_owner")
                .values_list("human_owner", flat=True).distinct())
        return [owner for owner in rows[:limit] if owner is not None]  # none is: filtered above
    table = SessionRow._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"""
            WITH RECURSIVE owner AS (
              (SELECT "human_owner" AS name FROM "{table}" WHERE "human_owner" IS NOT NULL
               ORDER BY "human_owner" LIMIT 1)
              UNION ALL
              SELECT (SELECT "human_owner" FROM "{table}" WHERE "human_owner" > owner.name
                      ORDER BY "human_owner" LIMIT 1)
              FROM owner WHERE owner.name IS NOT NULL)
            SELECT name FROM owner WHERE name IS NOT NULL LIMIT %s""", [limit])
        return [name for (name,) in cursor.fetchall()]


def search(queryset: QuerySet, text: str) -> QuerySet:
    """What the admin's search box and `GET sessions?q=` find: conversations whose id (a phone
    number) or a collected value (a customer's name) contains the text, or whose transcript has
    its words.

    On PostgreSQL it is one `id IN (… UNION …)` over indexes (`models.search_indexes`): the id and
    the collected values by `ILIKE` (trigram indexes, three characters or more), the transcript
    by full-text search of each word as a prefix (`'simple'` configuration: no stemming, no stop
    words), so a million conversations and tens of millions of transcript lines are searched in
    milliseconds. Elsewhere (SQLite) the same three conditions are `icontains` scans."""
    text = text.strip()
    if not text:
        return queryset
    connection = connections[queryset.db]
    if connection.vendor == "postgresql":
        sql, params = _postgres_search(text, connection)
        # The ids first, as a list: the planner cannot tell a name's 40 matches from a common
        # word's 400,000 (its estimate for a full-text prefix is a guess), and with a short list
        # the page is a walk of the primary key. A search that matches more stays a subquery.
        with connection.cursor() as cursor:
            cursor.execute(f"{sql} LIMIT %s", [*params, SEARCH_LIST_UP_TO + 1])
            found = [row[0] for row in cursor.fetchall()]
        if len(found) <= SEARCH_LIST_UP_TO:
            return queryset.filter(pk__in=found)
        return queryset.filter(pk__in=RawSQL(sql, params))
    words = History.objects.filter(conversation_id=OuterRef("pk"), content__icontains=text)
    return queryset.filter(Q(id__icontains=text) | Q(blob__data__icontains=text) | Exists(words))


def _postgres_search(text: str, connection: Any) -> tuple[str, list[Any]]:
    from falai_django.models.search_indexes import DATA_TEXT, WORDS

    sessions, history = SessionRow._meta.db_table, History._meta.db_table
    like = f"%{connection.ops.prep_for_like_query(text)}%"  # the text's own % and _ are literal
    parts = [f'SELECT "id" FROM "{sessions}" WHERE "id" ILIKE %s',
             f'SELECT "id" FROM "{sessions}" WHERE {DATA_TEXT} ILIKE %s']
    params: list[Any] = [like, like]
    words = re.findall(r"[^\W_]+", text.lower())  # what to_tsquery takes as one word
    if words:  # each word a prefix: "integr" finds "integram"
        parts.append(f'SELECT "conversation_id" FROM "{history}" WHERE {WORDS} @@ to_tsquery(\'simple\', %s)')
        params.append(" & ".join(f"{word}:*" for word in words))
    return " UNION ".join(parts), params
