"""The host loop of "Go to production", as one service module.

Every entry point (the DRF views, the django-q2 tasks, the admin, management commands) calls
these functions; none of them talks to the engine directly.

    handle(session_id, {"message": "oi", "id": "wamid.1"})   # or {"wake": key}, {"event": ...}, {"start": {...}}

1. The input is persisted first (a `TurnRecord` row: the durable inbox; a wake's own `Wake` row
   is durable already, so its run-log row is written once, in the turn's transaction).
2. Load the session and the transcript; build `context` (caller, else `FALAI["CONTEXT"]`) and
   `silenced` (caller, else the conversation's handoff); call `agent.turn`.
3. `changed` is false: record the outcome lines, nothing else.
4. Otherwise, in ONE transaction: the compare-and-swap save, the inbound and outbound history
   items (the outbound ones are the outbox), the wakes (dropping the one `replaces` names) and
   the run log. A `SessionConflictError` or a unique-key violation rolls all of it back and the
   same input is replayed.
5. Only after commit are the sends handed to django-q2 (`transaction.on_commit`), or sent right
   there when the turn already runs in a django-q2 worker (`send_inline`); wakes sit in the
   `Wake` table, where the dispatcher hands them to django-q2 when due.

A `ProviderError` parks the input (`status = retry`, exponential backoff); the dispatcher
retries it. Nothing is lost.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from . import conf
from .engine.errors import ProviderError, SessionConflictError
from .engine.jstime import to_iso, try_parse_iso

logger = logging.getLogger("falai_django.host")

INPUT_KINDS = ("message", "wake", "event", "start")
HANDOFF_MODES = ("stop", "skip", "understand")
_UNSET: Any = object()


@dataclass
class HostResult:
    """What one input did. `result` is the winning `TurnResult` (None when parked or failed)."""

    turn_id: int
    session_id: str
    status: str  # a TurnRecord.Status value: done | unchanged | retry | failed
    changed: bool = False
    result: Any = None
    replays: int = 0
    version: int | None = None
    error: str = ""
    retry_at: datetime | None = None


class InputError(ValueError):
    """The input is not one of the four kinds, or lacks what its kind needs."""


class UnknownConversationError(LookupError):
    """No conversation with this id. A handoff is state of an existing conversation: silencing
    or unsilencing an unknown id creates nothing (the API answers 404)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"conversation {session_id!r} does not exist")
        self.session_id = session_id


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


def agent_now(agent: Any = None) -> datetime:
    """The agent's clock (a `fake_clock` in tests), else the wall clock."""
    try:
        agent = agent or conf.get_agent()
        return agent.now()
    except Exception:  # noqa: BLE001 - no agent configured, or one without a clock
        return timezone.now()


