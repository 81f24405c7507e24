"""Speak provider failures inside a turn (engine-persistence-llm.md §6.5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from falai_django import ProviderError, falai
from falai_django.testing import fake_clock, mock_provider

T0 = "2026-09-21T10:00:00.000Z"
T0_DT = datetime(2026, 9, 21, 10, tzinfo=UTC)
FIELDS = {"nome": {"type": "string", "ask": "Pergunte o nome."}}
FLOW = {"id": "t", "on": [{"message": []}], "steps": [{"id": "oi", "prompt": "Cumprimente."}]}


def _agent(speak, clock, **options):
    f = falai().fields(FIELDS)
    provider = mock_provider(speak=speak)
    return f.agent(name="Ana", provider=provider, clock=clock, flows=[f.flow(FLOW)], **options), provider


def _ms(dt):
    return int(dt.timestamp() * 1000)


CODES = {
    "aborted": "provider-unavailable", "timeout": "provider-unavailable", "network": "provider-unavailable",
    "overload": "provider-unavailable", "rate": "provider-unavailable", "unknown": "provider-unavailable",
    "quota": "provider-quota", "entitlement": "provider-auth", "auth": "provider-auth",
    "model": "provider-invalid", "invalid": "provider-invalid", "content": "provider-invalid",
    "context": "provider-context",
}
RETRYABLE = {"aborted", "timeout", "network", "overload", "rate", "unknown"}


@pytest.mark.parametrize("kind", sorted(CODES))
def test_each_kind_defers_or_fails_with_its_code(kind):
    clock = fake_clock(T0)
    agent, _ = _agent([ProviderError("gemini", kind, f"gemini {kind}")], clock)
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    assert r.changed is True and r.messages == []
    line = [o for o in r.outcomes if o.step_id == "oi"][-1]
    assert line.code == CODES[kind]
    assert line.kind == "prompt"
    assert r.llm_calls == 1
    # aborted is listed with the unavailable codes; its retryability follows §6.5's list
    if kind in RETRYABLE - {"aborted"}:
        assert line.status == "deferred"
        key = f"t#m1:oi:1:retry:{_ms(T0_DT + timedelta(minutes=1))}"
        assert line.key == "t#m1:oi:1"
        assert [e.key for e in r.schedule] == [key]
        assert r.schedule[0].at == T0_DT + timedelta(minutes=1)
        assert r.session.runs[0].status == "waiting"
    elif kind != "aborted":
        assert line.status == "failed"
        assert r.schedule == []
        assert [e.reason for e in r.ended] == ["failed"]


def test_quota_with_a_later_reset_is_retried_at_the_reset():
    clock = fake_clock(T0)
    reset = T0_DT + timedelta(hours=2)
    agent, _ = _agent([ProviderError("gemini", "quota", "q", reset_at_ms=_ms(reset))], clock)
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    line = [o for o in r.outcomes if o.step_id == "oi"][-1]
    assert (line.status, line.code) == ("deferred", "provider-quota")
    assert r.schedule[0].at == reset
    assert r.schedule[0].key == f"t#m1:oi:1:retry:{_ms(reset)}"


def test_should_retry_false_ends_an_overload_at_once_and_true_retries_invalid():
    clock = fake_clock(T0)
    agent, _ = _agent([ProviderError("gemini", "overload", "o", should_retry=False)], clock)
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    assert [o.status for o in r.outcomes if o.step_id == "oi"][-1] == "failed"
    agent2, _ = _agent([ProviderError("gemini", "invalid", "i", should_retry=True)], fake_clock(T0))
    r2 = agent2.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    assert [o.status for o in r2.outcomes if o.step_id == "oi"][-1] == "deferred"


def test_the_retry_ladder_is_1m_5m_15m_1h_6h_then_failed():
    clock = fake_clock(T0)
    failures = [ProviderError("gemini", "overload", "o") for _ in range(6)]
    agent, provider = _agent(failures, clock)
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    session = r.session
    gaps = []
    for _ in range(5):
        entry = r.schedule[0]
        gaps.append(entry.at - clock.now())
        clock.set(entry.at.isoformat())
        r = agent.turn(session_id="s1", wake=entry.key, session=session, history=[])
        session = r.session
    assert gaps == [timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=15), timedelta(hours=1),
                    timedelta(hours=6)]
    last = [o for o in r.outcomes if o.step_id == "oi"][-1]
    assert (last.status, last.code) == ("failed", "provider-unavailable")
    assert r.schedule == [] and [e.reason for e in r.ended] == ["failed"]
    assert [c.schema_name for c in provider.calls] == ["speak"] * 6


def test_a_retry_wake_speaks_the_same_visit():
    clock = fake_clock(T0)
    agent, _ = _agent([ProviderError("gemini", "rate", "r"), {"message": "Oi!"}], clock)
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    clock.advance("1m")
    r2 = agent.turn(session_id="s1", wake=r.schedule[0].key, session=r.session, history=[])
    assert [(m.text, m.key) for m in r2.messages] == [("Oi!", "t#m1:oi:1")]


def test_an_empty_final_message_defers_provider_unavailable():
    clock = fake_clock(T0)
    agent, _ = _agent([{"message": "   "}], clock)
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    line = [o for o in r.outcomes if o.step_id == "oi"][-1]
    assert (line.status, line.code) == ("deferred", "provider-unavailable")
    assert r.messages == []


def test_an_idle_speaker_failure_defers_without_a_wake():
    clock = fake_clock(T0)
    f = falai().fields(FIELDS)
    agent = f.agent(name="Ana", provider=mock_provider(speak=[ProviderError("gemini", "overload", "o")]),
                    clock=clock, flows=[])
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    idle = [o for o in r.outcomes if o.kind == "idle"]
    assert [(o.status, o.code) for o in idle] == [("deferred", "provider-unavailable")]
    assert idle[0].llm_calls == 1
    assert r.schedule == [] and r.changed is True


def test_a_non_provider_error_from_the_sdk_is_classified():
    clock = fake_clock(T0)

    class SdkError(Exception):
        status_code = 401

    agent, _ = _agent([SdkError("denied")], clock)
    r = agent.turn(session_id="s1", message="oi", id="m1", session=None, history=[])
    line = [o for o in r.outcomes if o.step_id == "oi"][-1]
    assert (line.status, line.code) == ("failed", "provider-auth")
