"""What a webhook delivery stores: inputs in the durable inbox, reactions, delivery statuses.

All of it in one transaction, fast: no turn runs here. Each message becomes a `TurnRecord`
(status received) and a django-q2 task after commit; the workers run the turns. A redelivered
webhook stores the input again and its turn ends `unchanged` (the engine drops a wamid it has
seen). An input lost to a failed enqueue is picked up by the dispatcher's sweep of stale inputs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from falai_django.channels.whatsapp.parse import Batch, Reaction, Status
from falai_django.engine.jstime import try_parse_iso
from falai_django.host.inbox import receive
from falai_django.host.inputs import InputError
from falai_django.host.jobs import enqueue, enqueue_turn
from falai_django.host.outages import dependency_down
from falai_django.models import History, TurnRecord
from falai_django.models import Session as SessionRow

logger = logging.getLogger("falai_django.whatsapp")

# A status only moves forward: each one replaces no status yet, or only these earlier ones.
REPLACES: dict[str, tuple[str, ...]] = {
    "sent": (),
    "delivered": ("sent",),
    "read": ("sent", "delivered"),
    "failed": ("sent",),
}
REACTION_KIND = "reaction"


@dataclass
class Stored:
    inputs: int = 0
    reactions: int = 0
    statuses: int = 0
    skipped: int = 0


def store_batch(batch: Batch) -> Stored:
    """Store one webhook's messages, reactions and statuses; queue the turns after commit."""
    stored = Stored(skipped=len(batch.skipped))
    per_conversation: dict[str, list[int]] = {}
    with transaction.atomic():
        for message in batch.messages:
            try:
                record = receive(message.session_id, {"message": message.text, "id": message.id, "at": message.at},
                                 context=message.context)
            except InputError as exc:  # nothing a retry of the webhook would fix
                logger.warning("whatsapp: message %s from %s left out: %s", message.id, message.session_id, exc)
                stored.skipped += 1
                continue
            per_conversation.setdefault(message.session_id, []).append(record.pk)
            stored.inputs += 1
        # One task per conversation: its messages of this batch run in the order they were written.
        for session_id, record_ids in per_conversation.items():
            transaction.on_commit(partial(queue_turns, session_id, record_ids))
        for reaction in batch.reactions:
            stored.reactions += record_reaction(reaction)
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


def record_reaction(reaction: Reaction) -> int:
    """A reaction on the transcript (no turn); once per reaction wamid. 0 for an unknown conversation."""
    if not SessionRow.objects.filter(pk=reaction.session_id).exists():
        logger.info("whatsapp: reaction %s from %s, who has no conversation", reaction.id, reaction.session_id)
        return 0
    row = History(
        conversation_id=reaction.session_id,
        role=History.Role.USER,
        content=reaction.emoji,
        message_key=reaction.id,
        at=try_parse_iso(reaction.at or "") or timezone.now(),
        kind=REACTION_KIND,
        media={"reaction_to": reaction.message_id},
        emission_key=f"{REACTION_KIND}:{reaction.id}",  # a redelivery adds nothing
    )
    if History.objects.filter(conversation_id=reaction.session_id, emission_key=row.emission_key).exists():
        return 0
    History.objects.bulk_create([row], ignore_conflicts=True)  # a redelivery racing this one adds nothing
    return 1


def apply_status(status: Status) -> int:
    """Move the outbound row with this wamid forward to `status` (never backwards). Returns rows changed."""
    previous = REPLACES.get(status.status)
    if previous is None:
        logger.info("whatsapp: unknown status %r for %s", status.status, status.message_id)
        return 0
    # By the wamid, or by the idempotency key Meta echoes: a status may arrive before the
    # sender has stored the wamid the Graph API returned.
    mine = Q(channel_message_id=status.message_id)
    if status.callback_data and status.recipient_id:
        mine |= Q(conversation_id=status.recipient_id, idempotency_key=status.callback_data)
    rows = History.objects.filter(mine).filter(Q(delivery_status__isnull=True) | Q(delivery_status__in=previous))
    update: dict[str, Any] = {"delivery_status": status.status,
                              "delivery_at": try_parse_iso(status.at or "") or timezone.now()}
    if status.status == "failed":
        update["send_error"] = (status.error or "failed")[:2000]
    changed = rows.update(**update)
    if not changed and not History.objects.filter(channel_message_id=status.message_id).exists():
        logger.info("whatsapp: status %s for %s, which is not in the outbox", status.status, status.message_id)
    return changed
