"""Replay bench: recorded turns replayed with the cassette, turns per second (issue 50).

    .venv/bin/python bench/replay.py            # or: bench/run_all.py replay, make bench
    .venv/bin/python bench/replay.py --quick    # 200 turns instead of 1,000

Honest recordings: the host itself runs the turns and writes them, on a SQLite database of the
bench's own (a temporary file, migrated; `bench.hostbench.settings` with DATABASE_URL empty, in a
child process as the other Django benches do) with `RECORD_MODEL_REPLIES` on. The agent is
bench/turn.py's (the Triagem demo-like triage, `onEnd: "stay"`, with its silence follow-up,
built with `falai_django.falai` on a `fake_clock`) and its zero-latency scripted provider, so
every message turn makes one or two model calls whose replies the recording keeps. Each
conversation is 19 messages (`host.handle_message`, two minutes apart) and then, a day later, its
silence wake (`host.handle_wake`: the follow-up flow speaks), 20 turns in all; enough
conversations for N turns (N = 1,000; 200 with `--quick` / FALAI_BENCH_QUICK=1). Each
conversation's case is then read back with `replay.case_of()`, as `falai_replay` does.

Timed: `replay.run_case(case, agent)` (the cassette, `live=False`, no database) over every case,
after a warm-up pass, REPEAT times; `turns_per_second` is the turns replayed over the median
pass's wall seconds (run_case only). Beside it: `cpu_turns_per_second` (the same passes by this
thread's CPU time, which a busy shared machine does not inflate), `per_turn_ms_p50` / `_p99` (one
more pass, each turn timed from its recording being loaded to the next one's),
`replay_with_db_turns_per_second` (`replay.replay(session_id, agent=agent)`, which also reads the
case from the database; its passes interleaved with run_case's) and `same_share`, the share of
conversations whose replay is `.same` (1.0: the agent is unchanged). The replay runs in a process
with Django set up, as `manage.py falai_replay` does (the cassette's answers are not reported to
the app's metrics observers: they are not model calls).

Target (issue 50): turns_per_second ≥ 2,000 on this machine (the engine alone, bench/turn.py,
runs about 6,000 turns/s). Writes bench/results/replay.json; `main()` returns the same dict.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "replay.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGETS = {"turns_per_second": 2000}
TURNS_EACH = 20  # per conversation: 19 messages, then the silence wake
REPEAT = 9


def total_turns() -> int:
    return 200 if os.environ.get("FALAI_BENCH_QUICK") == "1" else 1000


def build_agent() -> tuple[Any, Any]:
    """bench/turn.py's agent and clock: the Triagem triage with its zero-latency scripted provider."""
    from bench.turn import build

    return build()


def falai_settings(agent: Any) -> dict[str, Any]:
    """The FALAI settings the recording runs with: this agent, no stored flows, recordings on."""
    return {"AGENT": agent, "SENDER": _null_sender, "FLOWS_DB": False, "RECORD_MODEL_REPLIES": True}


def _null_sender(message: Any) -> None:
    return None


# ---------------------------------------------------------------------------------------------
# The recorded conversations (Django set up, FALAI = falai_settings(agent))
# ---------------------------------------------------------------------------------------------


def record(agent: Any, clock: Any, conversations: int, prefix: str = "replay") -> list[str]:
    """Run `conversations` conversations of TURNS_EACH host turns each; their session ids."""
    from falai_django import host
    from falai_django.models import Wake

    sessions = []
    for c in range(conversations):
        sid = f"{prefix}-{c}"
        for i in range(TURNS_EACH - 1):
            result = host.handle_message(sid, f"mensagem {i} do cliente", id=f"{sid}.{i}")
            assert result.status == "done", result
            clock.advance("2m")
        clock.advance("25h")
        keys = list(Wake.objects.filter(conversation_id=sid, key__startswith="silence:").values_list("key", flat=True))
        assert len(keys) == 1, keys
        result = host.handle_wake(sid, keys[0])
        assert result.status == "done", result
        clock.advance("1h")
        sessions.append(sid)
    return sessions


def cases_of(sessions: list[str]) -> list[dict[str, Any]]:
    from falai_django.replay import case_of

    return [case_of(sid) for sid in sessions]


# ---------------------------------------------------------------------------------------------
# Timing the replay
# ---------------------------------------------------------------------------------------------


def _pass(cases: list[dict[str, Any]], agent: Any) -> tuple[float, float, list[Any]]:
    """One replay of every case: (wall seconds, this thread's CPU seconds, the reports)."""
    from falai_django.replay import run_case

    wall, cpu = time.perf_counter(), time.thread_time()
    reports = [run_case(case, agent) for case in cases]
    return time.perf_counter() - wall, time.thread_time() - cpu, reports


def _db_pass(sessions: list[str], agent: Any) -> tuple[float, list[Any]]:
    """One `replay()` of every conversation (the case read from the database, then replayed)."""
    from falai_django.replay import replay

    wall = time.perf_counter()
    reports = [replay(sid, agent=agent) for sid in sessions]
    return time.perf_counter() - wall, reports


