"""The counters and histograms every process adds to, summed in the database.

A web server, a django-q2 worker and the dispatcher are separate processes, often on separate
machines; the only thing they all share is the database the conversations live in. So each
process counts in memory (`inc`, `observe`: a dict update under a lock, no I/O) and adds what it
counted to one row per series (`models.MetricTotal`) with one upsert:

- every `FALAI["METRICS_FLUSH_S"]` seconds (2 s) from a daemon thread the first count starts
  (once per process: a forked django-q2 worker starts its own and drops its parent's counts);
- when the process exits (atexit, and multiprocessing's finalizers for forked workers);
- before a scrape in the process that serves it (`exposition.render`).

A turn counted on a worker is therefore on every web server's `GET <app>/metrics` within about
two seconds, with no setting, environment variable or shared directory. A flush that fails (the
database is away) keeps the counts for the next one and says so once in the log.

Histograms are stored as their buckets' own counts (not cumulative), `_sum` and `_count`;
`exposition` adds them up.

Model calls are also counted by day (`DAY_CALLS`, `DAY_TOKENS`, `DAY_SECONDS`: rows of
`models.DailyTotal`, written by the same flush): the admin's Operations page reads calls, latency percentiles and tokens by model per day
from them, and turns tokens into money (`FALAI["MODEL_PRICES"]`).
"""

from __future__ import annotations

import atexit
import bisect
import datetime
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client.utils import floatToGoString

from falai_django import conf

logger = logging.getLogger("falai_django.metrics")

# Turn time on the host without the model: a write is a few milliseconds; a slow one is news.
TURN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LLM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
LATENESS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

# name: (help, label names)
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "falai_turns_total": ("Turns the host ran, by input kind and the status the run log records.",
                          ("kind", "status")),
    "falai_turn_replays_total": ("Turns replayed after a compare-and-swap conflict.", ()),
    "falai_llm_calls_total": ("Model calls, by provider, model and result (ok or the error kind).",
                              ("provider", "model", "result")),
    "falai_llm_tokens_total": ("Model tokens, by provider, model and type (prompt, cached, completion).",
                               ("provider", "model", "type")),
    "falai_sends_total": ("Outbound messages handed to the channel, by channel and result (sent, retry, failed).",
                          ("channel", "result")),
    "falai_inbound_skipped_total": ("Inbound items a channel left out (neither a turn nor a transcript line), by "
                                    "channel and message type.", ("channel", "type")),
    "falai_delivery_statuses_total": ("Delivery statuses a channel reported, by channel and result (applied, kept, "
                                      "applied_late, expired, stale, unknown).", ("channel", "result")),
    "falai_media_total": ("Customers' media a channel transcribed or described before the turn, by channel, "
                          "type and outcome (transcribed, described, failed).", ("channel", "type", "outcome")),
    "falai_replay_runs_total": ("Replays of a flow version asked for in the admin, by result (done, failed).",
                                ("result",)),
    "falai_erasures_total": ("Conversations erased (erased), or refused because a turn of theirs was running "
                             "(busy).", ("result",)),
    "falai_purged_rows_total": ("Rows manage.py falai_purge deleted, by retention key (run_log, "
                                "transcript, wakes, desk).", ("kind",)),
}

# name: (help, label names, bucket bounds)
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]] = {
    "falai_turn_duration_seconds": ("Host time per turn, without the time spent waiting for the model.", (),
                                    TURN_BUCKETS),
    "falai_llm_call_duration_seconds": ("Model call time, by provider and model.", ("provider", "model"),
                                        LLM_BUCKETS),
    "falai_wake_lateness_seconds": ("How long after its due time a wake fired.", (), LATENESS_BUCKETS),
}

# Counted by day for the Operations page (`model_called` writes them, `observe.operations` reads
# them): calls {provider, model, result}, tokens {provider, model, type}, and call time
# {provider, model} as a histogram with fine buckets (each 25 % above the last, 50 ms to 5 min:
# its p50/p95 are within about 12 %).
DAY_CALLS, DAY_TOKENS, DAY_SECONDS = "llm_calls", "llm_tokens", "llm_seconds"
DAY_LATENCY_BUCKETS = tuple(round(0.05 * 1.25 ** k, 4) for k in range(40))