def normalize_input(turn_input: dict[str, Any], now: datetime | None = None) -> tuple[str, str, dict[str, Any]]:
    """(kind, input key, input) for exactly one input kind.

    A message without `id` and `at` gets `at` = now here, once: a replay after a conflict then
    mints the same keys (and the same emissions) as the first attempt.
    """
    kinds = [k for k in INPUT_KINDS if turn_input.get(k) is not None]
    if len(kinds) != 1:
        raise InputError(f"exactly one of {', '.join(INPUT_KINDS)} is required, got {kinds or 'none'}")
    kind = kinds[0]
    if kind == "message":
        out: dict[str, Any] = {"message": str(turn_input["message"])}
        if turn_input.get("id"):
            out["id"] = str(turn_input["id"])
        at = turn_input.get("at")
        if isinstance(at, datetime):
            at = to_iso(at)
        out["at"] = at or to_iso(now or timezone.now())
        return kind, out.get("id") or out["at"], out
    if kind == "wake":
        return kind, str(turn_input["wake"]), {"wake": str(turn_input["wake"])}
    if kind == "event":
        if not turn_input.get("key"):
            raise InputError("an event needs a key (the idempotency key)")
        out = {"event": str(turn_input["event"]), "key": str(turn_input["key"])}
        if turn_input.get("payload") is not None:
            out["payload"] = turn_input["payload"]
        if turn_input.get("hop") is not None:
            out["hop"] = int(turn_input["hop"])
        return kind, out["key"], out
    start = turn_input["start"]
    if not isinstance(start, dict) or not start.get("flow") or not start.get("key"):
        raise InputError("a start needs {flow, key}")
    out = {"start": {k: start[k] for k in ("flow", "input", "key", "hop") if start.get(k) is not None}}
    return kind, str(start["key"]), out


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def receive(
    session_id: str,
    turn_input: dict[str, Any],
    *,
    silenced: Any = None,
    context: Any = _UNSET,
    anchors: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    agent: Any = None,
    persist: bool = True,
):
    """Persist one input (the durable inbox row) and return it, without running the turn.

    `persist=False` (wakes fired from the `Wake` table, which is durable already) returns an
    unsaved row; the run log is then written once, with the turn's outcome.
    """
    from .models import TurnRecord

    now = agent_now(agent) if turn_input.get("message") is not None else None
    kind, input_key, normalized = normalize_input(turn_input, now)
    stored: dict[str, Any] = {"turn": normalized}
    if silenced is not None:
        stored["silenced"] = silenced
    if context is not _UNSET and _jsonable(context):
        stored["context"] = context
    if anchors:
        stored["anchors"] = anchors
    if claims:
        stored["claims"] = claims
    record = TurnRecord(conversation_id=session_id, kind=kind, input_key=input_key[:1024], input=stored)
    if persist:
        record.save(force_insert=True)
    return record


def handle(
    session_id: str,
    turn_input: dict[str, Any],
    *,
    silenced: Any = None,
    context: Any = _UNSET,
    anchors: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    agent: Any = None,
    send_inline: bool = False,
) -> HostResult:
    """Run one input through the whole loop. See the module docstring.

    `send_inline=True` (django-q2 tasks that already run in a worker) sends right after commit in
    this process instead of queueing a send task, unless a message carries an `after_ms` delay.
    """
    record = receive(
        session_id, turn_input, silenced=silenced, context=context, anchors=anchors, claims=claims, agent=agent,
        persist=turn_input.get("wake") is None,
    )
    return process(record, agent=agent, context=context, send_inline=send_inline)


def handle_message(session_id: str, text: str, *, id: str | None = None, at: str | None = None, **kw) -> HostResult:
    return handle(session_id, {"message": text, "id": id, "at": at}, **kw)


def handle_wake(session_id: str, key: str, **kw) -> HostResult:
    return handle(session_id, {"wake": key}, **kw)


def handle_event(session_id: str, event: str, *, key: str, payload: Any = None, hop: int | None = None, **kw):
    return handle(session_id, {"event": event, "key": key, "payload": payload, "hop": hop}, **kw)


def handle_start(session_id: str, flow: str, *, key: str, input: Any = None, hop: int | None = None, **kw):
    return handle(session_id, {"start": {"flow": flow, "key": key, "input": input, "hop": hop}}, **kw)


def stream(
    session_id: str,
    turn_input: dict[str, Any],
    *,
    silenced: Any = None,
    context: Any = _UNSET,
    anchors: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    agent: Any = None,
) -> Iterator[dict[str, Any]]:
    """The loop over `agent.turn_stream`: yields `{"delta": str}`, `{"replay": n}` (a conflict:
    the text so far is void and streams again), and last `{"done": True, "host": HostResult}`."""
    record = receive(
        session_id, turn_input, silenced=silenced, context=context, anchors=anchors, claims=claims, agent=agent
    )
    yield from _process_iter(record, agent=agent, context=context, streaming=True)


