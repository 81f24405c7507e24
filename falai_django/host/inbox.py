"""The durable inbox: an input is a `TurnRecord` row before its turn runs, and its run log after.

- `receive` checks the input (`inputs.parse_turn_input`) and builds its row; the loop writes it
  before the model call (on PostgreSQL in the same statement that loads the session).
- `finish` writes the run log of a turn; `park` keeps an input whose provider failed for a
  retry with backoff (a wake is retried by its `Wake` row instead); `fail` records a give-up.
- `retry_parked` hands inputs whose retry is due (and ones stuck mid-turn by a crash) back to
  django-q2, whose task runs them again through the turn (`turns.process_record`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q
from django.utils import timezone

from falai_django import conf
from falai_django.engine.results import TurnResult
from falai_django.host.inputs import UNSET, TurnInput, parse_turn_input
from falai_django.host.jobs import enqueue_turn
from falai_django.models import TurnRecord, Wake

logger = logging.getLogger("falai_django.host")


@dataclass
class HostResult:
    """What one input did. `result` is the winning `TurnResult` (None when parked or failed)."""

    turn_id: int
    session_id: str
    status: str  # a TurnRecord.Status value: done | unchanged | retry | failed
    changed: bool = False
    result: TurnResult | None = None
    replays: int = 0
    version: int | None = None
    error: str = ""
    retry_at: datetime | None = None


def receive(
    session_id: str,
    turn_input: dict[str, Any] | TurnInput,
    *,
    silenced: Any = None,
    context: Any = UNSET,
    anchors: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    agent: Any = None,
    persist: bool = True,
    claim: bool = False,
) -> TurnRecord:
    """Check one input and return its inbox row, saved unless `persist=False`.

    `claim`: the caller runs the input itself right after (`turns.process`), so the row is
    written claimed (`claimed_until`): the workers draining the conversation wait for it rather
    than run it too (host/ordering.py).

    `turn_input` is a dict with one input kind (checked here), or a `TurnInput` checked already.
    Bad input raises `InputError` (naming the field) before anything is written. `persist=False`
    (wakes fired from the `Wake` table, which is durable already; or the loop, which writes the
    row together with its first read) returns the row unsaved.
    """
    if isinstance(turn_input, TurnInput):  # checked already (the API's serializers)
        checked = turn_input
    else:
        needs_now = turn_input.get("message") is not None and not turn_input.get("at")
        checked = parse_turn_input(turn_input, now=conf.agent_now(agent) if needs_now else None, silenced=silenced,
                                   context=context, anchors=anchors, claims=claims)
    record = record_for(session_id, checked)
    if claim:
        record.claimed_until = claim_until()
    if persist:
        record.save(force_insert=True)
    return record


def claim_until(now: datetime | None = None) -> datetime:
    """The claim of an input its caller runs in-line: TURN_LEASE_S from now (host/ordering.py)."""
    return (now or timezone.now()) + timedelta(seconds=float(conf.get("TURN_LEASE_S")))


def record_for(session_id: str, checked: TurnInput) -> TurnRecord:
    return TurnRecord(conversation_id=session_id, kind=checked.kind, input_key=checked.key, input=checked.stored())


def run_log(result: Any, recording: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run-log columns mirrored from a TurnResult, and the turn's `recording` when it has one
    (`FALAI["RECORD_MODEL_REPLIES"]`; `falai_django.replay` reads it)."""
    log = {
        "started": [s.to_json() for s in result.started],
        "ended": [e.to_json() for e in result.ended],
        "outcomes": [o.to_json() for o in result.outcomes],
        "skipped": [s.to_json() for s in result.skipped],
        "schedule": [s.to_json() for s in result.schedule],
        "llm_calls": result.llm_calls or 0,
        "usage": result.usage.to_json() if result.usage is not None else None,
    }
    if recording is not None:
        log["recording"] = recording
    return log


def finish(record: TurnRecord, status: str, result: Any, replays: int, *, version: int | None = None,
           error: str = "", using: str | None = None, recording: dict[str, Any] | None = None) -> None:
    """Write the run log: one UPDATE of the inbox row, or one INSERT when it was never saved."""
    fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "next_attempt_at": None,
                              "error": error}
    if version is not None:
        fields["version"] = version
    if result is not None:
        fields.update(run_log(result, recording))
    if record.pk is None:
        for name, value in fields.items():
            setattr(record, name, value)
        record.replays, record.attempts = record.replays + replays, record.attempts + 1
        record.save(force_insert=True, using=using)
        return
    fields.update(replays=F("replays") + replays, attempts=F("attempts") + 1)
    # A record already done keeps its log (a late duplicate run of it would only say "duplicate").
    TurnRecord.objects.using(using).filter(pk=record.pk).exclude(status=TurnRecord.Status.DONE).update(**fields)
    record.status = status


def retry_delay_s(attempt: int, exc: Exception | None = None) -> float:
    base, cap = conf.get("TURN_RETRY_BASE_S"), conf.get("TURN_RETRY_CAP_S")
    delay = min(cap, base * (2 ** max(0, attempt - 1)))
    retry_after_ms = getattr(exc, "retry_after_ms", None)
    if retry_after_ms:
        delay = max(delay, retry_after_ms / 1000)
    return delay


