"""Issue 28: one conversation's inputs are processed in the order they were received, however
many workers run (falai_django/host/ordering.py). The burst (`order_burst.py`) runs here on the
suite's database (SQLite in the normal run, PostgreSQL in the PostgreSQL run, where
test_pg_turn_order.py runs a bigger one); the other tests pin the rules one at a time: an
in-line input runs the earlier stored ones first, a parked input holds the later ones back until
its retry, a worker waits for an input run in-line, a wake is not held back, and every wait or
lock found taken is logged with the conversation id."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from falai_django import host, tasks
from falai_django.engine.errors import ProviderError
from falai_django.host import ordering
from falai_django.models import HistoryItem, TurnRecord
from falai_django.stores.django import DjangoStore

from . import agents
from .helpers import listening
from .order_burst import burst

pytestmark = pytest.mark.django_db(transaction=True)


class Lines(logging.Handler):
    """The host's log lines (the PostgreSQL run has no caplog: `-p no:logging`)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def about(self, *words: str) -> list[str]:
        return [line for line in self.lines if all(word in line for word in words)]


@pytest.fixture
def log():
    with listening(Lines(), "falai_django.host") as handler:
        yield handler


def _users(sid: str) -> list[str]:
    return list(HistoryItem.objects.filter(conversation_id=sid, role="user").order_by("id")
                .values_list("content", flat=True))


def _stored(sid: str, text: str, message_id: str) -> TurnRecord:
    """An input a webhook stored, whose task has not run yet."""
    return host.receive(sid, {"message": text, "id": message_id})


def _failing_provider() -> None:
    agents.use(agents.ana(provider=agents.scripted_provider(understand=[ProviderError("mock", "overload", "busy")] * 9),
                          clock=agents.clock()))


def test_a_burst_at_eight_workers_is_processed_in_order():
    burst(conversations=3, messages=20, workers=8)


def test_an_in_line_input_runs_the_earlier_stored_ones_first():
    host.handle_message("c1", "oi", id="w.1")
    first = _stored("c1", "meu nome é Ana", "w.2")
    second = _stored("c1", "tudo bem?", "w.3")
    result = host.handle_message("c1", "alô", id="w.4")  # the API's path: it must not overtake them
    assert result.status == "done"
    assert _users("c1") == ["oi", "meu nome é Ana", "tudo bem?", "alô"]
    assert DjangoStore().load("c1").inputs == ["w.1", "w.2", "w.3", "w.4"]
    assert set(TurnRecord.objects.filter(pk__in=[first.pk, second.pk]).values_list("status", flat=True)) == {"done"}
    assert tasks.process_turn(first.pk) is None  # its task, late: nothing left to do


def test_an_in_line_input_with_nothing_open_before_it_claims_only_itself():
    result = host.handle_message("c1", "oi", id="w.1")
    record = TurnRecord.objects.get(pk=result.turn_id)
    assert record.status == "done" and record.claimed_until is not None  # claimed while it ran


