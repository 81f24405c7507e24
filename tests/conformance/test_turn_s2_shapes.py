"""engine-turn.md §2 shapes (session/run/outcome JSON), test doubles, and assorted rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from falai_django import Session, assistant_message, user_message
from falai_django.engine.session import Run
from falai_django.testing import MemoryScheduler, fake_clock, mock_provider

from .turn_kit import HOUR, T0, T0_MS, World, codes, line

OK = {"ok": {"run": lambda p, c: {"ok": True}}}


def test_outcome_json_omits_unset_keys_and_uses_camel_case():
    fl = {"id": "f", "name": "F", "on": [{"event": "ev", "after": "1h"}], "steps": [{"id": "a", "say": "x"}]}
    w = World([fl])
    r = w.turn(event="ev", key="e1", payload={"p": 1})
    js = r.session.to_json()
    line_js = js["runs"][0]["outcomes"][0]
    assert line_js == {"runId": "f#e1", "flowId": "f", "kind": "wait", "status": "waiting",
                       "code": "awaiting-trigger", "message": line_js["message"],
                       "until": "2026-09-20T11:00:00.000Z", "at": T0}
    run = js["runs"][0]
    assert run["stepId"] is None
    assert run["dedupeKey"] == "f:s1:e1" and run["startedAt"] == T0 and run["status"] == "waiting"
    assert "suspendedAt" not in run and "staying" not in run
    assert set(run) >= {"id", "flowId", "anchor", "dedupeKey", "stepId", "status", "trigger", "hop", "startedAt",
                        "asked", "visits", "outcomes", "waiting", "input"}


def test_session_round_trip_from_json():
    w = World([{"id": "f", "name": "F", "steps": [{"id": "w", "wait": "1h"}]}])
    r = w.turn(start={"flow": "f", "key": "k"})
    js = r.session.to_json()
    again = Session.from_json(js)
    assert again.to_json() == js
    r2 = w.agent.turn(session_id="s1", wake=r.schedule[0].key, session=js)
    assert r2.changed is True and [e.reason for e in r2.ended] == ["end"]


def test_ended_items_are_runs_with_reason():
    w = World([{"id": "f", "name": "F", "steps": [{"id": "a", "do": "ok"}]}], actions=OK)
    r = w.turn(start={"flow": "f", "key": "k"})
    (e,) = r.ended
    assert isinstance(e, Run)
    assert e.reason == "end" and e.step_id == "a" and e.visits == {"a": 1}


def test_schedule_at_is_utc_aware():
    w = World([{"id": "f", "name": "F", "steps": [{"id": "w", "wait": "1h"}]}])
    r = w.turn(start={"flow": "f", "key": "k"})
    assert r.schedule[0].at.utcoffset() == timedelta(0)
    assert r.schedule[0].at == datetime(2026, 9, 20, 11, tzinfo=UTC)


def test_ignored_lines_have_no_run_or_step():
    w = World([])
    r = w.turn(wake="x")
    js = r.outcomes[0].model_dump(by_alias=True, exclude_none=True) if hasattr(r.outcomes[0], "model_dump") else {}
    assert "runId" not in js and "stepId" not in js


def test_history_helpers():
    assert user_message("oi") == {"role": "user", "content": "oi"}
    assert assistant_message("olá") == {"role": "assistant", "content": "olá"}


def test_fake_clock():
    c = fake_clock("2026-09-20T10:00:00Z")
    assert c() == datetime(2026, 9, 20, 10, tzinfo=UTC)
    assert c.now() == c()
    assert c.advance("24h") == datetime(2026, 9, 21, 10, tzinfo=UTC)
    assert c.advance(1000) == datetime(2026, 9, 21, 10, 0, 1, tzinfo=UTC)
    assert c.set("2027-01-01T00:00:00.000Z") == datetime(2027, 1, 1, tzinfo=UTC)
    with pytest.raises(Exception):  # noqa: B017 - the spec names only "a plain Error"
        fake_clock("nope")


def test_memory_scheduler():
    s = MemoryScheduler()
    t = datetime(2026, 9, 20, 10, tzinfo=UTC)
    s.add("s1", {"key": "a", "at": t + timedelta(hours=2)})
    s.add("s1", {"key": "b", "at": t + timedelta(hours=1)})
    s.add("s1", {"key": "c", "at": t + timedelta(hours=1), "replaces": "a"})
    due = s.due(t + timedelta(hours=3))
    assert [d.key if hasattr(d, "key") else d["key"] for d in due] == ["b", "c"]
    assert s.due(t + timedelta(days=9)) == []
    s.add("s1", {"key": "d", "at": t})
    s.remove("d")
    assert s.due(t + timedelta(days=9)) == []


def test_mock_provider_dry_and_calls():
    p = mock_provider(speak=[{"message": "a"}])
    w = World([], speak=[{"message": "a"}])
    r = w.turn(message="oi", id="m1")
    c = w.provider.calls[0]
    assert c.schema_name == "speak" and c.prompt and c.seen.endswith(c.prompt)
    assert p.remaining()["speak"] == 1
    r = w.turn(message="oi", id="m2")
    assert r.outcomes[-1].code == "provider-unavailable"  # dry speak list: a retryable deferral


# --------------------------------------------------------------------------- assorted rules

def test_lone_flow_with_fields_spends_understand_for_fields():
    fl = {"id": "v", "name": "V", "on": [{"message": ["comprar"]}], "steps": [{"id": "q", "collect": ["nome"]}]}
    w = World([fl], idle="silent", understand=[{"fields": {"nome": "Ana"}}], speak=[{"message": "Oi Ana"}])
    r = w.turn(message="sou Ana, quero comprar", id="m1")
    schema = w.provider.calls[0].input.parameters.json_schema
    assert "flows" not in schema["properties"] and "fields" in schema["properties"]
    assert r.started[0].flow_id == "v" and r.session.data == {"nome": "Ana"}


def test_mention_if_sees_extract_as_input():
    seen = []
    men = {"id": "c", "name": "C", "on": [{"mention": ["cancelar"], "extract": {"motivo": {"type": "string"}},
                                           "if": lambda ctx: seen.append(ctx.input) or True}],
           "steps": [{"id": "d", "do": "ok"}]}
    w = World([men], actions=OK, idle="silent",
              understand=[{"mentions": {"c": "sim"}, "extract": {"c": {"motivo": "caro", "x": ""}}}])
    r = w.turn(message="cancela", id="m1")
    assert seen and all(s == {"motivo": "caro"} for s in seen)  # at start, then as the premise
    assert r.ended[0].input == {"motivo": "caro"}


def test_mention_blocked_by_live_run_is_skip():
    men = {"id": "c", "name": "C", "on": [{"mention": ["cancelar"], "repeat": "always"}],
           "steps": [{"id": "w", "wait": "1d"}]}
    w = World([men], idle="silent", understand=[{"mentions": {"c": True}}, {"mentions": {"c": True}}])
    w.turn(message="cancela", id="m1")
    r = w.turn(message="cancela", id="m2")
    assert [(s.code, s.trigger_key) for s in r.skipped] == [("already-running", "m2")]


def test_retry_wake_with_unanswered_user_history_uses_wake_note():
    fl = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"}]}
    from falai_django import ProviderError
    w = World([fl], speak=[ProviderError("mock", "network", "x"), {"message": "Desculpe a demora"}])
    r = w.turn(message="oi", id="m1", history=[])
    key = r.schedule[0].key
    assert ":retry:" in key
    r = w.turn(wake=key, history=[user_message("oi")])
    assert "has no answer yet" in w.provider.calls[-1].prompt
    assert [(m.text, m.key) for m in r.messages] == [("Desculpe a demora", "tri#m1:q:1")]


def test_spoke_true_action_arms_silence():
    fl = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "send"}]}
    ret = {"id": "ret", "name": "R", "on": [{"silence": "1h"}], "steps": [{"id": "s", "say": "x"}]}
    w = World([fl, ret], actions={"send": {"run": lambda p, c: {"ok": True, "spoke": True}}})
    r = w.turn(start={"flow": "f", "key": "k"})
    assert r.session.last_assistant_at == T0
    assert [e.key for e in r.schedule] == [f"silence:ret:s1:{T0_MS}"]


def test_ctx_silenced_none_when_not_silenced():
    seen = []
    fl = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "x"}]}
    w = World([fl], actions={"x": {"run": lambda p, c: seen.append(c.silenced) or {"ok": True}}})
    w.turn(start={"flow": "f", "key": "k"})
    assert seen == [None]


def test_event_after_business_hours_snaps_after():
    def bh(at, ctx):
        return at + timedelta(minutes=30)
    fl = {"id": "f", "name": "F", "on": [{"event": "ev", "after": "1h", "businessHours": True}],
          "steps": [{"id": "a", "say": "x"}]}
    w = World([fl], business_hours=bh)
    r = w.turn(event="ev", key="e1")
    assert r.schedule[0].key == f"f#e1:start:{T0_MS + HOUR + 30 * 60_000}"


def test_deferred_do_not_snapped():
    def bh(at, ctx):
        return at + timedelta(hours=5)
    fl = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "x", "businessHours": True}]} \
        if False else {"id": "f", "name": "F", "steps": [{"id": "d", "do": "x"}]}
    w = World([fl], business_hours=bh, actions={"x": {"run": lambda p, c: {"defer": "1h", "detail": "d"}}})
    r = w.turn(start={"flow": "f", "key": "k"})
    assert r.schedule[0].key == f"f#k:d:{T0_MS + HOUR}"


def test_message_id_is_trigger_key_even_with_at():
    fl = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"}]}
    w = World([fl], speak=[{"message": "x"}])
    r = w.turn(message="oi", id="wamid.1", at="2026-09-20T09:00:00.000Z")
    assert r.started[0].run_id == "f#wamid.1"
    assert r.messages[0].key == "f#wamid.1:q:1"


def test_replay_mints_same_keys():
    fl = {"id": "f", "name": "F", "on": [{"message": []}],
          "steps": [{"id": "d", "do": "x"}, {"id": "q", "prompt": "x"}]}
    keys_seen = []
    w = World([fl], actions={"x": {"run": lambda p, c: keys_seen.append(c.key) or {"ok": True}}},
              speak=[{"message": "a"}, {"message": "a"}])
    r1 = w.turn(keep=False, message="oi", id="m1")
    r2 = w.turn(keep=False, message="oi", id="m1")
    assert [m.key for m in r1.messages] == [m.key for m in r2.messages]
    assert keys_seen == ["f#m1:d:1", "f#m1:d:1"]
    assert r1.session.to_json() == r2.session.to_json()
    assert codes(r1) == codes(r2)


def test_snake_case_step_and_flow_keys_behave_like_camel_case():
    from datetime import timedelta as td
    fl = {"id": "f", "name": "F", "on_end": "stay", "clear_on_start": ["empresa"],
          "steps": [{"id": "d", "do": "bad", "on_fail": "w"},
                    {"id": "x", "say": "nunca"},
                    {"id": "w", "wait": {"event": "pago", "up_to": "2h"}, "else": "q"},
                    {"id": "q", "collect": ["nome"], "max_asks": 1}]}
    w = World([fl], actions={"bad": {"run": lambda p, c: {"failed": "x"}}}, events={"pago": {}},
              speak=[{"message": "Nome?", "nome": None}], business_hours=lambda at, ctx: at + td(hours=1))
    w.turn(event="nada", key="n")
    w.session.data["empresa"] = "ACME"
    r = w.turn(start={"flow": "f", "key": "k"})
    assert "empresa" not in r.session.data
    assert r.outcomes[0].next == "w"
    assert r.schedule[0].key == f"f#k:w:{T0_MS + 2 * HOUR}"
    r = w.turn(wake=r.schedule[0].key)
    assert line(r, "no-event").next == "q"
    run = r.session.runs[0]
    assert run.asked == {"nome": 1}


def test_debug_option_does_not_change_turns():
    w = World([], speak=[{"message": "oi"}], debug=True)
    r = w.turn(message="oi", id="m1")
    assert [m.text for m in r.messages] == ["oi"]


def test_the_38_codes():
    from falai_django import OUTCOME_MESSAGES
    assert list(OUTCOME_MESSAGES) == [
        "no-session", "duplicate-input", "stale-wake", "silence-broken", "already-claimed", "cooldown", "hop-limit",
        "already-running", "flow-gone", "step-loop", "step-gone", "customer-replied", "premise-changed", "silenced",
        "already-known", "asked-fixed", "another-reply", "already-sent", "branch", "max-asks", "inline-delay",
        "awaiting-trigger", "awaiting-event", "event-arrived", "no-event", "replied", "no-reply", "action-skipped",
        "action-failed", "action-deferred", "unknown-field", "bad-value", "not-in-enum", "provider-unavailable",
        "provider-quota", "provider-auth", "provider-context", "provider-invalid"]
    for code, text in OUTCOME_MESSAGES.items():
        assert text.endswith(".") and text.count(". ") == 0, code  # one English sentence