def process(record, *, agent: Any = None, context: Any = _UNSET, send_inline: bool = False) -> HostResult:
    """Run (or re-run) a persisted input. Safe to call again for the same record."""
    for event in _process_iter(record, agent=agent, context=context, streaming=False, send_inline=send_inline):
        if event.get("done"):
            return event["host"]
    raise AssertionError("the host loop ended without a result")  # pragma: no cover


def process_record(record_id: int) -> HostResult | None:
    """Re-run a parked or interrupted input by id (the django-q2 task calls this)."""
    from .models import TurnRecord

    record = TurnRecord.objects.filter(pk=record_id).first()
    if record is None or record.status in (TurnRecord.Status.DONE, TurnRecord.Status.UNCHANGED):
        return None
    return process(record)


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def load_history(session_id: str, limit: int | None = None) -> list[dict[str, str]]:
    """The transcript before this input, oldest first (sends that failed for good are left out)."""
    from .models import HistoryItem

    limit = limit or conf.get("HISTORY_LIMIT")
    rows = list(
        HistoryItem.objects.filter(conversation_id=session_id)
        .exclude(send_status=HistoryItem.SendStatus.FAILED)
        .order_by("-id")
        .values_list("role", "content")[:limit]
    )
    rows.reverse()
    return [{"role": role, "content": content} for role, content in rows]


def load_session_and_history(session_id: str, store=None) -> tuple[Any, list[dict[str, str]]]:
    """Step 1 of the loop: the stored session (or None) and the transcript before this input.

    On PostgreSQL both reads travel in one round trip (Django's psycopg cursor binds client-side,
    so one `execute` may carry two statements); elsewhere they are the store's `load` and
    `load_history`.
    """
    from django.db import connections, router

    from .models import Conversation, HistoryItem
    from .stores.django import DjangoStore, read_blob_text

    store = store or DjangoStore()
    connection = connections[store.using or router.db_for_read(Conversation)]
    if connection.vendor != "postgresql":
        return store.load(session_id), load_history(session_id)
    quote = connection.ops.quote_name
    limit = int(conf.get("HISTORY_LIMIT"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('blob')} FROM {quote(Conversation._meta.db_table)} WHERE {quote('id')} = %s; "
            f"SELECT {quote('role')}, {quote('content')} FROM {quote(HistoryItem._meta.db_table)} "
            f"WHERE {quote('conversation_id')} = %s AND ({quote('send_status')} IS NULL "
            f"OR {quote('send_status')} <> 'failed') ORDER BY {quote('id')} DESC LIMIT {limit}",
            [session_id, session_id],
        )
        row = cursor.fetchone()
        cursor.nextset()
        items = cursor.fetchall()
    session = read_blob_text(row[0], session_id) if row is not None else None  # psycopg hands jsonb as text
    items.reverse()
    return session, [{"role": role, "content": content} for role, content in items]


def handoff_of(session) -> dict[str, Any] | None:
    from .stores.django import HANDOFF_KEY

    if session is None:
        return None
    handoff = (session.metadata or {}).get(HANDOFF_KEY)
    return handoff if isinstance(handoff, dict) and handoff.get("reason") else None


def silenced_for(session, requested: Any) -> Any:
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


def context_for(session_id: str, session, turn_input: dict[str, Any], given: Any = _UNSET) -> Any:
    if given is not _UNSET:
        return given
    builder = conf.get_context_builder()
    return builder(session_id, session, turn_input) if builder else None


def _turn_kwargs(record, session, history, context, silenced) -> dict[str, Any]:
    stored = record.input
    kwargs: dict[str, Any] = dict(stored["turn"])
    kwargs.update(session_id=record.conversation_id, session=session, history=history, context=context)
    if silenced is not None:
        kwargs["silenced"] = silenced
    for name in ("anchors", "claims"):
        if stored.get(name):
            kwargs[name] = stored[name]
    return kwargs


