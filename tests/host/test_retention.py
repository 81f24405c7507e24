"""Issue 51: data kept only as long as `FALAI["RETENTION"]` says (falai_django/host/retention.py,
`manage.py falai_purge`). Runs on SQLite here and on PostgreSQL in tests/host/test_postgres.py's run."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from falai_django import checks, conf, host, tasks
from falai_django.models import DeskEntry, History, TurnRecord, Wake
from falai_django.testing import fake_clock

from . import agents

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def retention(settings):
    """Set FALAI["RETENTION"] (over the host tests' FALAI) for the test."""

    def set_(**limits):
        settings.FALAI = {**settings.FALAI, "RETENTION": limits}
        conf.clear_cache()

    return set_


def _conversation(session_id: str) -> None:
    """Two messages: transcript lines (in and out), two finished run-log rows, a pending wake."""
    host.handle_message(session_id, "oi", id=f"{session_id}.1")
    host.handle_message(session_id, "meu nome é Ana", id=f"{session_id}.2")


def _age(model, days: float, **filters) -> None:
    """Make rows `days` old (before NOW) in every column the purge reads."""
    when = NOW - timedelta(days=days)
    rows = model.objects.filter(**filters)
    if model is TurnRecord:
        rows.update(received_at=when, finished_at=when)
    elif model is History:
        rows.update(at=when)
    elif model is Wake:
        rows.update(created_at=when, at=when, fired_at=when)
    else:
        rows.update(at=when)


def _ids(model, **filters) -> set[int]:
    return set(model.objects.filter(**filters).values_list("pk", flat=True))


def test_each_kind_goes_once_older_than_its_limit_and_nothing_younger(retention):
    retention(run_log="30d", transcript="60d", wakes="7d", desk="12h")
    _conversation("old")
    _conversation("new")
    DeskEntry.objects.create(conversation_id="old", kind=DeskEntry.Kind.NOTE, text="ligar amanhã")
    DeskEntry.objects.create(conversation_id="new", kind=DeskEntry.Kind.NOTE, text="cliente voltou")
    Wake.objects.filter(conversation_id="old").update(state=Wake.State.DONE)
    Wake.objects.filter(conversation_id="new").update(state=Wake.State.DONE)
    for model in (TurnRecord, History, Wake, DeskEntry):
        _age(model, 90, conversation_id="old")  # past every limit
        _age(model, 0.25, conversation_id="new")  # 6 hours: within every limit
    kept = {model: _ids(model, conversation_id="new") for model in (TurnRecord, History, Wake, DeskEntry)}
    old = {model: len(_ids(model, conversation_id="old")) for model in (TurnRecord, History, Wake, DeskEntry)}

    report = host.purge(now=NOW)

    assert report == {"run_log": old[TurnRecord], "transcript": old[History], "wakes": old[Wake], "desk": old[DeskEntry]}
    assert all(report.values())
    for model, ids in kept.items():
        assert _ids(model) == ids, model
    assert host.purge(now=NOW) == {"run_log": 0, "transcript": 0, "wakes": 0, "desk": 0}  # idempotent


def test_the_limits_are_exact_to_the_hour(retention):
    retention(run_log="12h", transcript=None, wakes=None, desk=None)
    _conversation("c1")
    first, second = TurnRecord.objects.filter(conversation_id="c1").order_by("id")
    TurnRecord.objects.filter(pk=first.pk).update(received_at=NOW - timedelta(hours=13),
                                                  finished_at=NOW - timedelta(hours=12, minutes=1))
    TurnRecord.objects.filter(pk=second.pk).update(received_at=NOW - timedelta(hours=12),
                                                   finished_at=NOW - timedelta(hours=11, minutes=59))
    assert host.purge(now=NOW) == {"run_log": 1}
    assert _ids(TurnRecord) == {second.pk}


def test_open_inputs_pending_sends_and_pending_wakes_stay_whatever_their_age(retention):
    retention(run_log="1d", transcript="1d", wakes="1d", desk="1d")
    _conversation("c1")
    parked = host.receive("c1", {"message": "ainda aí?", "id": "c1.3"})  # stored, its task not run yet
    TurnRecord.objects.filter(pk=parked.pk).update(status=TurnRecord.Status.RETRY)
    History.objects.filter(conversation_id="c1", role="assistant").update(send_status=History.SendStatus.PENDING)
    for model in (TurnRecord, History, Wake):
        _age(model, 400, conversation_id="c1")
    pending = _ids(History, conversation_id="c1", role="assistant")
    wakes = _ids(Wake, conversation_id="c1")
    assert pending and wakes

    report = host.purge(now=NOW)

    assert _ids(TurnRecord) == {parked.pk}  # the finished ones went, the open one stays
    assert report["run_log"] == 2
    assert _ids(History) == pending  # the customer's old lines went; the unsent replies stay
    assert _ids(Wake) == wakes and report["wakes"] == 0  # not fired yet


def test_finished_replays_go_with_the_run_log_and_a_running_one_stays(retention):
    from falai_django.models import Flow, ReplayResult, ReplayRun

    retention(run_log="30d", transcript=None, wakes=None, desk=None)
    Flow.objects.bulk_create([Flow(id="triagem", spec={"id": "triagem", "steps": []})])
    old = ReplayRun.objects.create(flow_id="triagem", version=1, state=ReplayRun.State.DONE,
                                   finished_at=NOW - timedelta(days=40))
    ReplayResult.objects.create(run=old, position=0, conversation_id="5511987654321", status="same",
                                report={"turns": [{"said": "Oi, Ana!"}]})
    running = ReplayRun.objects.create(flow_id="triagem", version=2, state=ReplayRun.State.RUNNING)
    recent = ReplayRun.objects.create(flow_id="triagem", version=2, state=ReplayRun.State.FAILED,
                                      finished_at=NOW - timedelta(days=1))
    ReplayRun.objects.filter(pk__in=[old.pk, running.pk]).update(requested_at=NOW - timedelta(days=40))
    ReplayRun.objects.filter(pk=recent.pk).update(requested_at=NOW - timedelta(days=1))

    assert host.purge(now=NOW) == {"run_log": 1}

    assert _ids(ReplayRun) == {running.pk, recent.pk}
    assert not ReplayResult.objects.exists()


@pytest.mark.parametrize("column", ["received_at", "finished_at"])
def test_a_run_log_row_is_past_the_limit_once_any_of_its_times_is(retention, column):
    retention(run_log="7d", transcript=None, wakes=None, desk=None)
    host.handle_message("c1", "oi", id="c1.1")
    TurnRecord.objects.update(**{column: NOW - timedelta(days=8)})  # the other one stays recent
    assert TurnRecord.objects.exclude(**{f"{column}__lt": NOW - timedelta(days=7)}).count() == 0
    assert host.purge(now=NOW) == {"run_log": 1}
    assert not TurnRecord.objects.exists()


def test_none_keeps_forever(retention):
    retention(run_log=None, transcript=None, wakes=None, desk=None)
    _conversation("c1")
    for model in (TurnRecord, History, Wake):
        _age(model, 4000, conversation_id="c1")
    Wake.objects.update(state=Wake.State.DONE)
    before = {model: _ids(model) for model in (TurnRecord, History, Wake)}
    assert host.purge(now=NOW) == {}
    assert {model: _ids(model) for model in (TurnRecord, History, Wake)} == before


def test_a_purged_run_log_row_leaves_its_transcript_lines_without_a_turn(retention):
    retention(run_log="1d", transcript=None)
    _conversation("c1")
    lines = _ids(History, conversation_id="c1")
    assert History.objects.filter(turn__isnull=False).exists()
    _age(TurnRecord, 2, conversation_id="c1")
    host.purge(now=NOW, only=["run_log"])
    assert not TurnRecord.objects.exists()
    assert _ids(History) == lines
    assert not History.objects.filter(turn__isnull=False).exists()


def test_small_batches_walk_the_whole_table_and_stop_at_the_first_batch_all_newer(retention):
    retention(transcript="30d", run_log=None, wakes=None, desk=None)
    for n in range(4):
        _conversation(f"c{n}")
    rows = list(History.objects.order_by("id").values_list("pk", flat=True))
    old, new = rows[:5], rows[5:]
    History.objects.filter(pk__in=old).update(at=NOW - timedelta(days=31))
    History.objects.filter(pk__in=new).update(at=NOW - timedelta(days=1))
    progress: list[tuple[str, int]] = []

    assert host.purge(now=NOW, batch=2, progress=lambda key, n: progress.append((key, n))) == {"transcript": 5}

    assert list(History.objects.order_by("id").values_list("pk", flat=True)) == new
    assert progress == [("transcript", 2), ("transcript", 2), ("transcript", 1)]
    with CaptureQueriesContext(connection) as queries:  # nothing old left: one batch read, no delete
        assert host.purge(now=NOW, batch=2) == {"transcript": 0}
    statements = [q["sql"] for q in queries.captured_queries if "falai_history" in q["sql"]]
    assert len([s for s in statements if s.lstrip().upper().startswith("DELETE")]) == 0
    assert len(statements) <= 3, statements


def test_a_purge_while_turns_run_deletes_only_old_rows_and_the_turns_finish(retention):
    retention(run_log="1d", transcript="1d", wakes="1d", desk="1d")
    agents.reset(clock=fake_clock(NOW.isoformat()))  # the live lines are written at NOW
    for n in range(3):
        _conversation(f"old{n}")
    Wake.objects.update(state=Wake.State.DONE)
    for model in (TurnRecord, History, Wake):
        _age(model, 10)
    errors: list[BaseException] = []
    results: list[str] = []

    def serve() -> None:
        try:
            for n in range(8):
                results.append(host.handle_message(f"live{n % 2}", f"mensagem {n}", id=f"live.{n}").status)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    server = threading.Thread(target=serve)
    server.start()
    report = host.purge(now=NOW, batch=1)
    server.join(60)
    assert not errors and results == ["done"] * 8
    assert report["run_log"] == 6
    assert not TurnRecord.objects.filter(conversation_id__startswith="old").exists()
    assert not History.objects.filter(conversation__id__startswith="old").exists()
    assert TurnRecord.objects.filter(conversation_id__startswith="live", status="done").count() == 8
    assert History.objects.filter(conversation__id__startswith="live", role="user").count() == 8


# -- the setting ------------------------------------------------------------------------------


def test_the_defaults_are_in_conf(retention):
    assert set(conf.DEFAULTS["RETENTION"]) == {"run_log", "transcript", "wakes", "desk"}
    retention(desk="12h")  # a project may set some keys; the others keep their defaults
    limits = conf.retention()
    assert limits["desk"] == timedelta(hours=12)
    assert limits["run_log"] == (None if conf.DEFAULTS["RETENTION"]["run_log"] is None else timedelta(
        milliseconds=_ms(conf.DEFAULTS["RETENTION"]["run_log"])))


def _ms(text: str) -> int:
    from falai_django.engine.durations import parse_duration

    return parse_duration(text)


@pytest.mark.parametrize(("limits", "words"), [
    ({"transcripts": "30d"}, "unknown keys: transcripts"),
    ({"run_log": "30 days"}, '"run_log"] = \'30 days\' is not a duration'),
    ({"wakes": 30}, '"wakes"] = 30 is not a duration'),
    ({"desk": "1w"}, '"desk"] = \'1w\' is not a duration'),
])
def test_a_bad_setting_is_a_clear_error_and_a_system_check(retention, limits, words):
    retention(**limits)
    with pytest.raises(ImproperlyConfigured, match=words.replace("[", r"\[").replace("]", r"\]")):
        conf.retention()
    problems = checks.check_retention_settings()
    assert [p.id for p in problems] == ["falai_django.E180"] and words in problems[0].msg
    with pytest.raises(CommandError, match="not a duration|unknown keys"):
        call_command("falai_purge")


# -- the command and its schedule ---------------------------------------------------------------


def test_falai_purge_prints_what_it_deleted(retention, capsys):
    retention(run_log="1d", transcript=None, wakes=None, desk=None)
    _conversation("c1")
    _age(TurnRecord, 3)
    call_command("falai_purge")
    out = capsys.readouterr().out
    assert "run_log older than 1d" in out and "transcript kept forever" in out
    assert "Deleted 2 run_log." in out
    assert not TurnRecord.objects.exists()
    with pytest.raises(CommandError, match="batch-size"):
        call_command("falai_purge", "--batch-size", "0")


def test_falai_purge_schedule_is_one_daily_django_q_schedule(capsys):
    from django_q.models import Schedule

    call_command("falai_purge", "--schedule")
    call_command("falai_purge", "--schedule")  # again: updated, not doubled
    schedule = Schedule.objects.get()
    assert (schedule.name, schedule.func, schedule.schedule_type, schedule.repeats) == (
        "falai_purge", "falai_django.tasks.purge", Schedule.DAILY, -1)
    assert "Updated the django-q2 schedule" in capsys.readouterr().out


def test_the_task_the_schedule_runs_purges(retention):
    retention(run_log="1d", transcript=None, wakes=None, desk=None)
    _conversation("c1")
    TurnRecord.objects.update(received_at=NOW - timedelta(days=3000), finished_at=NOW - timedelta(days=3000))
    assert tasks.purge() == {"run_log": 2}
    assert not TurnRecord.objects.exists()


def test_purged_rows_are_counted_by_kind(retention, settings):
    from .helpers import METRICS_TOKEN, moved, scrape

    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}
    retention(run_log="1d", transcript="1d", wakes=None, desk=None)
    _conversation("c1")
    _age(TurnRecord, 2)
    _age(History, 2)
    lines = History.objects.count()
    before = scrape()
    host.purge(now=NOW)
    after = scrape()
    assert moved(before, after, "falai_purged_rows_total", kind="run_log") == 2
    assert moved(before, after, "falai_purged_rows_total", kind="transcript") == lines > 0
    assert moved(before, after, "falai_purged_rows_total", kind="wakes") == 0
