"""What a webhook delivery stores: inputs in the durable inbox, transcript notes, delivery statuses.

All of it in one transaction, fast: no turn runs here. Each message becomes a `TurnRecord`
(status received) and a django-q2 task after commit; the workers run the turns. A redelivered
webhook stores the input again and its turn ends `unchanged` (the engine drops a wamid it has
seen). An input lost to a failed enqueue is picked up by the dispatcher's sweep of stale inputs.

Notes change the transcript without a turn: a reaction adds a line; an edit replaces the text of
the line it edits (the earlier texts kept in `media["previous"]`, `edited_at` set) and a revoke
marks it deleted (`deleted_at`; the model no longer reads it). An edit is not a new input — the
Cloud API sends it as a change to a message the agent may have answered already — but an edit of
a message still waiting in the inbox replaces the text its turn will read. A note whose message
is nowhere yet is written as its own line (kind `edit` / `revoke`), so nothing is lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from falai_django.channels.whatsapp.parse import Batch, Note, Reaction, Status
from falai_django.engine.jstime import to_iso, try_parse_iso
from falai_django.host import statuses
from falai_django.host.inbox import receive
from falai_django.host.inputs import InputError
from falai_django.host.jobs import enqueue, enqueue_turn
from falai_django.host.outages import dependency_down
from falai_django.models import History, TurnRecord
from falai_django.models import Session as SessionRow
from falai_django.observe import metrics

logger = logging.getLogger("falai_django.whatsapp")

CHANNEL = "whatsapp"
REACTION_KIND = "reaction"
NOTE_KINDS = ("edit", "revoke", "system", "unsupported")  # a note's own line, when it has one


@dataclass
class Stored:
    inputs: int = 0
    reactions: int = 0
    statuses: int = 0
    skipped: int = 0
    notes: int = 0


def store_batch(batch: Batch) -> Stored:
    """Store one webhook's messages, notes and statuses; queue the turns after commit."""
    stored = Stored(skipped=len(batch.skipped))
    for item in batch.skipped:
        if item.type:  # a message or status left out (not an envelope of another number or field)
            metrics.inbound_skipped(CHANNEL, item.type)
    per_conversation: dict[str, list[int]] = {}
    with transaction.atomic():
        for message in batch.messages:
            turn_input: dict[str, Any] = (
                {"event": message.event, "key": message.id} if message.event
                else {"message": message.text, "id": message.id, "at": message.at})
            try:
                record = receive(message.session_id, turn_input, context=message.context)
            except InputError as exc:  # nothing a retry of the webhook would fix
                kind = str(message.context.get("whatsapp", {}).get("type") or "")
                logger.warning("whatsapp: left out a %r message %s of conversation %s: %s", kind, message.id,
                               message.session_id, exc)
                metrics.inbound_skipped(CHANNEL, kind)
                stored.skipped += 1
                continue
            per_conversation.setdefault(message.session_id, []).append(record.pk)
            stored.inputs += 1
        # One task per conversation: its messages of this batch run in the order they were written.
        for session_id, record_ids in per_conversation.items():
            transaction.on_commit(partial(queue_turns, session_id, record_ids))
        for reaction in batch.reactions:
            stored.reactions += record_reaction(reaction)
        for note in batch.notes:
            stored.notes += record_note(note)
        for status in batch.statuses:
            stored.statuses += apply_status(status)
    return stored


def queue_turns(session_id: str, record_ids: list[int]) -> None:
    """Hand one conversation's stored inputs to the workers. A broker that is down must not fail
    the webhook (Meta would retry it): the inputs stay `received`, marked due at once
    (`next_attempt_at`), and the dispatcher's next sweep hands them over (`retry_parked`)."""
    try:
        if len(record_ids) == 1:
            enqueue_turn(record_ids[0])
        else:
            enqueue("falai_django.tasks.process_turns", record_ids)
    except Exception as exc:  # noqa: BLE001 - logged; the stored inputs are swept up
        logger.warning("whatsapp: could not queue inputs %s of conversation %s (%s); the dispatcher's sweep "
                       "hands them over", record_ids, session_id, type(exc).__name__,
                       exc_info=dependency_down(exc) is None)
        try:
            TurnRecord.objects.filter(id__in=record_ids, status=TurnRecord.Status.RECEIVED,
                                      next_attempt_at__isnull=True).update(next_attempt_at=timezone.now())
        except Exception:  # noqa: BLE001 - the database went too: the ten-minute sweep still finds them
            logger.warning("whatsapp: could not mark inputs %s of conversation %s due; the sweep finds them "
                           "after ten minutes", record_ids, session_id, exc_info=True)