def _process_iter(
    record, *, agent: Any, context: Any, streaming: bool, send_inline: bool = False
) -> Iterator[dict[str, Any]]:
    from .stores.django import DjangoStore

    agent = agent or conf.get_agent()
    store = DjangoStore()
    session_id = record.conversation_id
    stored = record.input
    if context is _UNSET and "context" in stored:
        context = stored["context"]
    replays = 0
    max_replays = conf.get("MAX_REPLAYS")
    while True:
        try:
            session, history = load_session_and_history(session_id, store)  # a broken row raises: loud, recorded
            kwargs = _turn_kwargs(
                record,
                session,
                history,
                context_for(session_id, session, stored["turn"], context),
                silenced_for(session, stored.get("silenced")),
            )
            if streaming:
                result = None
                for chunk in agent.turn_stream(**kwargs):
                    if chunk.get("done"):
                        result = chunk["result"]
                    elif chunk.get("delta"):
                        yield {"delta": chunk["delta"]}
            else:
                result = agent.turn(**kwargs)
        except ProviderError as exc:
            yield {"done": True, "host": _park(record, exc, replays)}
            return
        except Exception as exc:
            _fail(record, exc, replays)
            raise

        if not result.changed:
            yield {"done": True, "host": _record_unchanged(record, result, replays, session)}
            return
        try:
            host_result = _commit(record, session, result, replays, store, send_inline=send_inline)
        except (SessionConflictError, IntegrityError) as exc:
            replays += 1
            logger.info("falai host: %s on %s, replaying %s (%d)", type(exc).__name__, session_id, record.input_key,
                        replays)
            if replays > max_replays:
                yield {"done": True, "host": _park(record, exc, replays)}
                return
            if streaming:
                yield {"replay": replays}
            continue
        yield {"done": True, "host": host_result}
        return


def emission_key(message_key: str, occurrence: int, kind: str, input_key: str) -> str:
    """What identifies one emission: the message key, its occurrence in the turn, and the input.

    A step asking again in the same visit on a later turn reuses its message key, and one turn
    may emit two messages under one key (an answer, then the fixed question); a replay of the
    same input reproduces all three parts.
    """
    return f"{message_key}#{occurrence}@{kind}:{input_key}"


def idempotency_key(session_id: str, emission: str) -> str:
    return hashlib.sha256(f"{session_id}\x00{emission}".encode()).hexdigest()


def _commit(record, session, result, replays: int, store, *, send_inline: bool = False) -> HostResult:
    from .models import TurnRecord

    session_id = record.conversation_id
    expected = session.version if session is not None else 0
    now = timezone.now()
    unsaved = record.pk is None
    counters = (record.replays, record.attempts, record.status)
    try:
        saved_version = _write(record, session_id, expected, now, result, replays, store, send_inline)
    except BaseException:
        if unsaved:  # rolled back: the run-log row was never written
            record.pk = None
            record.replays, record.attempts, record.status = counters
        raise
    return HostResult(
        turn_id=record.pk,
        session_id=session_id,
        status=TurnRecord.Status.DONE,
        changed=True,
        result=result,
        replays=replays,
        version=saved_version,
    )