def park(record: TurnRecord, exc: Exception, replays: int) -> HostResult:
    """Keep the input for a later retry (provider failure, or a conflict storm).

    An input is retried from its run-log row (`status = retry`, `next_attempt_at`); a wake is
    retried by its `Wake` row instead, put back to pending at the retry time (its attempts count
    the firings), so one wake never has two retry paths.
    """
    if record.pk is None:
        record.save(force_insert=True)
    record.refresh_from_db(fields=["attempts"])
    attempt = record.attempts + 1
    wake = None
    if record.kind == TurnRecord.Kind.WAKE:
        wake = Wake.objects.filter(conversation_id=record.conversation_id, key=record.input_key).first()
        if wake is not None:
            attempt = max(attempt, wake.attempts)
    give_up = attempt >= conf.get("TURN_RETRY_MAX")
    delay = timedelta(seconds=retry_delay_s(attempt, exc))
    retry_at = None if give_up else timezone.now() + delay
    status = TurnRecord.Status.FAILED if give_up else TurnRecord.Status.RETRY
    TurnRecord.objects.filter(pk=record.pk).update(
        status=status,
        attempts=record.attempts + 1,
        replays=F("replays") + replays,
        next_attempt_at=None if wake is not None else retry_at,
        error=stored_error(exc),
    )
    if wake is not None:
        if give_up:
            Wake.objects.mark_fired(record.conversation_id, record.input_key, timezone.now())
        else:
            Wake.objects.filter(pk=wake.pk).update(state=Wake.State.PENDING, claimed_at=None,
                                                   at=max(wake.at, conf.agent_now() + delay))
    record.status = status
    logger.warning("falai host: %s for %s on %s; %s", type(exc).__name__, record.input_key,
                   record.conversation_id, "giving up" if give_up else f"retrying at {retry_at}")
    return HostResult(turn_id=record.pk, session_id=record.conversation_id, status=status, replays=replays,
                      error=public_error(exc), retry_at=retry_at)


def stored_error(exc: BaseException) -> str:
    """How the run log keeps an error: `<Class>: <text>`, in full, for the operator."""
    return f"{type(exc).__name__}: {exc}"


def public_error(exc: Exception) -> str:
    """What the caller of a parked turn is told: a provider's classified (and redacted) reason as
    it is, anything else as `public_turn_error` words its run-log entry (a write that kept
    conflicting: a sentence, not the database's constraint names or SQL)."""
    from falai_django.engine.errors import ProviderError

    return str(exc) if isinstance(exc, ProviderError) else public_turn_error(stored_error(exc))


CONFLICT_SENTENCE = "the conversation kept changing while the turn ran; it is retried later"
INTERNAL_SENTENCE = "the turn failed on the server; the admin's run log and the server log have the details"
_EXCEPTION_TEXT = re.compile(r"[A-Za-z_][\w.]*: ")  # an exception as `stored_error` keeps it


def public_turn_error(stored: str) -> str:
    """A run-log row's `error` as API clients and playground users may read it: the provider's
    classified reason and the host's own sentences as stored; any other exception's text (an
    action's, the database's) replaced by a sentence. The admin's run log shows the full text."""
    if not stored or not _EXCEPTION_TEXT.match(stored) or stored.startswith("ProviderError: "):
        return stored
    if stored.startswith(("SessionConflictError: ", "IntegrityError: ")):
        return CONFLICT_SENTENCE
    return INTERNAL_SENTENCE


def fail(record: TurnRecord, exc: Exception, replays: int) -> None:
    """The turn raised something no retry fixes: the input is kept, marked failed, with the error."""
    if record.pk is None:
        record.save(force_insert=True)
    TurnRecord.objects.filter(pk=record.pk).update(
        status=TurnRecord.Status.FAILED,
        attempts=F("attempts") + 1,
        replays=F("replays") + replays,
        finished_at=timezone.now(),
        error=stored_error(exc),
    )
    record.status = TurnRecord.Status.FAILED


def retry_parked(now: datetime | None = None, *, stale_after_s: float = 600.0) -> int:
    """Hand back to django-q2 the inputs parked for retry, the ones stuck mid-turn by a crash (or
    whose task the broker lost) for `stale_after_s`, and the ones marked due at once because
    their hand-off failed (a broker away: `received` with `next_attempt_at` set)."""
    now = now or timezone.now()
    due = TurnRecord.objects.filter(
        Q(status__in=[TurnRecord.Status.RETRY, TurnRecord.Status.RECEIVED], next_attempt_at__lte=now)
        | (Q(status=TurnRecord.Status.RECEIVED, received_at__lt=now - timedelta(seconds=stale_after_s),
             next_attempt_at__isnull=True)
           & (Q(claimed_until__isnull=True) | Q(claimed_until__lte=now)))  # not one its caller runs now
    )
    ids = list(due.values_list("id", flat=True)[:500])
    if not ids:
        return 0
    # Push the next look far enough out that the task runs before the sweep sees it again.
    TurnRecord.objects.filter(id__in=ids).update(next_attempt_at=now + timedelta(seconds=60))
    for record_id in ids:
        enqueue_turn(record_id)
    return len(ids)