def _known(session_id: str, what: str, wamid: str) -> bool:
    """Whether the conversation exists; a note for one that does not is logged and counted."""
    if SessionRow.objects.filter(pk=session_id).exists():
        return True
    logger.warning("whatsapp: left out a %s %s of conversation %s, which has no transcript yet", what, wamid,
                   session_id)
    metrics.inbound_skipped(CHANNEL, what)
    return False


def _note_line(session_id: str, wamid: str, at: datetime, kind: str, **fields: Any) -> int:
    """A line of its own on the transcript, once per wamid (a redelivery adds nothing)."""
    key = f"{kind}:{wamid}"
    if History.objects.filter(conversation_id=session_id, emission_key=key).exists():
        return 0
    fields.setdefault("role", History.Role.USER)
    History.objects.bulk_create([History(conversation_id=session_id, message_key=wamid, at=at, kind=kind,
                                         emission_key=key, **fields)], ignore_conflicts=True)
    return 1


def record_reaction(reaction: Reaction) -> int:
    """A reaction on the transcript (no turn); once per reaction wamid. 0 for an unknown conversation."""
    if not _known(reaction.session_id, REACTION_KIND, reaction.id):
        return 0
    return _note_line(reaction.session_id, reaction.id, try_parse_iso(reaction.at or "") or timezone.now(),
                      REACTION_KIND, content=reaction.emoji, media={"reaction_to": reaction.message_id})


def record_note(note: Note) -> int:
    """An edit, a revoke or a notice on the transcript (no turn). Returns lines written or changed."""
    at = try_parse_iso(note.at or "") or timezone.now()
    if note.kind == "edit" and note.original_id and _edit_waiting_input(note, at):
        return 1  # before the conversation check: a first message may still be waiting for its turn
    if not _known(note.session_id, note.kind, note.id):
        return 0
    if note.kind in ("edit", "revoke") and note.original_id:
        if _change_line(note, at):
            return 1
        logger.info("whatsapp: %s %s of message %s (conversation %s), which is not on the transcript yet; "
                    "written as its own line", note.kind, note.id, note.original_id, note.session_id)
        media = {f"{note.kind}_of": note.original_id}
        return _note_line(note.session_id, note.id, at, note.kind, content=note.text, media=media,
                          deleted_at=at if note.kind == "revoke" else None)
    role = History.Role.SYSTEM if note.kind == "system" else History.Role.USER
    media = {key: note.context[key] for key in ("system", "unsupported_type", "errors") if note.context.get(key)}
    return _note_line(note.session_id, note.id, at, note.kind, role=role, content=note.text, media=media or None)


def _change_line(note: Note, at: datetime) -> bool:
    """Edit or mark deleted the customer's line with the original wamid. False: no such line."""
    line = (History.objects.select_for_update()
            .filter(conversation_id=note.session_id, role=History.Role.USER, message_key=note.original_id)
            .exclude(kind__in=[REACTION_KIND, *NOTE_KINDS]).order_by("id").first())
    if line is None:
        return False
    media = dict(line.media or {})
    if note.kind == "revoke":
        if line.deleted_at is None:
            line.deleted_at = at
            line.save(update_fields=["deleted_at"])
        return True
    if any(edit.get("id") == note.id for edit in media.get("previous", [])):
        return True  # a redelivered edit
    media["previous"] = [*media.get("previous", []),
                         {"id": note.id, "text": line.content, "at": to_iso(line.edited_at or line.at)}]
    line.content, line.edited_at, line.media = note.text, at, media
    line.save(update_fields=["content", "edited_at", "media"])
    return True


def _edit_waiting_input(note: Note, at: datetime) -> bool:
    """An edit of a message whose turn has not started: its turn reads the edited text."""
    now = timezone.now()
    record = (TurnRecord.objects.select_for_update()
              .filter(conversation_id=note.session_id, input_key=note.original_id, status=TurnRecord.Status.RECEIVED)
              .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)).first())
    if record is None or "message" not in (record.input or {}).get("turn", {}):
        return False
    data = dict(record.input)
    data["turn"] = {**data["turn"], "message": note.text}
    context = data.get("context")
    if isinstance(context, dict) and isinstance(context.get("whatsapp"), dict):
        data["context"] = {**context, "whatsapp": {**context["whatsapp"], "edited_at": to_iso(at)}}
    record.input = data
    record.save(update_fields=["input"])
    return True


def apply_status(status: Status) -> int:
    """Move the outbound row with this wamid forward to `status` (never backwards); a status whose
    row is not recorded yet is kept and applied when it is (`host.statuses`). Returns rows changed."""
    return statuses.apply(status, channel=CHANNEL)
