"""The desk for the human team: queues, ownership, notes, read markers, and the transcript with
its markers. The admin's desk views call these; the handoff itself goes through `host.silencing`
(take over, give back with the resume) and `actions` (reply as a human: its outbox row is the one
`outbox_row`).

Queues (each a `Conversation` queryset, the blob deferred):

- `waiting` — a handoff is in force (taken over or silenced) and the customer wrote last;
- `mine` — assigned to this user;
- `open` — a handoff is in force or the conversation is assigned to someone.

Unread counts are per user: customer messages newer than the last item the user saw in that
conversation (`ReadMarker`), which the desk moves when the conversation is on screen.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from falai_django.handoff.actions import HUMAN_KIND, load_session
from falai_django.host import desk_rows
from falai_django.host.inputs import handoff_of
from falai_django.host.jobs import hand_over_sends
from falai_django.host.silencing import give_back, human_reason, silence, take_over
from falai_django.models import Assignment, Conversation, DeskEntry, History, ReadMarker

WAITING, MINE, OPEN = "waiting", "mine", "open"
QUEUES = (WAITING, MINE, OPEN)
HANDOFF_PERMISSION = "falai_django.handoff_conversation"
TRANSCRIPT_LIMIT = 200
QUEUE_LIMIT = 100


class DeskError(ValueError):
    """The desk operation cannot run (its message says why)."""


# -- queues and unread counts -------------------------------------------------------------------


def _last_role() -> Subquery:
    return Subquery(History.objects.filter(conversation=OuterRef("pk")).order_by("-id").values("role")[:1])


def _unread(user: Any) -> Coalesce:
    last_read = Subquery(ReadMarker.objects.filter(user=user, conversation=OuterRef(OuterRef("pk")))
                         .values("last_read_id")[:1])
    newer = (History.objects.filter(conversation=OuterRef("pk"), role=History.Role.USER)
             .filter(id__gt=Coalesce(last_read, Value(0), output_field=IntegerField()))
             .order_by().values("conversation").annotate(n=Count("id")).values("n")[:1])
    return Coalesce(Subquery(newer, output_field=IntegerField()), Value(0))


def queue(name: str, user: Any) -> QuerySet:
    """The conversations of one queue, newest customer message first, with `unread` and `last_role`."""
    rows = Conversation.objects.defer("blob").select_related("assignment__assignee")
    if name == WAITING:
        rows = rows.filter(silenced_reason__isnull=False).annotate(last_role=_last_role()).filter(
            last_role=History.Role.USER)
    elif name == MINE:
        rows = rows.filter(assignment__assignee=user)
    elif name == OPEN:  # a union of two small sets, each off its own index (not an OR over every row)
        handed = Conversation.objects.filter(silenced_reason__isnull=False).values("pk")
        rows = rows.filter(pk__in=handed.union(Assignment.objects.values("conversation_id")))
    else:
        raise DeskError(f"unknown queue {name!r}; the queues are {', '.join(QUEUES)}")
    return rows.annotate(unread=_unread(user)).order_by("-last_user_at", "id")


def queue_counts(user: Any, known: dict[str, list[int]] | None = None) -> dict[str, dict[str, int]]:
    """Per queue: how many conversations (up to QUEUE_LIMIT), and how many customer messages this
    user has not read in them. `known` gives the unread counts of a queue the caller has read
    already (the desk's current queue), so it is not read twice."""
    counts = {}
    for name in QUEUES:
        if known and name in known:
            rows = known[name][:QUEUE_LIMIT]
        else:
            rows = list(queue(name, user).values_list("unread", flat=True)[:QUEUE_LIMIT])
        counts[name] = {"count": len(rows), "unread": sum(rows)}
    return counts


def unread_total(user: Any) -> int:
    """Unread customer messages across the desk (the `open` queue): the tab title's count."""
    return queue_counts(user)[OPEN]["unread"]


def mark_read(user: Any, session_id: str) -> int:
    """The user has seen the conversation up to its newest item; returns that item's id."""
    newest = History.objects.filter(conversation_id=session_id).order_by("-id").values_list("id", flat=True).first()
    if newest is None or user is None or not user.is_authenticated:
        return 0
    marker, created = ReadMarker.objects.get_or_create(user=user, conversation_id=session_id,
                                                       defaults={"last_read_id": newest})
    if not created and marker.last_read_id < newest:
        ReadMarker.objects.filter(pk=marker.pk, last_read_id__lt=newest).update(last_read_id=newest)
    return newest


# -- who may own a conversation -------------------------------------------------------------------


def agents() -> QuerySet:
    """Active staff who hold the handoff permission (directly, by group, or as superusers)."""
    model = get_user_model()
    staff = model._default_manager.filter(is_staff=True, is_active=True).order_by(model.USERNAME_FIELD)
    try:
        return model._default_manager.with_perm(HANDOFF_PERMISSION).filter(is_staff=True, is_active=True).order_by(
            model.USERNAME_FIELD)
    except ValueError:  # several authentication backends: ask each staff user (a team is small)
        return staff.filter(pk__in=[user.pk for user in staff[:1000] if user.has_perm(HANDOFF_PERMISSION)])


def _exists(session_id: str) -> None:
    if not Conversation.objects.filter(pk=session_id).exists():
        raise DeskError(f"conversation {session_id!r} does not exist")


def claim(session_id: str, user: Any, *, understand: bool | None = None) -> None:
    """The user owns the conversation: assigned to them and taken over in their name.

    A conversation already silenced keeps its form (stop, skip or understand); a new take-over
    uses `understand`, or the `HANDOFF_UNDERSTAND` default.
    """
    assign(session_id, user, by=user, understand=understand)


def assign(session_id: str, assignee: Any, *, by: Any, understand: bool | None = None) -> None:
    """Assign the conversation to `assignee` (a user with the handoff permission) and take it over
    in their name: the handoff's owner is the assignee's username."""
    _exists(session_id)
    if assignee is None or not agents().filter(pk=assignee.pk).exists():
        raise DeskError("a conversation can only be assigned to active staff with the handoff permission")
    current = handoff_of(load_session(session_id))
    owner = assignee.get_username()
    with transaction.atomic():
        if current and understand is None:  # a new owner keeps the form in force (stop, skip, understand)
            silence(session_id, human_reason(owner), owner=owner, mode=current.get("mode") or "stop", by=by)
        else:
            take_over(session_id, owner, understand=understand, by=by)
        desk_rows.set_assignee(session_id, assignee)
        if by is not None and by.pk != assignee.pk:
            desk_rows.mark(session_id, DeskEntry.Kind.ASSIGN, by=by, text=assignee.get_username())


def add_note(session_id: str, user: Any, text: str) -> DeskEntry:
    """An internal note: shown to the team in the transcript, never sent, never fed to the agent."""
    text = (text or "").strip()
    if not text:
        raise DeskError("a note needs text")
    _exists(session_id)
    return desk_rows.mark(session_id, DeskEntry.Kind.NOTE, by=user, text=text)


def resolve(session_id: str, user: Any, note: str = "", *, agent: Any = None) -> None:
    """Done with it: give the conversation back to the assistant (resuming what the handoff
    silenced), unassign it, and leave the note in the transcript."""
    _exists(session_id)
    note = (note or "").strip()
    give_back(session_id, by=user, agent=agent)
    with transaction.atomic():
        desk_rows.set_assignee(session_id, None)
        desk_rows.mark(session_id, DeskEntry.Kind.RESOLVE, by=user, text=note)


def retry_send(session_id: str, item_id: int) -> History:
    """Put a failed outbound message back in the outbox: it is sent again (same idempotency key,
    so the channel can drop it if the first attempt did land). The last error stays on the row
    until a send succeeds."""
    with transaction.atomic():
        row = History.objects.select_for_update().filter(pk=item_id, conversation_id=session_id).first()
        if row is None or row.role != History.Role.ASSISTANT:
            raise DeskError(f"no outbound message {item_id} in this conversation")
        if row.send_status != History.SendStatus.FAILED:
            raise DeskError("only a failed send can be retried")
        now = timezone.now()
        History.objects.filter(pk=row.pk).update(send_status=History.SendStatus.PENDING, send_attempts=0,
                                                 next_attempt_at=None, queued_at=now)
        hand_over_sends(session_id)
    row.refresh_from_db()
    return row


# -- the transcript, with its markers -------------------------------------------------------------


def transcript(session_id: str, limit: int = TRANSCRIPT_LIMIT) -> tuple[list[dict[str, Any]], int]:
    """The last `limit` messages with the markers and notes of the same span, oldest first; and
    the total number of messages."""
    from django.utils.translation import gettext

    rows = list(History.objects.filter(conversation_id=session_id).order_by("-id")[:limit])
    rows.reverse()
    total = len(rows)
    if total == limit:
        total = History.objects.filter(conversation_id=session_id).count()
    entries = DeskEntry.objects.filter(conversation_id=session_id).order_by("id")
    if total > len(rows) and rows:
        entries = entries.filter(after_item__gte=rows[0].pk)
    items: list[dict[str, Any]] = []
    for row in rows:
        if row.role == History.Role.USER:
            who, label, author = "customer", gettext("customer"), ""
        elif row.kind == HUMAN_KIND:
            author = (row.message_key or "").removeprefix(f"{HUMAN_KIND}:")
            who, label = "human", gettext("human agent")
        elif row.role == History.Role.ASSISTANT:
            who, label, author = "assistant", gettext("assistant"), ""
        else:
            who, label, author = "system", gettext("system"), ""
        items.append({
            "type": "message", "id": row.pk, "who": who, "label": label, "author": author, "text": row.content,
            "at": row.sent_at or row.at, "send_status": row.send_status or "",
            "send_status_label": row.get_send_status_display() if row.send_status else "",
            "send_error": row.send_error,
            # the channel's report after the send (WhatsApp statuses), and why it failed, shown in full
            "delivery": row.delivery_status or "",
            "delivery_label": row.get_delivery_status_display() if row.delivery_status else "",
            "failure": row.send_error if row.delivery_status == "failed" and row.send_status == "sent" else "",
            "step": f"{row.run_id or ''} · {row.step_id}" if row.step_id else "",
            # the customer changed it afterwards: the earlier texts, and whether they deleted it
            "edited": bool(row.edited_at),
            "previous": [str(edit.get("text", "")) for edit in (row.media or {}).get("previous", [])]
            if row.edited_at else [],
            "deleted": bool(row.deleted_at),
            "media_label": media_label(row),
            "sort": (row.pk, 0, 0),
        })
    for entry in entries.select_related("author"):
        items.append({
            "type": "note" if entry.kind == DeskEntry.Kind.NOTE else "marker", "id": entry.pk, "kind": entry.kind,
            "label": entry.get_kind_display(),
            "author": entry.author.get_username() if entry.author is not None else entry.author_name,
            "text": entry.text, "at": entry.at, "sort": (entry.after_item, 1, entry.pk),
        })
    items.sort(key=lambda item: item["sort"])
    return items, total


def media_label(row: History) -> str:
    """What a line carried besides its text: a customer's voice note transcribed (or not), an
    image described, a document; the media slug a `say` step sent. "" for a plain line."""
    from django.utils.translation import gettext

    media = row.media if isinstance(row.media, dict) else {}
    if row.role == History.Role.ASSISTANT:
        return gettext("with media: %(slug)s") % {"slug": media["slug"]} if media.get("slug") else ""
    kind = media.get("type")
    if row.role != History.Role.USER or not media.get("id") or not isinstance(kind, str):
        return ""
    outcome = media.get("outcome")
    if kind == "audio":
        voice = bool(media.get("voice"))
        if outcome == "transcribed":
            return gettext("transcribed voice note") if voice else gettext("transcribed audio")
        return gettext("voice note, not transcribed") if voice else gettext("audio, not transcribed")
    if kind == "image" and outcome == "described":
        return gettext("image, described")
    labels = {"image": gettext("image"), "video": gettext("video"), "document": gettext("document"),
              "sticker": gettext("sticker")}
    return labels.get(kind, "")


def _digest(shown: str) -> str:
    """A page's poll signature: what it shows, hashed (the page sends it back as `since`)."""
    return hashlib.sha256(shown.encode()).hexdigest()[:16]


def signature(items: list[dict[str, Any]], extra: Any = "") -> str:
    """What changes when the transcript on screen must be redrawn (a new item, a send status)."""
    parts = [f"{i['type']}:{i['id']}:{i.get('send_status', '')}:{i.get('send_error', '')}:{i.get('text', '')}:"
             f"{i.get('deleted', '')}" for i in items]
    return _digest("|".join([*parts, str(extra)]))


def queue_signature(rows: list[dict[str, Any]], tabs: list[dict[str, Any]]) -> str:
    """What the queue page shows (its rows and its tabs' counts): a poll whose page shows this has
    nothing to redraw."""
    shown = [(r["id"], r["owner"], r["reason"], str(r["last_user_at"]), r["unread"]) for r in rows]
    counts = [(t["name"], t["count"], t["unread"]) for t in tabs]
    return _digest(repr((shown, counts)))
