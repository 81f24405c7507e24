"""Where customers drop out: the funnel numbers checked against a scripted set of conversations
(the offline provider and a fake clock, so every count and duration is known in advance)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from falai_django import host
from falai_django.engine.jstime import to_iso
from falai_django.flows import funnel
from falai_django.models import Flow
from falai_django.testing import fake_clock

from . import agents

pytestmark = pytest.mark.django_db

SPEC = {
    "id": "triagem", "name": "Triagem", "on": [{"message": []}],
    "steps": [
        {"id": "quem", "kind": "collect", "collect": ["nome"], "maxAsks": 2},
        {"id": "qual", "kind": "collect", "collect": ["empresa"]},
        {"id": "tchau", "kind": "say", "say": "Bye {{data.nome}}"},
    ],
}


@pytest.fixture
def clock():
    start = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    clock = fake_clock(to_iso(start))
    agents.reset(clock)
    Flow(id="triagem", spec=SPEC, enabled=True).save()
    return clock


def script(clock, sid: str, *steps) -> None:
    """Messages and pauses: a str is a message, a number a pause in seconds."""
    for n, step in enumerate(steps):
        if isinstance(step, str):
            host.handle(sid, {"message": step, "id": f"{sid}-{n}"})
        else:
            clock.advance(f"{step}s")


def scripted(clock) -> dict:
    # A: completes. 60 s on "quem", 120 s on "qual".
    script(clock, "A", "hi", 60, "Ana", 120, "Acme")
    # B: gives the name after 30 s, then stops on "qual" (recently: in progress).
    script(clock, "B", "hi", 30, "Bia")
    # C: never gives a name ("?" is not one): "quem" is asked twice, then max-asks moves on; 10 s on "quem".
    script(clock, "C", "hi", 5, "?", 5, "??")
    # D: a human takes the conversation over while it sits on "quem".
    script(clock, "D", "hi")
    host.silence("D", "human: maria")
    return funnel.flow_funnel("triagem", timezone.localdate() - timedelta(days=1), timezone.localdate(), spec=SPEC,
                              now=clock.now())


def test_the_funnel_of_a_scripted_set_of_conversations(clock):
    report = scripted(clock)
    assert report["started"] == 4
    steps = {s["id"]: s for s in report["steps"]}
    assert [s["id"] for s in report["steps"]] == ["quem", "qual", "tchau"]
    assert {k: v["reached"] for k, v in steps.items()} == {"quem": 4, "qual": 3, "tchau": 1}
    assert {k: v["max_asks"] for k, v in steps.items()} == {"quem": 1, "qual": 0, "tchau": 0}
    assert report["max_asks"] == 1
    # Median time on "quem": A 60 s, B 30 s, C 10 s -> 30 s; on "qual": A 120 s.
    assert steps["quem"]["median_seconds"] == 30.0
    assert steps["qual"]["median_seconds"] == 120.0
    assert steps["tchau"]["median_seconds"] is None
    fields = {f["field"]: (f["runs"], f["asks"]) for f in report["fields"]}
    assert fields["nome"] == (4, 5)  # A, B, D once; C twice
    assert fields["empresa"] == (3, 3)  # A, B and C once each
    assert report["ended"] == {"completed": 1, "silenced": 1, "failed": 0, "abandoned": 0, "in_progress": 2}


def test_a_run_left_quiet_for_a_day_counts_as_abandoned(clock):
    script(clock, "B", "hi", 30, "Bia")
    report = funnel.flow_funnel("triagem", timezone.localdate() - timedelta(days=1), timezone.localdate(),
                                spec=SPEC, now=clock.now() + timedelta(hours=25))
    assert report["ended"]["abandoned"] == 1 and report["ended"]["in_progress"] == 0


def test_the_date_range_counts_runs_by_the_day_they_started(clock):
    scripted(clock)
    yesterday = timezone.localdate() - timedelta(days=1)
    report = funnel.flow_funnel("triagem", yesterday - timedelta(days=5), yesterday, spec=SPEC)
    assert report["started"] == 0 and all(s["reached"] == 0 for s in report["steps"])
    assert funnel.flow_funnel("other", timezone.localdate(), timezone.localdate())["started"] == 0


def test_the_chart_draws_a_bar_per_step_and_the_endings(clock):
    report = scripted(clock)
    svg = funnel.funnel_svg(report)
    assert svg.startswith("<svg") and 'data-step="started" data-value="4"' in svg
    assert 'data-step="qual" data-value="3"' in svg and 'data-ending="completed" data-value="1"' in svg
    rows = funnel.report_rows(report)
    assert [(r["id"], r["share"], r["median"]) for r in rows] == [
        ("quem", "100%", "30 s"), ("qual", "75%", "2.0 min"), ("tchau", "25%", "—")]
