"""bench/replay.py's recorded conversations, at a tiny size: real host turns whose recordings hold
the model's replies, and which replay the same, so the bench never times empty turns."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


def _bench():
    spec = importlib.util.spec_from_file_location("falai_bench_replay", ROOT / "bench" / "replay.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bench(settings):
    from falai_django import conf

    module = _bench()
    agent, clock = module.build_agent()
    settings.FALAI = module.falai_settings(agent)
    conf.clear_cache()
    yield module, agent, clock
    conf.clear_cache()


def test_the_bench_replays_real_recordings_the_same(bench):
    from falai_django.replay import run_case

    module, agent, clock = bench
    sessions = module.record(agent, clock, 3, prefix="t")
    cases = module.cases_of(sessions)
    assert [len(case["turns"]) for case in cases] == [module.TURNS_EACH] * 3
    for case in cases:
        kinds = [turn["kind"] for turn in case["turns"]]
        assert kinds == ["message"] * (module.TURNS_EACH - 1) + ["wake"]
        for turn in case["turns"]:
            # every turn was recorded with the model's replies and said something to compare
            assert turn["replies"] and all("reply" in r for r in turn["replies"]), turn
            assert turn["before"]["messages"], turn
        schemas = {r["schema"] for turn in case["turns"] for r in turn["replies"]}
        assert schemas == {"understand", "speak"}
        assert case["turns"][-1]["before"]["data"]  # the triage collected fields on the way
    for case in cases:
        report = run_case(case, agent)
        assert report.same, [(t.index, t.diffs, t.needs_model) for t in report.turns if not t.same]
        assert report.model_calls == 0 and not any(t.needs_model for t in report.turns)
    wall, cpu, reports = module._pass(cases, agent)
    assert wall > 0 and cpu > 0 and all(r.same for r in reports)
    wall, reports = module._db_pass(sessions, agent)
    assert all(r.same for r in reports)
    assert len(module._per_turn_s(cases, agent)) == 3 * module.TURNS_EACH
