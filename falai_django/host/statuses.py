"""A channel's delivery statuses on the outbox rows: `sent`, `delivered`, `read`, `failed`.

A status finds its row by the channel's message id (stored when the send returned it) or by the
idempotency key the channel echoes (`callback_data`) within the conversations it names. A status
that matches no row yet — it came before the send was recorded, or the row is still being
written — is kept (`EarlyStatus`) and applied by the dispatcher's sweep once the row appears
(`apply_early`), never dropped: only one still unmatched after `KEEP_FOR` is let go, with a
warning naming the conversation and a count in `falai_delivery_statuses_total{result="expired"}`.
A channel's sender may apply them at once when its send returns the message id
(`apply_early_for`; the WhatsApp sender does).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db.models import Q, QuerySet
from django.utils import timezone

from falai_django.engine.jstime import try_parse_iso
from falai_django.models import EarlyStatus, History
from falai_django.observe import metrics

logger = logging.getLogger("falai_django.host")

# A status only moves forward: each one replaces no status yet, or only these earlier ones.
REPLACES: dict[str, tuple[str, ...]] = {
    "sent": (),
    "delivered": ("sent",),
    "read": ("sent", "delivered"),
    "failed": ("sent",),
}
# How long a status that matches no row is kept waiting for it. A send is recorded within
# seconds of the channel's answer; a day covers a dispatcher that was down meanwhile. What
# never matches (a message sent by another tool on the same number) is let go after it.
KEEP_FOR = timedelta(hours=24)
BATCH = 500


class StatusReport(Protocol):
    """What a channel reports (`channels.whatsapp.parse.Status` is one). Read-only members, so a
    frozen dataclass is one."""

    @property
    def message_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def at(self) -> str | None: ...
    @property
    def error(self) -> str: ...
    @property
    def callback_data(self) -> str: ...
    @property
    def recipients(self) -> list[str]: ...


@dataclass(frozen=True)
class Kept:
    """An `EarlyStatus` row read back as a report (its time is the row's `at`, already parsed)."""

    message_id: str
    status: str
    error: str
    callback_data: str
    recipients: list[str]

    @classmethod
    def of(cls, row: EarlyStatus, **found_by: Any) -> Kept:
        """`found_by` replaces how the row is looked for (`callback_data`, `recipients`)."""
        fields = {"message_id": row.message_id, "status": row.status, "error": row.error,
                  "callback_data": row.callback_data, "recipients": list(row.recipients or [])}
        return cls(**{**fields, **found_by})


def _rows(report: StatusReport | Kept) -> QuerySet[History]:
    mine = Q(channel_message_id=report.message_id)
    if report.callback_data and report.recipients:
        mine |= Q(conversation_id__in=report.recipients, idempotency_key=report.callback_data)
    return History.objects.filter(mine)


def _update(report: StatusReport | Kept, at: datetime | None) -> int:
    """Move the report's row forward to its status (a row with no status, or an earlier one)."""
    previous = REPLACES.get(report.status, ())
    rows = _rows(report).filter(Q(delivery_status__isnull=True) | Q(delivery_status__in=previous))
    update: dict[str, Any] = {"delivery_status": report.status, "delivery_at": at or timezone.now()}
    if report.status == "failed":
        update["send_error"] = (report.error or "failed")[:2000]
    return rows.update(**update)


def apply(report: StatusReport, *, channel: str) -> int:
    """Move the row this status is about forward (never backwards). Returns rows changed; a status
    whose row is not there yet is kept for `apply_early`."""
    if report.status not in REPLACES:
        logger.warning("falai %s: unknown delivery status %r for %s (conversation %s); left out", channel,
                       report.status, report.message_id, ",".join(report.recipients) or "?")
        metrics.status_reported(channel, "unknown")
        return 0
    at = try_parse_iso(report.at or "")
    changed = _update(report, at)
    if changed:
        metrics.status_reported(channel, "applied")
        return changed
    if _rows(report).exists():  # the row has this status or a later one already (`read` then `delivered`)
        metrics.status_reported(channel, "stale")
        return 0
    EarlyStatus.objects.bulk_create([EarlyStatus(
        channel=channel, message_id=report.message_id[:255], status=report.status, at=at,
        recipients=report.recipients, callback_data=report.callback_data[:255],
        error=report.error[:2000])], ignore_conflicts=True)  # a redelivery keeps nothing twice
    logger.info("falai %s: status %s for %s (conversation %s) came before its message was recorded; kept",
                channel, report.status, report.message_id, ",".join(report.recipients) or "?")
    metrics.status_reported(channel, "kept")
    return 0


def apply_early(now: datetime | None = None) -> dict[str, int]:
    """Apply the kept statuses whose row has appeared, oldest first; let go of those kept past
    `KEEP_FOR`. Run by the dispatcher's sweep (every two seconds). Returns what it did."""
    now = now or timezone.now()
    done = {"applied": 0, "expired": 0}
    kept = list(EarlyStatus.objects.order_by("id")[:BATCH])
    if not kept:
        return done
    finished: list[int] = []
    for row in kept:
        report = Kept.of(row)
        if _update(report, row.at) or _rows(report).exists():
            finished.append(row.pk)
            done["applied"] += 1
            metrics.status_reported(row.channel, "applied_late")
        elif row.received_at < now - KEEP_FOR:
            finished.append(row.pk)
            done["expired"] += 1
            metrics.status_reported(row.channel, "expired")
            logger.warning("falai %s: status %s for %s (conversation %s) matched no sent message in %s; let go",
                           row.channel, row.status, row.message_id, ",".join(report.recipients) or "?", KEEP_FOR)
    EarlyStatus.objects.filter(pk__in=finished).delete()
    return done


def apply_early_for(message_id: str, *, session_id: str, idempotency_key: str, channel: str) -> int:
    """Right after a send returned `message_id`: apply the statuses kept for it to the row being
    sent (found by its idempotency key: the row learns its message id only after this). One index
    probe per send, which is dwarfed by the channel's own round trip. Returns statuses applied."""
    kept = list(EarlyStatus.objects.filter(channel=channel, message_id=message_id).order_by("id"))
    for row in kept:
        _update(Kept.of(row, callback_data=idempotency_key, recipients=[session_id]), row.at)
        metrics.status_reported(channel, "applied_late")
    if kept:
        EarlyStatus.objects.filter(pk__in=[row.pk for row in kept]).delete()
    return len(kept)