def _write(record, session_id: str, expected: int, now, result, replays: int, store, send_inline: bool) -> int:
    """The one transaction: CAS save, run log, history and outbox, wakes."""
    from .models import HistoryItem, TurnRecord, Wake

    with transaction.atomic():
        saved = store.save(result.session, expected)
        _finish(record, TurnRecord.Status.DONE, result, replays, version=saved.version)
        items: list[HistoryItem] = []
        turn_input = record.input["turn"]
        if record.kind == TurnRecord.Kind.MESSAGE:
            items.append(
                HistoryItem(
                    conversation_id=session_id,
                    role=HistoryItem.Role.USER,
                    content=turn_input["message"],
                    message_key=turn_input.get("id"),
                    at=try_parse_iso(turn_input.get("at") or "") or now,
                    turn_id=record.pk,
                )
            )
        seen: dict[str, int] = {}
        for message in result.messages:
            occurrence = seen.get(message.key, 0)
            seen[message.key] = occurrence + 1
            emission = emission_key(message.key, occurrence, record.kind, record.input_key)
            items.append(
                HistoryItem(
                    conversation_id=session_id,
                    role=HistoryItem.Role.ASSISTANT,
                    content=message.text,
                    message_key=message.key,
                    at=now,
                    turn_id=record.pk,
                    kind=message.kind,
                    media=message.media,
                    run_id=message.run_id,
                    step_id=message.step_id,
                    after_ms=message.after_ms or 0,
                    emission_key=emission,
                    idempotency_key=idempotency_key(session_id, emission),
                    send_status=HistoryItem.SendStatus.PENDING,
                    queued_at=now,
                )
            )
        if items:
            HistoryItem.objects.bulk_create(items)
        if result.schedule:
            new_keys = [entry.key for entry in result.schedule]
            Wake.objects.bulk_create(
                [Wake(conversation_id=session_id, key=e.key, at=e.at) for e in result.schedule],
                update_conflicts=True,
                unique_fields=["conversation", "key"],
                update_fields=["at", "state", "claimed_at"],
            )
            replaced = [e.replaces for e in result.schedule if e.replaces and e.replaces not in new_keys]
            if replaced:
                Wake.objects.filter(conversation_id=session_id, key__in=replaced).delete()
        if record.kind == TurnRecord.Kind.WAKE:
            Wake.objects.filter(conversation_id=session_id, key=record.input_key).update(
                state=Wake.State.DONE, fired_at=now
            )
        if result.messages:
            from .sending import enqueue_send, send_after_commit

            if send_inline and not any(m.after_ms for m in result.messages):
                transaction.on_commit(lambda: send_after_commit(session_id))
            else:
                transaction.on_commit(lambda: enqueue_send(session_id))
    return saved.version


def _mirror(result) -> dict[str, Any]:
    return {
        "started": [s.to_json() for s in result.started],
        "ended": [e.to_json() for e in result.ended],
        "outcomes": [o.to_json() for o in result.outcomes],
        "skipped": [s.to_json() for s in result.skipped],
        "schedule": [s.to_json() for s in result.schedule],
        "llm_calls": result.llm_calls or 0,
        "usage": result.usage.to_json() if result.usage is not None else None,
    }


def _finish(record, status: str, result, replays: int, *, version: int | None = None, error: str = "") -> None:
    """Write the run log: one UPDATE of the inbox row, or one INSERT when it was never saved."""
    from .models import TurnRecord

    fields: dict[str, Any] = {
        "status": status,
        "finished_at": timezone.now(),
        "next_attempt_at": None,
        "error": error,
    }
    if version is not None:
        fields["version"] = version
    if result is not None:
        fields.update(_mirror(result))
    if record.pk is None:
        for name, value in fields.items():
            setattr(record, name, value)
        record.replays, record.attempts = record.replays + replays, record.attempts + 1
        record.save(force_insert=True)
        return
    fields.update(replays=F("replays") + replays, attempts=F("attempts") + 1)
    # A record already done keeps its log (a late duplicate run of it would only say "duplicate").
    TurnRecord.objects.filter(pk=record.pk).exclude(status=TurnRecord.Status.DONE).update(**fields)
    record.status = status


def _record_unchanged(record, result, replays: int, session) -> HostResult:
    from .models import TurnRecord, Wake

    with transaction.atomic():
        _finish(record, TurnRecord.Status.UNCHANGED, result, replays)
        if record.kind == TurnRecord.Kind.WAKE:
            Wake.objects.filter(conversation_id=record.conversation_id, key=record.input_key).update(
                state=Wake.State.DONE, fired_at=timezone.now()
            )
    return HostResult(
        turn_id=record.pk,
        session_id=record.conversation_id,
        status=TurnRecord.Status.UNCHANGED,
        changed=False,
        result=result,
        replays=replays,
        version=session.version if session is not None else None,
    )