LABEL_MAX = 120  # a label value longer than this is cut (a model name, a channel)


def series_key(labels: Mapping[str, Any]) -> str:
    """A series' labels as stored: compact JSON, sorted keys; "" for none."""
    if not labels:
        return ""
    return _series_key(_pairs(labels))


def _pairs(labels: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)[:LABEL_MAX]) for k, v in labels.items()))


@functools.lru_cache(maxsize=4096)  # a handful of series are counted over and over
def _series_key(items: tuple[tuple[str, str], ...]) -> str:
    return json.dumps(dict(items), separators=(",", ":"), ensure_ascii=False) if items else ""


# A value's bucket: the index of the first bound it does not exceed (bisect), and that bound's
# `le` text, worked out once per histogram.
_LE_TEXTS: dict[tuple[float, ...], tuple[str, ...]] = {}


def _bucket(bounds: tuple[float, ...], value: float) -> str:
    texts = _LE_TEXTS.get(bounds)
    if texts is None:
        texts = _LE_TEXTS[bounds] = (*(floatToGoString(b) for b in bounds), "+Inf")
    return texts[bisect.bisect_left(bounds, value)]


def _histogram(name: str, value: float, pairs: tuple[tuple[str, str], ...], bounds: tuple[float, ...],
               day: str | None = None) -> list[tuple[tuple[str, ...], float]]:
    """The three additions one observed value makes: its bucket, the sum and the count."""
    value = max(0.0, float(value))
    bucket = _series_key(tuple(sorted((*pairs, ("le", _bucket(bounds, value))))))
    key = _series_key(pairs)
    tail = () if day is None else (day,)
    return [((f"{name}_bucket", bucket, *tail), 1.0), ((f"{name}_sum", key, *tail), value),
            ((f"{name}_count", key, *tail), 1.0)]