def test_a_parked_input_holds_the_later_ones_back_until_its_retry(settings, log):
    settings.FALAI = {**settings.FALAI, "TURN_RETRY_BASE_S": 60}
    host.handle_message("c1", "oi", id="w.1")
    _failing_provider()
    parked = host.handle_message("c1", "meu nome é Ana", id="w.2")
    assert parked.status == "retry" and parked.retry_at is not None
    agents.use(agents.ana(clock=agents.clock()))  # the provider is back, the retry is not due yet

    # In-line: parked behind it (answered "retry" with the blocker's time), nothing attempted.
    behind = host.handle_message("c1", "tudo bem?", id="w.3")
    assert behind.status == "retry" and behind.retry_at == parked.retry_at
    assert "waiting behind input" in behind.error
    record = TurnRecord.objects.get(pk=behind.turn_id)
    assert record.status == "retry" and record.attempts == 0
    assert log.about("conversation c1", f"input {behind.turn_id} parked until")

    # A worker's input: left received, to be looked at when the blocker is due; logged.
    later = _stored("c1", "alô", "w.4")
    assert tasks.process_turn(later.pk) is None
    later.refresh_from_db()
    assert later.status == "received" and later.next_attempt_at == parked.retry_at
    assert log.about("conversation c1", "wait behind input", "parked for retry")
    assert _users("c1") == ["oi"]

    # The retry is due: its task runs it, then the ones behind it, in order.
    TurnRecord.objects.filter(pk=parked.turn_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert tasks.process_turn(parked.turn_id) == "done"
    assert _users("c1") == ["oi", "meu nome é Ana", "tudo bem?", "alô"]
    assert set(TurnRecord.objects.filter(conversation_id="c1").values_list("status", flat=True)) == {"done"}


def test_a_given_up_input_no_longer_holds_anything_back():
    host.handle_message("c1", "oi", id="w.1")
    _failing_provider()
    parked = host.handle_message("c1", "meu nome é Ana", id="w.2")
    TurnRecord.objects.filter(pk=parked.turn_id).update(status="failed")  # TURN_RETRY_MAX reached
    agents.use(agents.ana(clock=agents.clock()))
    assert host.handle_message("c1", "tudo bem?", id="w.3").status == "done"


def test_a_wake_is_not_held_back_by_an_open_input():
    host.handle_message("c1", "oi", id="w.1")
    key = host.handle_message("c1", "meu nome é Ana", id="w.2").result.schedule[0].key
    waiting = _stored("c1", "ainda aí?", "w.3")
    agents.clock().advance(timedelta(hours=1, seconds=1))
    assert host.handle_wake("c1", key).changed  # interleaves, as before
    assert TurnRecord.objects.get(pk=waiting.pk).status == "received"


def test_a_worker_waits_for_an_input_its_caller_runs_in_line(log):
    host.handle_message("c1", "oi", id="w.1")
    started, go = threading.Event(), threading.Event()

    def slow_understand(request):
        started.set()
        go.wait(10)
        return agents.understand_reply(request)

    agents.use(agents.ana(provider=agents.scripted_provider(understand=[slow_understand] + [agents.understand_reply] * 9),
                          clock=agents.clock()))
    answers = []

    def in_line():
        try:
            answers.append(host.handle_message("c1", "meu nome é Ana", id="w.2").status)
        finally:
            connections.close_all()

    caller = threading.Thread(target=in_line)
    caller.start()
    assert started.wait(10)  # the in-line input is written, claimed, and its model call is running
    later = _stored("c1", "tudo bem?", "w.3")
    threading.Timer(0.3, go.set).start()
    assert tasks.process_turn(later.pk) == "done"  # it waited for the in-line one, then ran
    caller.join(10)
    assert answers == ["done"]
    assert _users("c1") == ["oi", "meu nome é Ana", "tudo bem?"]


def _hold_lock(sid: str, held: threading.Event, release: threading.Event) -> None:
    try:
        assert ordering.lock(sid)[0]
        held.set()
        release.wait(10)
        ordering.release(sid)
    finally:
        connections.close_all()


def test_a_worker_that_finds_the_lock_taken_leaves_and_says_so(log):
    record = _stored("c1", "oi", "w.1")
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=("c1", held, release))
    holder.start()
    assert held.wait(10)
    try:
        assert tasks.process_turn(record.pk) is None
        assert log.about("conversation c1", "turn lock held by another worker", f"input {record.pk}")
        assert TurnRecord.objects.get(pk=record.pk).status == "received"
    finally:
        release.set()
        holder.join(10)
    assert tasks.process_turn(record.pk) == "done"


def test_an_in_line_input_that_waits_too_long_for_the_lock_is_parked_and_logged(settings, log):
    settings.FALAI = {**settings.FALAI, "TURN_WAIT_S": 0.3}
    _stored("c1", "oi", "w.1")  # open before it: the in-line input needs the lock
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=("c1", held, release))
    holder.start()
    assert held.wait(10)
    try:
        began = time.monotonic()
        result = host.handle_message("c1", "meu nome é Ana", id="w.2")
        assert time.monotonic() - began < 5
    finally:
        release.set()
        holder.join(10)
    assert result.status == "retry" and result.retry_at is not None
    assert log.about("conversation c1", "could not take the turn lock")
    assert TurnRecord.objects.get(pk=result.turn_id).status == "retry"
    first = TurnRecord.objects.get(input_key="w.1")
    assert tasks.process_turn(first.pk) == "done"  # the sweep's turn: both run, in order
    assert _users("c1") == ["oi", "meu nome é Ana"]


def test_webhooks_and_api_calls_mixed_keep_the_order():
    burst(conversations=3, messages=12, workers=8, seed=29, in_line_every=3)


def test_a_parked_wake_record_is_run_by_its_task_unordered():
    host.handle_message("c1", "oi", id="w.1")
    key = host.handle_message("c1", "meu nome é Ana", id="w.2").result.schedule[0].key
    waiting = _stored("c1", "ainda aí?", "w.3")
    wake = host.receive("c1", {"wake": key})  # a wake's run-log row parked by a failed turn
    TurnRecord.objects.filter(pk=wake.pk).update(status="retry")
    agents.clock().advance(timedelta(hours=1, seconds=1))
    assert tasks.process_turn(wake.pk) == "done"
    assert TurnRecord.objects.get(pk=waiting.pk).status == "received"


def test_a_stream_abandoned_mid_turn_gives_its_input_back_to_the_workers():
    chunks = host.stream("c1", {"message": "oi", "id": "w.1"})
    assert "delta" in next(chunks)
    record = TurnRecord.objects.get(input_key="w.1")
    assert record.status == "received" and record.claimed_until is not None  # its caller runs it
    chunks.close()
    record.refresh_from_db()
    assert record.status == "received" and record.claimed_until is None
    later = _stored("c1", "meu nome é Ana", "w.2")
    assert tasks.process_turn(later.pk) == "done"  # no wait: the abandoned input runs first
    assert _users("c1") == ["oi", "meu nome é Ana"]
