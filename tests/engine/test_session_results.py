"""TurnResult and its entries: snake_case attributes, camelCase JSON, aware UTC schedule times."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from falai_django import Session as PublicSession
from falai_django import assistant_message, migrate_session, user_message
from falai_django.engine.results import (
    EndedRun,
    OutboundMessage,
    ScheduleEntry,
    SkippedTrigger,
    StartedRun,
    TurnResult,
    Usage,
)
from falai_django.engine.session import Run, Session, StepOutcome, Trigger, dumps_json


def test_public_names_resolve():
    assert PublicSession is Session
    assert user_message("a")["role"] == "user" and assistant_message("b")["role"] == "assistant"
    assert callable(migrate_session)


def test_schedule_entry_at_is_aware_utc():
    entry = ScheduleEntry(key="triagem#wamid.HBgL:w1:1790244000000", at="2026-09-24T10:00:00.000Z")
    assert entry.at == datetime(2026, 9, 24, 10, tzinfo=UTC) and entry.at.tzinfo is UTC
    local = ScheduleEntry(key="k", at=datetime(2026, 9, 24, 7, tzinfo=timezone(timedelta(hours=-3))))
    assert local.at.tzinfo is UTC and local.at.hour == 10
    naive = ScheduleEntry(key="k", at=datetime(2026, 9, 24, 10))
    assert naive.at.tzinfo is UTC
    assert entry.to_json() == {"key": "triagem#wamid.HBgL:w1:1790244000000", "at": "2026-09-24T10:00:00.000Z"}
    silence = ScheduleEntry(key="silence:f:s:2", at=entry.at, replaces="silence:f:s:1")
    assert silence.to_json()["replaces"] == "silence:f:s:1"


def test_outbound_message_json():
    message = OutboundMessage(text="Oi!", kind="ai", key="idle:m1")
    assert message.after_ms == 0 and message.run_id is None
    assert message.to_json() == {"text": "Oi!", "kind": "ai", "afterMs": 0, "key": "idle:m1"}
    say = OutboundMessage(text="Catálogo", kind="verbatim", media={"slug": "catalogo"}, after_ms=3000,
                          key="f#m1:s1:1", run_id="f#m1", step_id="s1")
    assert say.to_json() == {"text": "Catálogo", "kind": "verbatim", "media": {"slug": "catalogo"},
                             "afterMs": 3000, "key": "f#m1:s1:1", "runId": "f#m1", "stepId": "s1"}


def test_turn_result_holds_everything_and_serialises():
    session = Session.fresh("s1")
    run = Run(id="f#m1", flow_id="f", anchor="s1", dedupe_key="f:s1:", step_id="s1", status="running",
              trigger=Trigger(kind="message", key="m1"), started_at="2026-09-20T10:00:00.000Z")
    result = TurnResult(
        session=session, changed=True,
        messages=[OutboundMessage(text="Oi", kind="ai", key="f#m1:s1:1", run_id="f#m1", step_id="s1")],
        schedule=[ScheduleEntry(key="k", at="2026-09-21T10:00:00.000Z")],
        outcomes=[StepOutcome(kind="say", status="ok", at="2026-09-20T10:00:00.000Z", run_id="f#m1")],
        started=[StartedRun(run_id="f#m1", flow_id="f", anchor="s1", dedupe_key="f:s1:")],
        ended=[EndedRun.of(run, "end")],
        skipped=[SkippedTrigger(flow_id="g", anchor="s1", trigger_key="m1", code="cooldown", message="m")],
        llm_calls=1, usage=Usage(prompt_tokens=10, completion_tokens=2),
    )
    assert result.session is session
    assert result.ended[0].reason == "end" and result.ended[0].flow_id == "f"
    out = result.to_json()
    assert out["llmCalls"] == 1
    assert out["usage"] == {"promptTokens": 10, "completionTokens": 2, "cachedInputTokens": 0}
    assert out["started"] == [{"runId": "f#m1", "flowId": "f", "anchor": "s1", "dedupeKey": "f:s1:"}]
    assert out["ended"][0]["reason"] == "end" and out["ended"][0]["stepId"] == "s1"
    assert out["skipped"] == [{"flowId": "g", "anchor": "s1", "triggerKey": "m1", "code": "cooldown", "message": "m"}]
    assert out["schedule"] == [{"key": "k", "at": "2026-09-21T10:00:00.000Z"}]
    assert out["session"] == session.to_json()
    assert json.loads(dumps_json(out)) == out


def test_a_result_without_calls_has_no_usage():
    result = TurnResult(session=Session.fresh("s1"), changed=False)
    assert result.usage is None and "usage" not in result.to_json()
    assert result.messages == [] and result.llm_calls == 0


def test_dumps_json_writes_datetimes_as_iso():
    assert dumps_json({"at": datetime(2026, 9, 24, 10, tzinfo=UTC), "t": "ç"}) == (
        '{"at":"2026-09-24T10:00:00.000Z","t":"ç"}')
