"""The admin's "Replay recent conversations against this version": a `ReplayRun` asked for in a
request and carried out by a django-q2 worker, never in the request.

- `start(flow, version, ...)` stores the run (queued) and queues `falai_django.tasks.replay_run`.
- `execute(run_id)` (the task) builds the agent with that version in its flow's place
  (`stored.agent_with_version`), picks the latest conversations (`stored.sessions_for`) and
  replays each with the recorded model replies, storing one `ReplayResult` per conversation and
  the run's progress as it goes. It writes nothing else and sends nothing.

Nothing fails silently: a run that cannot start (a version that no longer fits the agent, a
broker that is away) or a conversation that cannot be replayed is a visible state on the run's
page, a log line and a count in `falai_replay_runs_total{result}`; a run whose worker stopped
shows how long it has made no progress (`stalled`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from falai_django.engine.errors import FlowConfigurationError
from falai_django.models import Flow, ReplayResult, ReplayRun
from falai_django.observe import metrics

from .cases import run_case
from .stored import ReplayError, agent_with_version, case_of, sessions_for

__all__ = ["MAX_LIMIT", "STALLED_AFTER", "execute", "start", "stalled"]

logger = logging.getLogger("falai_django.replay")

MAX_LIMIT = 500  # conversations one run replays at most
STALLED_AFTER = timedelta(minutes=5)  # no progress for this long: the page says the worker may be gone


def start(flow: Flow, version: int, *, user: Any = None, scope: str = ReplayRun.Scope.FLOW,
          limit: int = 50) -> ReplayRun:
    """Store a queued run of `flow` at `version` and hand it to a worker. A broker that cannot
    take it leaves the run `failed` with the reason (logged and counted)."""
    from falai_django.host.jobs import enqueue

    if not flow.versions.filter(version=version).exists():
        raise ReplayError(f"flow {flow.pk!r} has no version {version}")
    if scope not in ReplayRun.Scope.values:
        raise ValueError(f"scope must be one of {', '.join(ReplayRun.Scope.values)}, got {scope!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    run = ReplayRun.objects.create(flow=flow, version=version, scope=scope, limit=limit,
                                   requested_by=user if getattr(user, "pk", None) else None)
    try:
        enqueue("falai_django.tasks.replay_run", run.pk)
    except Exception as exc:  # noqa: BLE001 - shown on the run's page, logged, counted
        _fail(run.pk, f"could not queue the replay for a worker: {type(exc).__name__}: {exc}")
    run.refresh_from_db()
    return run


def execute(run_id: int) -> str:
    """Carry out a queued run (the django-q2 task). Returns the run's final state. A run that is
    already finished is left alone (a task delivered twice); one left `running` by a worker that
    stopped starts over. A worker whose run was started over by another (django-q2 handed the task
    out again while it still ran) stops at its next conversation and writes nothing more: each
    result is written with the run row locked and its `started_at` still this worker's."""
    now = timezone.now()
    with transaction.atomic():
        run = ReplayRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.finished:
            return run.state if run is not None else "missing"
        run.results.all().delete()
        ReplayRun.objects.filter(pk=run_id).update(
            state=ReplayRun.State.RUNNING, started_at=now, progress_at=now, total=0, done=0, same=0, different=0,
            needs_model=0, errors=0, error="")
    mine = ReplayRun.objects.filter(pk=run_id, started_at=now)
    try:
        agent = agent_with_version(run.flow_id, run.version)
        session_ids = sessions_for(flow=run.flow_id if run.scope == ReplayRun.Scope.FLOW else None, limit=run.limit)
    except (ReplayError, FlowConfigurationError) as exc:
        return _fail(run_id, str(exc), mine)
    except Exception as exc:  # noqa: BLE001 - the page says why, the log has the traceback
        logger.exception("falai: replay %s of flow %s v%s could not start", run_id, run.flow_id, run.version)
        return _fail(run_id, f"{type(exc).__name__}: {exc}", mine)
    mine.update(total=len(session_ids), progress_at=timezone.now())
    for position, session_id in enumerate(session_ids):
        status, fields = _replay_one(run, session_id, agent)
        counter = status if status in ("same", "different", "needs_model") else "errors"
        with transaction.atomic():
            if not mine.select_for_update().exists():
                logger.info("falai: replay %s was started over by another worker; this one stops", run_id)
                return "superseded"
            ReplayResult.objects.create(run=run, position=position, conversation_id=session_id, status=status,
                                        **fields)
            mine.update(done=F("done") + 1, progress_at=timezone.now(), **{counter: F(counter) + 1})
    if not mine.update(state=ReplayRun.State.DONE, finished_at=timezone.now()):
        return "superseded"
    metrics.inc("falai_replay_runs_total", result="done")
    return ReplayRun.State.DONE


def _replay_one(run: ReplayRun, session_id: str, agent: Any) -> tuple[str, dict[str, Any]]:
    """One conversation replayed: its status and the rest of its `ReplayResult`."""
    try:
        case = case_of(session_id)
        report = run_case(case, agent).to_json()
    except Exception as exc:  # noqa: BLE001 - one conversation that cannot be replayed does not stop the run
        logger.warning("falai: replay %s could not replay conversation %s against flow %s v%s (%s: %s)",
                       run.pk, session_id, run.flow_id, run.version, type(exc).__name__, exc,
                       exc_info=not isinstance(exc, ReplayError))
        return ReplayResult.Status.ERROR, {"error": f"{type(exc).__name__}: {exc}"}
    for turn, replayed in zip(case["turns"], report["turns"], strict=True):
        replayed["input"] = input_label(turn)
    return report["status"], {"turns": len(report["turns"]), "first_difference": report["first_difference"],
                              "report": report}


def input_label(turn: dict[str, Any]) -> str:
    """What a case's turn answered, in a few words: the customer's text, `wake <key>`, `event
    <name>`, `start <flow>`."""
    given = turn.get("turn") or {}
    if isinstance(given.get("message"), str):
        return given["message"]
    if given.get("wake"):
        return f"wake {given['wake']}"
    if given.get("event"):
        return f"event {given['event']}"
    start_ = given.get("start")
    if isinstance(start_, dict):
        return f"start {start_.get('flow') or ''}".strip()
    return str(turn.get("kind") or "")


def _fail(run_id: int, reason: str, mine: Any = None) -> str:
    run: Mapping[str, Any] = ReplayRun.objects.filter(pk=run_id).values("flow_id", "version").first() or {}
    logger.error("falai: replay %s of flow %s v%s failed: %s", run_id, run.get("flow_id"), run.get("version"), reason)
    rows = mine if mine is not None else ReplayRun.objects.filter(pk=run_id)
    if not rows.update(state=ReplayRun.State.FAILED, error=reason, finished_at=timezone.now()):
        return "superseded"
    metrics.inc("falai_replay_runs_total", result="failed")
    return ReplayRun.State.FAILED


def stalled(run: ReplayRun, now: Any = None) -> timedelta | None:
    """How long an unfinished run has made no progress, when that is longer than
    `STALLED_AFTER` (its worker may be gone, or no worker runs); None otherwise."""
    if run.finished:
        return None
    since = run.progress_at or run.requested_at
    idle = (now or timezone.now()) - since
    return idle if idle > STALLED_AFTER else None
