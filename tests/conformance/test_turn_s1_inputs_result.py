"""engine-turn.md §1: inputs, result, `changed`, silenced forms."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from falai_django import Session, assistant_message, user_message

from .turn_kit import T0, T0_MS, World, codes, line

CATCH_ALL = {"id": "bv", "name": "Boas-vindas", "on": [{"message": []}],
             "steps": [{"id": "nome", "collect": ["nome"]}]}


def test_first_message_builds_a_fresh_session():
    w = World([CATCH_ALL], speak=[{"message": "Oi! Nome?", "nome": None}])
    r = w.turn(message="oi", id="m1")
    s = r.session
    assert isinstance(s, Session)
    assert s.id == "s1" and s.v == 4 and s.version == 0
    assert s.inputs == ["m1"]
    assert s.last_user_at == T0 and s.last_assistant_at == T0
    assert r.changed is True
    js = s.to_json()
    assert js["lastUserAt"] == T0 and js["lastAssistantAt"] == T0
    assert "history" not in js


def test_fresh_session_without_anything_said_is_minimal():
    # an event with no flow listening: fresh session, nothing else
    w = World([CATCH_ALL])
    r = w.turn(event="nada", key="e1")
    js = r.session.to_json()
    assert js == {"id": "s1", "v": 4, "version": 0, "data": {}, "runs": [], "claims": {}, "inputs": [],
                  "metadata": {}}
    # a first turn is changed even when nothing else happened
    assert r.changed is True


def test_turn_does_not_mutate_the_input_session_and_keeps_version():
    w = World([CATCH_ALL], speak=[{"message": "Oi! Nome?", "nome": None}, {"message": "E a empresa?", "nome": None}],
              understand=[{}])
    r1 = w.turn(message="oi", id="m1")
    s = Session.from_json({**r1.session.to_json(), "version": 7})
    before = copy.deepcopy(s.to_json())
    r2 = w.agent.turn(session_id="s1", message="hm", id="m2", session=s)
    assert s.to_json() == before
    assert r2.session.version == 7
    assert r2.session is not s


def test_wake_without_session_is_no_session():
    w = World([CATCH_ALL])
    r = w.turn(wake="x#1:w:123")
    assert r.changed is False
    assert len(r.outcomes) == 1
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.key) == ("wait", "skipped", "no-session", "x#1:w:123")
    assert o.run_id is None and o.flow_id is None and o.step_id is None
    assert o.message
    assert r.llm_calls == 0 and r.usage is None


def test_duplicate_input_is_ignored():
    w = World([CATCH_ALL], speak=[{"message": "Oi! Nome?", "nome": None}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="oi", id="m1")
    assert r.changed is False
    assert len(r.outcomes) == 1
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.key) == ("wait", "skipped", "duplicate-input", "m1")
    assert r.messages == [] and r.schedule == []
    assert r.llm_calls == 0


def test_inputs_keep_last_50():
    w = World([{"id": "x", "name": "X", "on": [{"message": ["never"]}], "steps": [{"id": "a", "say": "a"}]}],
              idle="silent")
    for i in range(55):
        w.turn(message="oi", id=f"m{i}")
    assert w.session.inputs == [f"m{i}" for i in range(5, 55)]
    # the oldest id is no longer seen: it is a new input
    r = w.turn(message="oi", id="m0")
    assert "duplicate-input" not in codes(r)


def test_message_at_defaults_to_now_and_is_trigger_key_without_id():
    w = World([CATCH_ALL], speak=[{"message": "Oi", "nome": None}])
    r = w.turn(message="oi")
    assert r.session.runs[0].id == f"bv#{T0}"
    assert r.session.inputs == []
    assert r.session.last_user_at == T0


def test_message_at_is_used_for_last_user_at():
    w = World([CATCH_ALL], speak=[{"message": "Oi", "nome": None}])
    r = w.turn(message="oi", at="2026-09-20T09:59:00.000Z")
    assert r.session.last_user_at == "2026-09-20T09:59:00.000Z"
    assert r.session.runs[0].id == "bv#2026-09-20T09:59:00.000Z"


def test_result_has_all_fields_and_usage_absent_without_calls():
    w = World([CATCH_ALL])
    r = w.turn(event="x", key="k")
    for name in ("session", "changed", "messages", "schedule", "outcomes", "started", "ended", "skipped",
                 "llm_calls", "usage"):
        assert hasattr(r, name)
    assert r.usage is None and r.llm_calls == 0


def test_usage_present_when_provider_reports():
    w = World([CATCH_ALL], speak=[{"message": "Oi", "nome": None}], usage=True)
    r = w.turn(message="oi", id="m1")
    assert r.usage is not None
    assert r.usage.completion_tokens == len("Oi")
    assert r.usage.prompt_tokens > 0
    assert r.usage.cached_input_tokens == 0


def test_usage_absent_when_provider_reports_none():
    w = World([CATCH_ALL], speak=[{"message": "Oi", "nome": None}])
    r = w.turn(message="oi", id="m1")
    assert r.llm_calls == 1
    assert r.usage is None


def test_history_falls_back_to_session_history():
    w = World([CATCH_ALL], speak=[{"message": "Oi", "nome": None}, {"message": "Oi2", "nome": None}])
    s = Session.from_json({"id": "s1", "v": 4, "version": 1, "data": {}, "runs": [], "claims": {}, "inputs": [],
                           "metadata": {}, "history": [{"role": "user", "content": "HISTORICO-X"}]})
    w.agent.turn(session_id="s1", message="oi", id="m1", session=s)
    assert w.provider.calls[-1].input.history[0]["content"] == "HISTORICO-X"
    hist = [user_message("PASSADO-Y"), assistant_message("resposta")]
    w.agent.turn(session_id="s1", message="oi", id="m2", session=s, history=hist)
    contents = [h["content"] for h in w.provider.calls[-1].input.history]
    assert "PASSADO-Y" in contents and "HISTORICO-X" not in contents


def test_exactly_one_input_kind():
    w = World([CATCH_ALL])
    with pytest.raises(TypeError):
        w.agent.turn(session_id="s1", message="oi", wake="k")
    with pytest.raises(TypeError):
        w.agent.turn(session_id="s1")


# --------------------------------------------------------------------------- changed (§1.6)

def test_changed_false_when_nothing_moved():
    # a message to an agent with idle silent and no flows eligible: session unchanged except inputs
    w = World([{"id": "x", "name": "X", "on": [{"message": ["compra"]}], "steps": [{"id": "a", "say": "a"}]}],
              idle="silent")
    w.turn(event="nada", key="e0")  # creates the session
    assert w.session is not None
    r = w.turn(event="nada", key="e1")
    assert r.changed is False
    assert r.outcomes == [] and r.messages == [] and r.schedule == [] and r.skipped == []


def test_changed_true_on_skipped_only():
    w = World([{"id": "camp", "name": "C", "steps": [{"id": "a", "do": "noop"}]}],
              actions={"noop": {"run": lambda p, c: {"ok": True}}})
    w.turn(start={"flow": "camp", "key": "k1"})
    r = w.turn(start={"flow": "camp", "key": "k1"})
    assert [s.code for s in r.skipped] == ["already-claimed"]
    assert r.changed is True


def test_timezone_aware_schedule_at():
    w = World([{"id": "lem", "name": "L", "steps": [{"id": "espera", "wait": "1d"}, {"id": "a", "say": "x"}]}])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    (e,) = r.schedule
    assert e.at.tzinfo is not None
    assert e.at == datetime(2026, 9, 21, 10, tzinfo=UTC)
    assert e.key == f"lem#k1:espera:{T0_MS + 86_400_000}"
    assert e.replaces is None


# --------------------------------------------------------------------------- silenced (§1.3)

TRIAGE = {"id": "tri", "name": "Triagem", "on": [{"message": []}],
          "steps": [{"id": "a", "do": "note"}, {"id": "q", "collect": ["nome"]}, {"id": "z", "do": "alert"}]}


def _silence_world(**kw):
    seen = []
    actions = {
        "note": {"run": lambda p, c: seen.append(("note", c.silenced)) or {"ok": True}},
        "alert": {"run": lambda p, c: seen.append(("alert", c.silenced)) or {"ok": True}},
    }
    return World([TRIAGE], actions=actions, **kw), seen


def test_silenced_string_ends_run_at_fresh_talk_step_and_do_runs():
    w, seen = _silence_world()
    r = w.turn(message="oi", id="m1", silenced="humano")
    assert r.llm_calls == 0 and w.provider.calls == []
    assert r.messages == []
    assert seen == [("note", "humano")]
    o = line(r, "silenced")
    assert (o.kind, o.status, o.detail) == ("collect", "skipped", "humano")
    assert o.key is None
    assert [e.reason for e in r.ended] == ["skipped"]
    assert r.session.runs == []
    # the catch-all's once claim was used (ruling 8)
    assert "tri:s1:" in r.session.claims


def test_silenced_dict_without_understand_is_like_string():
    w, seen = _silence_world()
    r = w.turn(message="oi", id="m1", silenced={"reason": "humano"})
    assert r.llm_calls == 0
    assert line(r, "silenced").detail == "humano"


def test_silenced_skip_form_skips_talk_and_follows_then():
    w, seen = _silence_world()
    r = w.turn(message="oi", id="m1", silenced={"reason": "janela", "skip": True})
    assert r.llm_calls == 0 and r.messages == []
    assert seen == [("note", "janela"), ("alert", "janela")]
    o = line(r, "silenced")
    assert (o.kind, o.status, o.detail, o.next) == ("collect", "skipped", "janela", "z")
    assert [e.reason for e in r.ended] == ["end"]


def test_silenced_skip_form_skips_say_and_follows_then():
    seen = []
    w = World([{"id": "f", "name": "F", "on": [{"event": "ev"}],
                "steps": [{"id": "s", "say": "oi"}, {"id": "z", "do": "alert"}]}],
              actions={"alert": {"run": lambda p, c: seen.append(1) or {"ok": True}}})
    r = w.turn(event="ev", key="e1", silenced={"reason": "janela", "skip": True})
    o = line(r, "silenced")
    assert (o.kind, o.status, o.detail, o.next) == ("say", "skipped", "janela", "z")
    assert seen == [1]
    assert r.messages == []
    assert r.session.last_assistant_at is None


def test_silenced_say_string_form_ends_run():
    w = World([{"id": "f", "name": "F", "on": [{"event": "ev"}],
                "steps": [{"id": "s", "say": "oi"}, {"id": "z", "say": "tchau"}]}])
    r = w.turn(event="ev", key="e1", silenced="humano")
    o = line(r, "silenced")
    assert (o.kind, o.status, o.detail) == ("say", "skipped", "humano")
    assert [e.reason for e in r.ended] == ["skipped"]
    assert r.messages == []


def test_silenced_understand_true_runs_understand_but_never_speaks():
    w = World([TRIAGE | {"steps": [{"id": "q", "collect": ["nome", "empresa"]}]}],
              speak=[{"message": "Oi, nome?", "nome": None, "empresa": None}],
              understand=[{"fields": {"empresa": "ACME"}}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="sou da ACME", id="m2", silenced={"reason": "humano", "understand": True})
    assert w.names() == ["speak", "understand"]
    assert r.llm_calls == 1
    assert r.session.data == {"empresa": "ACME"}
    assert r.messages == []
    # the asking run stays asking, no line
    assert r.session.runs[0].status == "asking"
    assert "silenced" not in codes(r)


def test_asking_run_stays_asking_under_silence_and_speaks_when_open():
    w = World([TRIAGE | {"steps": [{"id": "q", "collect": ["nome"]}]}],
              speak=[{"message": "Nome?", "nome": None}, {"message": "Seu nome?", "nome": None}],
              understand=[{}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="hm", id="m2", silenced="humano")
    assert r.outcomes == [] and r.messages == [] and r.llm_calls == 0
    assert r.session.runs[0].status == "asking"
    r = w.turn(message="oi de novo", id="m3")
    assert [m.text for m in r.messages] == ["Seu nome?"]


def test_silenced_predicate_condition():
    w = World([{"id": "f", "name": "F", "on": [{"event": "ev"}],
                "steps": [{"id": "c", "if": {"silenced": True}, "then": "n", "else": "s"},
                          {"id": "s", "say": "oi", "then": "end"},
                          {"id": "n", "do": "alert"}]}],
              actions={"alert": {"run": lambda p, c: {"ok": True}}})
    r = w.turn(event="ev", key="e1", silenced="humano")
    assert [(o.kind, o.next) for o in r.outcomes][:1] == [("if", "n")]
    assert "silenced" not in codes(r)
    r = w.turn(event="ev", key="e2")
    assert [m.text for m in r.messages] == ["oi"]


def test_changed_false_for_noop_event_on_rich_session_loaded_from_json():
    fl = {"id": "f", "name": "F", "on": [{"message": []}], "onEnd": "stay",
          "steps": [{"id": "d", "do": "ok"}, {"id": "q", "collect": ["nome", "empresa"]}]}
    w = World([fl, {"id": "l", "name": "L", "steps": [{"id": "w", "wait": "2d"}]}],
              actions={"ok": {"run": lambda p, c: {"ok": True}}},
              speak=[{"message": "Nome?", "nome": "Ana", "empresa": None}], understand=[{}],
              events={"nada": {}})
    w.turn(message="oi", id="m1", context={"a": 1})
    w.turn(start={"flow": "l", "key": "k", "input": {"x": [1, 2.5, None]}})
    loaded = Session.from_json(w.session.to_json())
    r = w.agent.turn(session_id="s1", event="nada", key="e9", session=loaded)
    assert r.outcomes == [] and r.skipped == []
    assert r.changed is False
    # a stale wake against the loaded session also reports unchanged
    r = w.agent.turn(session_id="s1", wake="l#k:w:1", session=loaded)
    assert r.changed is False