def _per_turn_s(cases: list[dict[str, Any]], agent: Any) -> list[float]:
    """Each replayed turn's wall time: from its recording being loaded (`ReplayDeck.load`) to the
    next turn's, or to run_case returning for a case's last turn."""
    from falai_django.replay import cassette, run_case

    marks: list[float] = []
    original = cassette.ReplayDeck.load

    def load(self: Any, turn: Any) -> None:
        marks.append(time.perf_counter())
        original(self, turn)

    cassette.ReplayDeck.load = load
    out: list[float] = []
    try:
        for case in cases:
            marks.clear()
            run_case(case, agent)
            marks.append(time.perf_counter())
            out.extend(b - a for a, b in zip(marks, marks[1:], strict=False))
    finally:
        cassette.ReplayDeck.load = original
    return out


def measure() -> dict[str, Any]:
    from bench.hostbench import percentile, progress, setup_django

    folder = tempfile.TemporaryDirectory(prefix="falai-bench-replay-")
    os.environ["SQLITE_PATH"] = str(Path(folder.name) / "replay.sqlite3")
    os.environ["DATABASE_URL"] = ""  # project.settings: SQLite at SQLITE_PATH
    try:
        setup_django(truncate=False)  # a fresh file: migrated, nothing to empty
        from django.conf import settings

        from falai_django import conf
        from falai_django.observe.metrics import flusher

        agent, clock = build_agent()
        settings.FALAI = falai_settings(agent)
        conf.clear_cache()
        flusher.enabled = False  # no thread writing counts to the file (removed at the end)

        turns = total_turns()
        conversations = max(1, turns // TURNS_EACH)
        started = time.perf_counter()
        sessions = record(agent, clock, conversations)
        recorded_s = time.perf_counter() - started
        cases = cases_of(sessions)
        count = sum(len(case["turns"]) for case in cases)
        replies = sum(len(t.get("replies") or []) for case in cases for t in case["turns"])
        progress(f"replay: recorded {count} host turns ({conversations} conversations) in {recorded_s:.1f}s")

        _pass(cases, agent)  # warm-up
        _db_pass(sessions, agent)
        passes, cpu, with_db = [], [], []
        gc.collect()
        for _ in range(REPEAT):  # interleaved: a busy moment of the machine hits both alike
            seconds, spent, reports = _pass(cases, agent)
            passes.append(seconds)
            cpu.append(spent)
            seconds, db_reports = _db_pass(sessions, agent)
            with_db.append(seconds)
        per_turn = _per_turn_s(cases, agent)

        result: dict[str, Any] = {
            "turns_per_second": round(count / statistics.median(passes), 1),
            "cpu_turns_per_second": round(count / statistics.median(cpu), 1),
            "turns": count,
            "conversations": len(cases),
            "model_replies_recorded": replies,
            "per_turn_ms_p50": round(percentile(per_turn, 50) * 1000, 4),
            "per_turn_ms_p99": round(percentile(per_turn, 99) * 1000, 4),
            "pass_seconds": [round(s, 4) for s in passes],
            "replay_with_db_turns_per_second": round(count / statistics.median(with_db), 1),
            "same_share": round(sum(1 for r in reports if r.same) / len(reports), 4),
            "same_share_with_db": round(sum(1 for r in db_reports if r.same) / len(db_reports), 4),
            "needs_model_turns": sum(1 for r in reports for t in r.turns if t.needs_model),
            "recording_host_turns_per_second": round(count / recorded_s, 1),
            "repeat": REPEAT,
            "quick": os.environ.get("FALAI_BENCH_QUICK") == "1",
            "database": "sqlite",
            "measure": "wall seconds of run_case over every case (cassette, no database), median of the passes; "
                       "cpu_turns_per_second: this thread's CPU time instead",
            "targets": TARGETS,
        }
        result["meets_targets"] = all(result[k] >= v for k, v in TARGETS.items())
        return result
    finally:
        from django.db import connections

        connections.close_all()
        folder.cleanup()


def main() -> dict[str, Any]:
    from bench.hostbench import environment, run_child, write_result

    env = {**environment(), "DATABASE_URL": ""}
    result = run_child(Path(__file__).resolve(), env=env)
    write_result(RESULTS, result)
    print_table(result)
    return result


def print_table(r: dict[str, Any]) -> None:
    print(f"replayed turns/s (cassette, run_case)   {r['turns_per_second']:>10.0f}   target ≥ {TARGETS['turns_per_second']}")
    print(f"replayed turns/s by CPU time            {r['cpu_turns_per_second']:>10.0f}")
    print(f"per turn p50 / p99 ms                   {r['per_turn_ms_p50']:>10.3f} / {r['per_turn_ms_p99']:.3f}")
    print(f"replayed turns/s with the DB (replay()) {r['replay_with_db_turns_per_second']:>10.0f}")
    print(f"turns / conversations / model replies   {r['turns']:>10} / {r['conversations']} / "
          f"{r['model_replies_recorded']}")
    print(f"same share (run_case / replay())        {r['same_share']:>10.2f} / {r['same_share_with_db']:.2f}")
    print("targets met" if r["meets_targets"] else f"targets NOT met: {TARGETS}")


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main)