def retry_delay_s(attempt: int, exc: Exception | None = None) -> float:
    base, cap = conf.get("TURN_RETRY_BASE_S"), conf.get("TURN_RETRY_CAP_S")
    delay = min(cap, base * (2 ** max(0, attempt - 1)))
    retry_after_ms = getattr(exc, "retry_after_ms", None)
    if retry_after_ms:
        delay = max(delay, retry_after_ms / 1000)
    return delay


def _park(record, exc: Exception, replays: int) -> HostResult:
    """Keep the input for a later retry (provider failure, or a conflict storm).

    An input is retried from its run-log row (`status = retry`, `next_attempt_at`); a wake is
    retried by its `Wake` row instead, put back to pending at the retry time (its attempts count
    the firings), so one wake never has two retry paths.
    """
    from .models import TurnRecord, Wake

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
    retry_at = None if give_up else timezone.now() + timedelta(seconds=retry_delay_s(attempt, exc))
    status = TurnRecord.Status.FAILED if give_up else TurnRecord.Status.RETRY
    TurnRecord.objects.filter(pk=record.pk).update(
        status=status,
        attempts=record.attempts + 1,
        replays=F("replays") + replays,
        next_attempt_at=None if wake is not None else retry_at,
        error=f"{type(exc).__name__}: {exc}",
    )
    if wake is not None:
        if give_up:
            Wake.objects.filter(pk=wake.pk).update(state=Wake.State.DONE, fired_at=timezone.now())
        else:
            Wake.objects.filter(pk=wake.pk).update(state=Wake.State.PENDING, claimed_at=None,
                                                   at=max(wake.at, agent_now() + (retry_at - timezone.now())))
    record.status = status
    logger.warning("falai host: %s for %s on %s; %s", type(exc).__name__, record.input_key,
                   record.conversation_id, "giving up" if give_up else f"retrying at {retry_at}")
    return HostResult(
        turn_id=record.pk,
        session_id=record.conversation_id,
        status=status,
        replays=replays,
        error=str(exc),
        retry_at=retry_at,
    )


def _fail(record, exc: Exception, replays: int) -> None:
    from .models import TurnRecord

    if record.pk is None:
        record.save(force_insert=True)
    TurnRecord.objects.filter(pk=record.pk).update(
        status=TurnRecord.Status.FAILED,
        attempts=F("attempts") + 1,
        replays=F("replays") + replays,
        finished_at=timezone.now(),
        error=f"{type(exc).__name__}: {exc}",
    )
    record.status = TurnRecord.Status.FAILED


# ---------------------------------------------------------------------------------------------
# Handoff (silence / unsilence) and state
# ---------------------------------------------------------------------------------------------


def _update_metadata(session_id: str, change) -> Any:
    """The one write path of the handoff state (`metadata["handoff"]`), compare-and-swap."""
    from .stores.django import DjangoStore

    store = DjangoStore()
    for _ in range(conf.get("MAX_REPLAYS") + 1):
        session = store.load(session_id)  # a broken row raises InvalidSessionError: never replaced
        if session is None:
            raise UnknownConversationError(session_id)
        expected = session.version
        working = session.copy_deep()
        metadata = dict(working.metadata or {})
        change(metadata)
        working.metadata = metadata
        try:
            return store.save(working, expected)
        except SessionConflictError:
            continue
    raise SessionConflictError(session_id, expected, None)


