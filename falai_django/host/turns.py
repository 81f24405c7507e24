"""The turn loop of "Go to production": load, turn, write, hand off.

    handle(session_id, {"message": "oi", "id": "wamid.1"})   # or {"wake": key}, {"event": ...}, {"start": {...}}

1. The input is checked once (`inputs.parse_turn_input`) and kept in the durable inbox (a
   `TurnRecord` row) before the model is called. On PostgreSQL the inbox INSERT, the session
   and the transcript travel in one statement (one round trip, one commit). A wake's own `Wake`
   row is durable already, so its run-log row is written once, with the turn.
2. The session is parsed once (JSON text → `Session`, by pydantic-core); `context` (the caller's,
   else `FALAI["CONTEXT"]`) and `silenced` (the caller's, else the handoff) are added and
   `agent.turn` runs.
3. `changed` is false: the run log records the outcome lines, nothing else.
4. Otherwise `writer.write_turn` writes everything in one transaction (one statement on
   PostgreSQL). A `SessionConflictError` or a unique-key violation writes nothing and the same
   input is replayed.
5. The sends are handed over after commit: by the NOTIFY inside the write (PostgreSQL), by a
   django-q2 task, or right here when the turn already runs in a worker (`send_inline`).

A `ProviderError` parks the input (`status = retry`, exponential backoff); the dispatcher
retries it. Nothing is lost.

One conversation's inputs run in the order they were received (`ordering`): the worker's task
(`process_record`) drains the conversation's open inputs in order under its turn lock; an input
run in-line is claimed when it is written and, with an earlier input still open, waits for it
(the check rides in step 1's statement on PostgreSQL).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Generator, Iterator
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from falai_django import channels, conf
from falai_django.engine.errors import ProviderError, SessionConflictError
from falai_django.engine.jstime import to_iso
from falai_django.engine.results import data_changes, turn_summary
from falai_django.host import inbox, jobs, ordering, outages
from falai_django.host.delivery import send_after_commit
from falai_django.host.inbox import HostResult
from falai_django.host.inputs import UNSET, TurnInput, silenced_for
from falai_django.host.writer import TurnWrite, write_turn
from falai_django.llm import recording
from falai_django.models import History, TurnRecord, Wake
from falai_django.models.sql import blob_select, bound_cursor, read_blob_text
from falai_django.observe import context as observe
from falai_django.observe import metrics, tracing
from falai_django.stores.django import DjangoStore

logger = logging.getLogger("falai_django.host")


def handle(
    session_id: str,
    turn_input: dict[str, Any] | TurnInput,
    *,
    silenced: Any = None,
    context: Any = UNSET,
    anchors: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    agent: Any = None,
    send_inline: bool = False,
    loaded: tuple[Any, list[dict[str, str]]] | None = None,
) -> HostResult:
    """Run one input through the whole loop. See the module docstring.

    `send_inline=True` (django-q2 tasks that already run in a worker) sends right after commit in
    this process instead of handing the sends over, unless a message carries an `after_ms` delay.
    `loaded`: the session and transcript read already (a wake chunk reads them all at once); a
    replay after a conflict reads them again.
    """
    record, context = _receive(session_id, turn_input, silenced, context, anchors, claims, agent)
    return process(record, agent=agent, context=context, send_inline=send_inline,
                   inbox_first=record.kind != TurnRecord.Kind.WAKE, loaded=loaded)


def stream(
    session_id: str,
    turn_input: dict[str, Any] | TurnInput,
    *,
    silenced: Any = None,
    context: Any = UNSET,
    anchors: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    agent: Any = None,
) -> Iterator[dict[str, Any]]:
    """The loop over `agent.turn_stream`: yields `{"delta": str}`, `{"replay": n}` (a conflict:
    the text so far is void and streams again), and last `{"done": True, "host": HostResult}`."""
    record, context = _receive(session_id, turn_input, silenced, context, anchors, claims, agent)
    yield from _observed_stream(record, _run(record, agent=agent, context=context, streaming=True, inbox_first=True))


def _receive(session_id: str, turn_input: dict[str, Any] | TurnInput, silenced: Any, context: Any,
             anchors: Any, claims: Any, agent: Any) -> tuple[TurnRecord, Any]:
    """The checked input's inbox row, unsaved (the loop writes it with its first read), and its
    context. An input (not a wake) is claimed: its caller runs it, the workers wait for it."""
    ordering.release_cut_off_claims()
    record = inbox.receive(session_id, turn_input, silenced=silenced, context=context, anchors=anchors,
                           claims=claims, agent=agent, persist=False)
    if record.kind != TurnRecord.Kind.WAKE:
        record.claimed_until = inbox.claim_until()
    return record, turn_input.context if isinstance(turn_input, TurnInput) else context


def process(record: TurnRecord, *, agent: Any = None, context: Any = UNSET, send_inline: bool = False,
            inbox_first: bool = False, loaded: tuple[Any, list[dict[str, str]]] | None = None,
            in_order: bool = True) -> HostResult:
    """Run (or re-run) an input. Safe to call again for the same record.

    `inbox_first`: the record is not saved yet and must be, before the model call (wakes are not:
    their `Wake` row is the durable copy).
    `in_order` (an input, not a wake): the caller runs it in-line, so it is claimed, and it waits
    for the conversation's earlier open inputs (`ordering`); a parked one before it parks it too.
    False only where the order is kept already (a worker's drain).
    """
    with observe.turn_scope(record.conversation_id, record) as scope:
        try:
            for event in _run(record, agent=agent, context=context, streaming=False, send_inline=send_inline,
                              inbox_first=inbox_first, loaded=loaded, in_order=in_order):
                if event.get("done"):
                    _counted(record, scope, event["host"])
                    return event["host"]
        except BaseException as exc:
            _counted(record, scope, None, exc)
            raise
    raise AssertionError("the host loop ended without a result")  # pragma: no cover


def _observed_stream(
    record: TurnRecord, events: Generator[dict[str, Any], None, None]
) -> Iterator[dict[str, Any]]:
    """`stream`'s events, each step run in the turn's scope (never across a yield: the reader's
    own code is not the turn's), and the turn counted once it ends. The reader's time between
    steps is not host time."""
    scope = observe.new_turn(record.conversation_id, record)
    while True:
        try:
            with observe.within(scope):
                event = next(events)
        except StopIteration:
            return
        except BaseException as exc:
            _counted(record, scope, None, exc)
            raise
        if event.get("done"):
            _counted(record, scope, event["host"])
        paused = time.perf_counter()
        try:
            yield event
        except GeneratorExit:  # the reader went away: the loop hears it now (it unclaims the input)
            with observe.within(scope):
                events.close()
            if not event.get("done"):  # unfinished: its span says so (the run log still says received)
                tracing.end_turn(scope.span, status=str(record.status), replays=record.replays,
                                 llm_calls=scope.llm_calls)
            raise
        scope.started += time.perf_counter() - paused


def _counted(record: TurnRecord, scope: observe.Scope, result: HostResult | None,
             error: BaseException | None = None) -> None:
    """`falai_turns_total`, replays and host time for a turn that ended (None: it raised; the run
    log then says failed, or retry when it was parked), and the end of its trace span."""
    if result is not None:
        status, replays = str(result.status), result.replays
    else:
        status = record.status if record.status in (TurnRecord.Status.FAILED, TurnRecord.Status.RETRY) \
            else TurnRecord.Status.FAILED
        status, replays = str(status), record.replays
    host_s = max(0.0, time.perf_counter() - scope.started - scope.model_s)
    metrics.turn_finished(str(record.kind), status, replays, host_s)
    engine_result = getattr(result, "result", None)
    llm_calls = engine_result.llm_calls if engine_result is not None else scope.llm_calls
    tracing.end_turn(scope.span, status=status, replays=replays, llm_calls=llm_calls, result=engine_result,
                     error=error)


def process_record(record_id: int) -> HostResult | None:
    """Run a stored input by id (the django-q2 task calls this): the conversation's open inputs,
    this one among them, in the order they were received, under its turn lock (`ordering.drain`).
    Returns this input's result if this call ran it; None if it was finished already or the worker
    holding the conversation's lock runs it."""
    return ordering.drain(record_id, _run_in_drain)


def _run_in_drain(record: TurnRecord) -> HostResult:
    return process(record, in_order=False)


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


class Transcript(list):
    """The history a turn reads (a list of `{"role", "content"}` items, oldest first) and `upto`,
    the id of its newest `History` row (None: none): a replay reads the same rows again."""

    upto: int | None = None


def load_history(session_id: str, limit: int | None = None) -> list[dict[str, str]]:
    """The transcript before this input, oldest first (sends that failed for good are left out)."""
    limit = limit or conf.get("HISTORY_LIMIT")
    rows = list(History.objects.transcript(session_id).order_by("-id").values_list("id", "role", "content")[:limit])
    rows.reverse()
    items = Transcript({"role": role, "content": content} for _, role, content in rows)
    items.upto = rows[-1][0] if rows else None
    return items


def load_session_and_history(session_id: str, store: DjangoStore | None = None, *,
                             inbox_row: TurnRecord | None = None,
                             answer_follows: bool = False) -> tuple[Any, list[dict[str, str]]]:
    """Step 1 of the loop: the stored session (or None) and the transcript before this input.

    With `inbox_row` (unsaved) the row is written first, and `inbox_row.waits_behind` is set to
    the first open input of the conversation written before it (None: none; `ordering`). On
    PostgreSQL all of it is one statement: the INSERT in a CTE, the blob as text, the transcript
    as two text arrays (binary), the earlier open input through the partial index `falai_turn_open`.

    `answer_follows`: the caller is told nothing until this process commits again (the result,
    or the row marked parked / failed / unchanged), so the inbox row's commit does not wait for
    its WAL flush (`synchronous_commit = off` for that one transaction). That later commit
    flushes the WAL up to its own record, the inbox row's included; if this process dies first
    the row is in the server all the same (only a server crash in the same instant loses it,
    and then the caller got no answer and sends again). See docs/DECISIONS.md H8.
    """
    store = store or conf.get_store()
    connection = store.connection()
    if connection.vendor != "postgresql":
        if inbox_row is not None:
            inbox_row.save(force_insert=True, using=store.db_alias())
            inbox_row.waits_behind = ordering.first_open_before(inbox_row)
        return store.load(session_id), load_history(session_id)
    sql = _load_sql(connection, store.get_model_class()._meta.db_table, inbox=inbox_row is not None,
                    # inside a caller's transaction the setting would reach the caller's commit
                    relaxed=answer_follows and inbox_row is not None and not connection.in_atomic_block)
    head = [] if inbox_row is None else [
        session_id, inbox_row.kind, inbox_row.input_key, json.dumps(inbox_row.input, ensure_ascii=False),
        inbox_row.claimed_until]
    params = head + [session_id] * (sql.count("%s") - len(head))  # the blob's, the transcript's, the order's
    with bound_cursor(connection, binary_results=True) as cursor:
        cursor.execute(sql, params)
        turn_id, text, items, waits_behind = cursor.fetchone()[:4]
    if inbox_row is not None:
        inbox_row.pk = inbox_row.id = turn_id
        inbox_row._state.adding = False
        inbox_row._state.db = store.db_alias()
        inbox_row.waits_behind = waits_behind
    session = read_blob_text(text, session_id) if text is not None else None  # a broken row raises: loud
    return session, _history_items(items)


def _history_items(arrays: list[list[str]]) -> list[dict[str, str]]:
    """`_transcript_sql`'s [roles, contents, ids] as history items (an empty array: no transcript)."""
    if not arrays:
        return Transcript()
    roles, contents, ids = arrays
    items = Transcript({"role": role, "content": content} for role, content in zip(roles, contents, strict=True))
    items.upto = int(ids[-1]) if ids else None
    return items


_LOAD_SQL: dict[tuple[str, str, bool, bool, int], str] = {}


def _load_sql(connection: Any, sessions_table: str, *, inbox: bool, relaxed: bool = False) -> str:
    """Step 1's statement (PostgreSQL), built once per database, table, shape and HISTORY_LIMIT."""
    key = (connection.alias, sessions_table, inbox, relaxed, int(conf.get("HISTORY_LIMIT")))
    sql = _LOAD_SQL.get(key)
    if sql is None:
        sql = _LOAD_SQL[key] = _build_load_sql(connection, sessions_table, inbox=inbox, relaxed=relaxed)
    return sql


def _build_load_sql(connection: Any, sessions_table: str, *, inbox: bool, relaxed: bool = False) -> str:
    q = connection.ops.quote_name
    transcript = _transcript_sql(connection, "%s")
    blob = f"(SELECT {blob_select(connection)} FROM {q(sessions_table)} WHERE {q('id')} = %s)"
    if not inbox:
        return f"SELECT NULL, {blob}, {transcript}, NULL"
    turns = q(TurnRecord._meta.db_table)
    # Set for this statement's own transaction only (is_local); read when it commits.
    relax = ", set_config('synchronous_commit', 'off', true)" if relaxed else ""
    # The new row is not in this statement's snapshot; every open input it sees was written before.
    earlier = ordering.open_before_sql(connection, "%s", f"(SELECT {q('id')} FROM t)")
    return (
        f"WITH t AS (INSERT INTO {turns} ({q('conversation_id')}, {q('kind')}, {q('input_key')}, {q('input')}, "
        f"{q('claimed_until')}, {q('status')}, {q('attempts')}, {q('replays')}, {q('error')}, {q('started')}, "
        f"{q('ended')}, {q('outcomes')}, {q('skipped')}, {q('schedule')}, {q('llm_calls')}) "
        f"VALUES (%s, %s, %s, %s::jsonb, %s, 'received', 0, 0, '', '[]', '[]', '[]', '[]', '[]', 0) "
        f"RETURNING {q('id')}) SELECT (SELECT {q('id')} FROM t), {blob}, {transcript}, {earlier}{relax}"
    )


def _transcript_sql(connection: Any, conversation: str) -> str:
    """`load_history` as one PostgreSQL subquery: the last HISTORY_LIMIT items (failed sends left
    out), oldest first, as a three-row text array `[roles, contents, ids]` (`{}` when there are none),
    read in binary (`bound_cursor(binary_results=True)`): cheaper for both sides than JSON text
    of the pairs, which the server has to escape and the client to parse. `conversation` is SQL
    (a %s or a column).

    The conversation is bounded by `>=` and a row comparison rather than `=` on purpose (see
    docs/DECISIONS.md H9): with `=` the prepared statement's generic plan may walk the whole
    table's primary key newest first, skipping everybody else's rows, and a plain range is
    estimated so small that the whole conversation is read and sorted. In this form the only
    cheap plan is the conversation's own (conversation_id, id) index, newest first, stopping at
    the limit; on a small table the planner may still read the conversation and sort it."""
    q = connection.ops.quote_name
    history = q(History._meta.db_table)
    limit = int(conf.get("HISTORY_LIMIT"))
    return (
        f"(SELECT ARRAY[array_agg(h.{q('role')} ORDER BY h.{q('id')}), array_agg(h.{q('content')} ORDER BY h.{q('id')}), "
        f"array_agg(h.{q('id')}::text ORDER BY h.{q('id')})] "
        f"FROM (SELECT {q('id')}, {q('role')}, {q('content')} FROM {history} "
        f"WHERE {q('conversation_id')} >= {conversation} "
        f"AND ({q('conversation_id')}, {q('id')}) <= ({conversation}, 9223372036854775807) "
        f"AND ({q('send_status')} IS NULL OR {q('send_status')} <> 'failed') AND {q('deleted_at')} IS NULL "
        f"ORDER BY {q('conversation_id')} DESC, {q('id')} DESC LIMIT {limit}) h)"
    )


def load_wakes(wake_ids: list[int], store: DjangoStore | None = None) -> list[tuple[str, str, Any, Any]]:
    """The wakes of a chunk still to fire, due first: `(session id, key, loaded, due at)`.

    On PostgreSQL one statement reads the wakes with their sessions and transcripts (`loaded` is
    the pair `handle` takes; only the first wake of a conversation gets it, as the next one will
    see the first one's write). Elsewhere `loaded` is None and each turn reads for itself.
    """
    store = store or conf.get_store()
    rows = Wake.objects.filter(id__in=wake_ids).open()
    connection = store.connection()
    if connection.vendor != "postgresql":
        found = sorted(rows.values_list("conversation_id", "key", "at"), key=lambda row: row[2])
        return [(sid, key, None, at) for sid, key, at in found]
    q = connection.ops.quote_name
    sessions, wakes = (q(m._meta.db_table) for m in (store.get_model_class(), Wake))
    transcript = _transcript_sql(connection, f"w.{q('conversation_id')}")
    sql = (
        f"SELECT w.{q('conversation_id')}, w.{q('key')}, s.{blob_select(connection)}, {transcript}, w.{q('at')} "
        f"FROM {wakes} w LEFT JOIN {sessions} s ON s.{q('id')} = w.{q('conversation_id')} "
        f"WHERE w.{q('id')} = ANY(%s) AND w.{q('state')} <> 'done' ORDER BY w.{q('at')}, w.{q('id')}"
    )
    with bound_cursor(connection, binary_results=True) as cursor:
        cursor.execute(sql, [list(wake_ids)])
        found = cursor.fetchall()
    out, seen = [], set()
    for sid, key, text, items, at in found:
        loaded = None
        if sid not in seen and text is not None:
            seen.add(sid)
            try:
                loaded = (read_blob_text(text, sid), _history_items(items))
            except Exception:  # noqa: BLE001 - a broken row: the turn reads it again and fails loudly
                loaded = None
        out.append((sid, key, loaded, at))
    return out


def _as_session(session_id: str, call: Any, /, *args: Any, taped: recording.Tape | None = None,
                **kwargs: Any) -> Any:
    """`call(...)` with `channels.CURRENT_SESSION` set to this conversation (what channel actions
    that write to the outbox read), cleared again when it returns; with `taped`, what the engine
    takes from outside meanwhile is noted on it (`llm.recording`)."""
    entered = channels.enter_session(session_id)
    try:
        if taped is None:
            return call(*args, **kwargs)
        with recording.tape(taped):
            return call(*args, **kwargs)
    finally:
        channels.leave_session(entered)


def _recording(taped: recording.Tape, kwargs: dict[str, Any], result: Any) -> dict[str, Any]:
    """What replaying this turn needs (`falai_django.replay`), kept on its run-log row: the engine's
    clock, the `silenced` and `context` it ran with, the history it read (the newest row's id and
    how many), the model's replies and what actions and tools answered, in order, and what the
    turn did: its messages, outcome codes, wake keys and ended runs (`turn_summary`) and, rather
    than the whole collected data on every turn, the keys it changed (`data_changes`)."""
    history = kwargs.get("history") or []
    session = kwargs.get("session")
    after = result.session
    changes = {} if after is session else data_changes(session.data if session is not None else None, after.data)
    return {
        "v": 1,
        "at": to_iso(taped.clock) if taped.clock is not None else None,
        "silenced": recording.plain(kwargs.get("silenced")),
        "context": recording.plain(kwargs.get("context")),
        "history": {"upto": getattr(history, "upto", None), "n": len(history)},
        "replies": taped.replies,
        "effects": taped.effects,
        "before": turn_summary(result, data=False),
        "data_changes": recording.plain(changes),
    }


def context_for(session_id: str, session: Any, turn_input: dict[str, Any], given: Any = UNSET) -> Any:
    if given is not UNSET and not channels.is_channel_context(given):
        return given
    builder = conf.get_context_builder()
    if given is not UNSET:  # a channel's details ride over the project's own context
        return channels.merge_context(builder(session_id, session, turn_input) if builder else None, given)
    return builder(session_id, session, turn_input) if builder else None


def _turn_kwargs(record: TurnRecord, session: Any, history: list, context: Any, silenced: Any) -> dict[str, Any]:
    stored = record.input
    kwargs: dict[str, Any] = dict(stored["turn"])
    kwargs.update(session_id=record.conversation_id, session=session, history=history, context=context)
    if silenced is not None:
        kwargs["silenced"] = silenced
    for name in ("anchors", "claims"):
        if stored.get(name):
            kwargs[name] = stored[name]
    return kwargs


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def _run(record: TurnRecord, *, agent: Any, context: Any, streaming: bool, send_inline: bool = False,
         inbox_first: bool = False, loaded: tuple[Any, list[dict[str, str]]] | None = None,
         in_order: bool = True) -> Generator[dict[str, Any], None, None]:
    """The loop: yields `{"delta"}` and `{"replay"}` while streaming, then `{"done", "host"}`.

    An input that waited for earlier ones (`ordering.wait_turn`) hands the inputs queued behind
    it to a worker once it is finished, before its caller hears the result."""
    waited: list[bool] = []
    try:
        host_result = yield from _turn_loop(record, agent=agent, context=context, streaming=streaming,
                                            send_inline=send_inline, inbox_first=inbox_first, loaded=loaded,
                                            ordered=in_order and record.kind != TurnRecord.Kind.WAKE,
                                            waited=waited)
    except GeneratorExit:  # a stream its reader abandoned mid-turn: the workers may run the input
        ordering.unclaim(record)
        raise
    except Exception as exc:
        if record.claimed_until is not None and outages.dependency_down(exc) == "database":
            ordering.remember_cut_off(record)
        if waited:
            ordering.hand_on(record)
        raise
    if waited:
        ordering.hand_on(record)
    yield {"done": True, "host": host_result}


def _wait_turn(record: TurnRecord, waited: list[bool]) -> HostResult | None:
    """Run the conversation's open inputs before this one first (`ordering.wait_turn`). None: it
    is this input's turn now; else the result of parking it behind them."""
    waited.append(True)
    try:
        stop = ordering.wait_turn(record, _run_in_drain)
    except Exception:  # an earlier input broke the drain (logged there): this one is retried later
        logger.exception("falai host: conversation %s: input %s could not wait for the earlier ones",
                         record.conversation_id, record.pk)
        stop = ordering.Stop("timeout")
    return None if stop.reason == "until" else ordering.park_behind(record, stop)


def _turn_loop(record: TurnRecord, *, agent: Any, context: Any, streaming: bool, send_inline: bool,
               inbox_first: bool, loaded: tuple[Any, list[dict[str, str]]] | None, ordered: bool,
               waited: list[bool]) -> Generator[dict[str, Any], None, HostResult]:
    agent = agent or conf.get_agent()
    store = conf.get_store()
    session_id = record.conversation_id
    if record.pk is not None and record.kind == TurnRecord.Kind.MESSAGE:
        # A stored input, on a worker: a channel's slow work (a voice note transcribed) happens
        # here, in the conversation's order, never in the request that received it.
        channels.prepare_input(record, agent)
    stored = record.input
    if context is UNSET and "context" in stored:
        context = stored["context"]
    replays = 0
    max_replays = conf.get("MAX_REPLAYS")
    recorded = bool(conf.get("RECORD_MODEL_REPLIES"))
    pending_inbox = record if inbox_first and record.pk is None else None
    if ordered and pending_inbox is None and record.pk is not None:  # saved already (the desk's inputs)
        if record.claimed_until is None and record.status == TurnRecord.Status.RECEIVED:
            ordering.claim(record)
        if ordering.first_open_before(record) is not None and (parked := _wait_turn(record, waited)) is not None:
            return parked
    while True:
        try:
            if loaded is not None and pending_inbox is None:
                (session, history), loaded = loaded, None
            else:
                session, history = load_session_and_history(session_id, store, inbox_row=pending_inbox,
                                                            answer_follows=not streaming)
            if pending_inbox is not None and ordered and getattr(pending_inbox, "waits_behind", None) is not None:
                pending_inbox = None
                if (parked := _wait_turn(record, waited)) is not None:
                    return parked
                continue  # read the session again: the earlier inputs changed it
            pending_inbox = None
            silenced = silenced_for(session, stored.get("silenced"))
            if silenced is None:  # a channel's own rule (WhatsApp's 24-hour window)
                silenced = channels.silenced_by_channel(record.kind, session, agent, stored["turn"])
            kwargs = _turn_kwargs(record, session, history, context_for(session_id, session, stored["turn"], context),
                                  silenced)
            taped = recording.Tape() if recorded else None
            if streaming:
                # The conversation is marked only while the engine runs, never across a yield: a
                # stream its reader abandons must not leave it set for whatever runs next.
                result: Any = None  # the engine's TurnResult, from the stream's last chunk
                chunks = agent.turn_stream(**kwargs)
                while (chunk := _as_session(session_id, next, chunks, None, taped=taped)) is not None:
                    if chunk.get("done"):
                        result = chunk["result"]
                    elif chunk.get("delta"):
                        yield {"delta": chunk["delta"]}
            else:
                result = _as_session(session_id, agent.turn, taped=taped, **kwargs)
            kept = _recording(taped, kwargs, result) if taped is not None else None
        except ProviderError as exc:
            return inbox.park(record, exc, replays)
        except Exception as exc:
            if pending_inbox is not None and pending_inbox.pk is None:
                pending_inbox = None  # the inbox row itself could not be written: nothing to mark failed
                raise
            inbox.fail(record, exc, replays)
            raise

        if not result.changed:
            return _record_unchanged(record, result, replays, session, kept)
        try:
            host_result = _commit(record, session, result, replays, store, send_inline=send_inline, recording=kept)
        except (SessionConflictError, IntegrityError) as exc:
            replays += 1
            logger.info("falai host: %s on %s, replaying %s (%d)", type(exc).__name__, session_id, record.input_key,
                        replays)
            if replays > max_replays:
                return inbox.park(record, exc, replays)
            if streaming:
                yield {"replay": replays}
            continue
        return host_result


def _commit(record: TurnRecord, session: Any, result: Any, replays: int, store: DjangoStore, *,
            send_inline: bool = False, recording: dict[str, Any] | None = None) -> HostResult:
    session_id = record.conversation_id
    unsaved = record.pk is None
    counters = (record.replays, record.attempts, record.status)
    write = TurnWrite(record=record, session_id=session_id, expected=session.version if session is not None else 0,
                      result=result, replays=replays, now=timezone.now(), send_inline=send_inline,
                      recording=recording)
    try:
        version, handoff = write_turn(write, store)
    except BaseException:
        if unsaved:  # rolled back: the run-log row was never written
            record.pk = record.id = None
            record._state.adding = True
            record.replays, record.attempts, record.status = counters
        raise
    if handoff == "inline":
        transaction.on_commit(lambda: send_after_commit(session_id), using=store.db_alias())
    elif handoff == "queue":
        transaction.on_commit(lambda: jobs.queue_sends_after_commit(session_id), using=store.db_alias())
    return HostResult(turn_id=record.pk, session_id=session_id, status=TurnRecord.Status.DONE, changed=True,
                      result=result, replays=replays, version=version)


def _record_unchanged(record: TurnRecord, result: Any, replays: int, session: Any,
                      recording: dict[str, Any] | None = None) -> HostResult:
    with transaction.atomic():
        inbox.finish(record, TurnRecord.Status.UNCHANGED, result, replays, recording=recording)
        if record.kind == TurnRecord.Kind.WAKE:
            Wake.objects.mark_fired(record.conversation_id, record.input_key, timezone.now())
    return HostResult(turn_id=record.pk, session_id=record.conversation_id, status=TurnRecord.Status.UNCHANGED,
                      changed=False, result=result, replays=replays,
                      version=session.version if session is not None else None)