class Tally:
    """This process's counts since its last flush: {(series name, labels key[, day]): amount}."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, ...], float] = {}  # (name, labels) or (name, labels, day)

    def add(self, name: str, labels: str, amount: float) -> None:
        self.add_many([((name, labels), amount)])

    def add_many(self, items: list[tuple[tuple[str, ...], float]]) -> None:
        """Add several amounts under one lock (a model call makes about a dozen)."""
        with self._lock:
            pending = self._pending
            for key, amount in items:
                pending[key] = pending.get(key, 0.0) + amount

    def take(self) -> dict[tuple[str, ...], float]:
        with self._lock:
            taken, self._pending = self._pending, {}
        return taken

    def give_back(self, taken: dict[tuple[str, ...], float]) -> None:
        """A flush that failed: its counts wait for the next one."""
        self.add_many(list(taken.items()))

    def forget(self) -> None:
        """In a forked child: the parent's counts are the parent's to write (and the lock may have
        been held by one of its threads)."""
        self._lock = threading.Lock()
        self._pending = {}

    def __bool__(self) -> bool:
        return bool(self._pending)


tally = Tally()


def inc(name: str, amount: float = 1.0, **labels: Any) -> None:
    """Add to a counter named in COUNTERS."""
    if amount:
        tally.add(name, series_key(labels), float(amount))
        flusher.ensure()


def observe(name: str, value: float, **labels: Any) -> None:
    """Put one value in a histogram named in HISTOGRAMS."""
    tally.add_many(_histogram(name, value, _pairs(labels), HISTOGRAMS[name][2]))
    flusher.ensure()


_day: tuple[str, float] = ("", 0.0)  # today, and until when (time.time()) it is today


def _today() -> str:
    """The project's local day (its TIME_ZONE), as the Operations page shows days. Worked out at
    most once a minute (and at midnight), not on every model call."""
    global _day
    day, until = _day
    now = time.time()
    if now < until:
        return day
    from django.conf import settings
    from django.utils import timezone

    if settings.USE_TZ:
        local = timezone.localtime()
        midnight = timezone.make_aware(datetime.datetime.combine(local.date() + datetime.timedelta(days=1),
                                                                 datetime.time.min), local.tzinfo)
    else:
        local = datetime.datetime.now()
        midnight = datetime.datetime.combine(local.date() + datetime.timedelta(days=1), datetime.time.min)
    day = local.date().isoformat()
    _day = (day, min(midnight.timestamp(), now + 60.0))
    return day


# ---------------------------------------------------------------------------------------------
# What the host counts
# ---------------------------------------------------------------------------------------------


def turn_finished(kind: str, status: str, replays: int, host_s: float) -> None:
    items: list[tuple[tuple[str, ...], float]] = [
        (("falai_turns_total", _series_key((("kind", kind), ("status", status)))), 1.0)]
    if replays:
        items.append((("falai_turn_replays_total", ""), float(replays)))
    items += _histogram("falai_turn_duration_seconds", host_s, (), TURN_BUCKETS)
    tally.add_many(items)
    flusher.ensure()


_TOKEN_FIELDS = (("prompt", "promptTokens"), ("cached", "cachedInputTokens"), ("completion", "completionTokens"))


def model_called(provider: Any, output: Any, error: BaseException | None, seconds: float) -> None:
    """`llm.calling`'s observer: one model call, its result, time and tokens (totals and today's)."""
    from falai_django.llm.errors import ProviderError
    from falai_django.llm.types import read_usage

    metadata = getattr(output, "metadata", None) or {}
    name = str(getattr(provider, "name", None) or type(provider).__name__)[:LABEL_MAX]
    model = str(metadata.get("model") or getattr(provider, "model", None) or "")[:LABEL_MAX]
    if error is None:
        result = "ok"
    else:
        result = error.kind if isinstance(error, ProviderError) else "error"
    day = _today()
    who = (("model", model), ("provider", name))
    call = _series_key((*who, ("result", str(result)[:LABEL_MAX])))
    items = [(("falai_llm_calls_total", call), 1.0), ((DAY_CALLS, call, day), 1.0)]
    items += _histogram("falai_llm_call_duration_seconds", seconds, who, LLM_BUCKETS)
    items += _histogram(DAY_SECONDS, seconds, who, DAY_LATENCY_BUCKETS, day)
    usage = read_usage(metadata) if error is None else None
    if usage:
        for kind, field in _TOKEN_FIELDS:
            amount = float(usage.get(field, 0))
            if amount:
                key = _series_key((*who, ("type", kind)))
                items += [(("falai_llm_tokens_total", key), amount), ((DAY_TOKENS, key, day), amount)]
    tally.add_many(items)
    flusher.ensure()


def message_sent(channel: str, result: str) -> None:
    inc("falai_sends_total", channel=channel, result=result)


def inbound_skipped(channel: str, kind: str) -> None:
    inc("falai_inbound_skipped_total", channel=channel, type=kind or "unknown")


def status_reported(channel: str, result: str) -> None:
    inc("falai_delivery_statuses_total", channel=channel, result=result)


def media_understood(channel: str, kind: str, outcome: str) -> None:
    inc("falai_media_total", channel=channel, type=kind, outcome=outcome)


def configured_channel() -> str | None:
    """The `channel` label of `FALAI["SENDER"]`'s sends, or None when the sender does not import
    (`manage.py check` reports that)."""
    from falai_django.sending import channel_name

    try:
        return channel_name(conf.get_sender())
    except Exception:  # noqa: BLE001 - reported by the checks, not by every reader of the label
        return None


def wake_fired(lateness_s: float) -> None:
    observe("falai_wake_lateness_seconds", lateness_s)


# ---------------------------------------------------------------------------------------------
# Writing the counts
# ---------------------------------------------------------------------------------------------


def db_alias() -> str:
    return conf.get_store().db_alias()


def flush(using: str | None = None) -> int:
    """Add this process's counts to the database now. Returns how many series it wrote; on a
    failure the counts are kept for the next flush and the error is raised."""
    taken = tally.take()
    if not taken:
        return 0
    try:
        _write(taken, using or db_alias())
    except BaseException:
        tally.give_back(taken)
        raise
    return len(taken)


def _write(taken: dict[tuple[str, ...], float], alias: str) -> None:
    from django.db import transaction

    from falai_django.models import DailyTotal, MetricTotal

    # One lock order for every writer (sorted rows): concurrent flushes never deadlock.
    totals = sorted((key, amount) for key, amount in taken.items() if len(key) == 2)
    daily = sorted(((datetime.date.fromisoformat(key[2]), key[0], key[1]), amount)
                   for key, amount in taken.items() if len(key) == 3)
    with transaction.atomic(using=alias):
        if totals:
            _add(MetricTotal, ("name", "labels"), totals, alias)
        if daily:
            _add(DailyTotal, ("day", "name", "labels"), daily, alias)


def _add(model: Any, key_fields: tuple[str, ...],
         rows: Sequence[tuple[tuple[str | datetime.date, ...], float]], alias: str) -> None:
    """Add each row's amount to its series' `value` (a new series starts at it): one upsert per
    300 rows on PostgreSQL and SQLite, an UPDATE-else-INSERT elsewhere."""
    from django.db import connections

    connection = connections[alias]
    if connection.vendor in ("postgresql", "sqlite"):
        q = connection.ops.quote_name
        table = q(model._meta.db_table)
        columns = ", ".join(q(f) for f in (*key_fields, "value"))
        conflict = ", ".join(q(f) for f in key_fields)
        per = 900 // (len(key_fields) + 1)  # parameters under old SQLite's 999
        for start in range(0, len(rows), per):
            part = rows[start:start + per]
            values = ", ".join(["(" + ", ".join(["%s"] * (len(key_fields) + 1)) + ")"] * len(part))
            params = [v for key, amount in part for v in (*key, amount)]
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {table} ({columns}) VALUES {values} ON CONFLICT ({conflict}) DO UPDATE "
                    f"SET {q('value')} = {table}.{q('value')} + excluded.{q('value')}", params)
        return
    from django.db.models import F

    for key, amount in rows:
        where = dict(zip(key_fields, key, strict=True))
        if not model.objects.using(alias).filter(**where).update(value=F("value") + amount):
            model.objects.using(alias).create(**where, value=amount)


class Flusher:
    """The daemon thread that flushes this process's counts every METRICS_FLUSH_S seconds."""

    enabled = True  # the test suite turns it off in its own process (its workers keep it)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self.failing = False

    def ensure(self) -> None:
        if self._pid == os.getpid() or not self.enabled:
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            threading.Thread(target=self._run, name="falai-metrics", daemon=True).start()
            atexit.register(self.at_exit)
            try:  # a forked django-q2 worker leaves through multiprocessing, which skips atexit
                from multiprocessing import util

                util.Finalize(self, self.at_exit, exitpriority=100)
            except Exception:  # noqa: BLE001 - atexit still covers a plain process
                pass

    def after_fork(self) -> None:
        """In a forked child: no thread of the parent's runs here; the first count starts one."""
        tally.forget()
        self._lock = threading.Lock()
        self._pid = None

    def _run(self) -> None:
        while True:
            time.sleep(float(conf.get("METRICS_FLUSH_S")) or 2.0)
            if tally:
                self.flush_quietly()
            self._close_connections()

    def flush_quietly(self) -> None:
        try:
            flush()
        except Exception as exc:  # noqa: BLE001 - kept for the next flush; said once per failure run
            if not self.failing:
                logger.warning("falai metrics: pid %s could not write its counts to the database (%s: %s); "
                               "they are kept and written once it answers", os.getpid(), type(exc).__name__, exc)
            self.failing = True
            self._close_connections(broken=True)
        else:
            if self.failing:
                logger.warning("falai metrics: pid %s writes its counts again", os.getpid())
            self.failing = False

    def at_exit(self) -> None:
        if self._pid == os.getpid() and tally:
            self.flush_quietly()

    @staticmethod
    def _close_connections(broken: bool = False) -> None:
        from django.db import connections

        for connection in connections.all(initialized_only=True):
            try:
                if broken:
                    connection.close()
                else:
                    connection.close_if_unusable_or_obsolete()
            except Exception:  # noqa: BLE001 - a dead connection is gone either way
                pass


flusher = Flusher()
os.register_at_fork(after_in_child=flusher.after_fork)