def silence(session_id: str, reason: str, *, owner: str | None = None, mode: str = "stop"):
    """Hand the conversation to a human (or pause it): every later input is `silenced`.

    The conversation must exist (`UnknownConversationError` otherwise; nothing is created).

    `mode` picks the form passed to the turn: "stop" (the plain string: a fresh talk step ends
    its run), "skip" (`{reason, skip: True}`: talk and say steps are skipped, `do` steps still
    run) or "understand" (`{reason, understand: True}`: fields keep landing).
    """
    from .stores.django import HANDOFF_KEY

    if mode not in HANDOFF_MODES:
        raise InputError(f"mode must be one of {', '.join(HANDOFF_MODES)}")
    reason = (reason or "").strip()
    if not reason:
        raise InputError("a silence needs a reason")
    handoff = {"reason": reason, "mode": mode, "at": to_iso(datetime.now(UTC))}
    if owner:
        handoff["owner"] = owner
    return _update_metadata(session_id, lambda metadata: metadata.__setitem__(HANDOFF_KEY, handoff))


def unsilence(session_id: str):
    """Give the conversation back to the agent (`UnknownConversationError` for an unknown id)."""
    from .stores.django import HANDOFF_KEY

    return _update_metadata(session_id, lambda metadata: metadata.pop(HANDOFF_KEY, None))


def session_state(session_id: str, *, history_limit: int = 50, agent: Any = None) -> dict[str, Any] | None:
    """The conversation as the API shows it: session, handoff, pending wakes, recent transcript."""
    from .models import HistoryItem, TurnRecord, Wake
    from .stores.django import DjangoStore

    session = DjangoStore().load(session_id)
    if session is None:
        return None
    agent = agent or conf.get_agent()
    computed = agent.pending_wakes(session=session, context=context_for(session_id, session, {}))
    stored_wakes = Wake.objects.filter(conversation_id=session_id).exclude(state=Wake.State.DONE).order_by("at")
    items = list(HistoryItem.objects.filter(conversation_id=session_id).order_by("-id")[:history_limit])
    items.reverse()
    turns = TurnRecord.objects.filter(conversation_id=session_id).order_by("-id")[:20]
    return {
        "session": session.to_json(),
        "handoff": handoff_of(session),
        "pending_wakes": [w.to_json() for w in computed],
        "queued_wakes": [{"key": w.key, "at": w.at, "state": w.state} for w in stored_wakes],
        "history": [
            {
                "role": i.role,
                "content": i.content,
                "message_key": i.message_key,
                "at": i.at,
                "kind": i.kind,
                "send_status": i.send_status,
            }
            for i in items
        ],
        "turns": [
            {"id": t.pk, "kind": t.kind, "input_key": t.input_key, "status": t.status, "replays": t.replays,
             "received_at": t.received_at, "error": t.error}
            for t in turns
        ],
    }


def requeue_wakes(*, session_ids: list[str] | None = None, agent: Any = None, progress=None) -> dict[str, int]:
    """Rebuild every pending wake from `agent.pending_wakes` (safe to run twice).

    Each returned wake is upserted as `pending` (a wake that fires twice is dropped as stale),
    so the dispatcher fires it at its time, or at once when that time has passed.
    """
    from .models import Conversation, Wake
    from .stores.django import read_blob

    agent = agent or conf.get_agent()
    rows = Conversation.objects.all()
    if session_ids:
        rows = rows.filter(pk__in=session_ids)
    total = rows.count()
    report = {"sessions": total, "wakes": 0, "failed": 0}
    for index, (session_id, blob) in enumerate(rows.values_list("id", "blob").iterator(chunk_size=500), 1):
        try:
            session = read_blob(blob, session_id)
            wakes = agent.pending_wakes(session=session, context=context_for(session_id, session, {}))
        except Exception:  # noqa: BLE001 - one broken row must not stop the rebuild
            logger.exception("falai requeue: cannot compute the wakes of %s", session_id)
            report["failed"] += 1
            wakes = []
        if wakes:
            Wake.objects.bulk_create(
                [Wake(conversation_id=session_id, key=w.key, at=w.at) for w in wakes],
                update_conflicts=True,
                unique_fields=["conversation", "key"],
                update_fields=["at", "state", "claimed_at"],
            )
            report["wakes"] += len(wakes)
        if progress:
            progress(index, total)
    return report
