"""engine-turn.md §7 (LLM budget), §8 (worked expectations), §4 (keys) and compaction."""

from __future__ import annotations

from falai_django import assistant_message, user_message

from .turn_kit import DAY, HOUR, MIN, T0_MS, World, codes, line

OK = {"ok": {"run": lambda p, c: {"ok": True}}}


# --------------------------------------------------------------------------- §8 worked expectations

def test_w1_first_message_catch_all():
    fl = {"id": "boas-vindas", "name": "BV", "on": [{"message": []}], "steps": [{"id": "nome", "collect": ["nome"]}]}
    w = World([fl], speak=[{"message": "Oi! Como você se chama?", "nome": None}])
    r = w.turn(message="oi", id="m1")
    assert w.names() == ["speak"] and r.llm_calls == 1
    assert [s.run_id for s in r.started] == ["boas-vindas#m1"]
    assert r.messages[0].key == "boas-vindas#m1:nome:1"
    assert r.session.last_assistant_at == "2026-09-20T10:00:00.000Z"
    assert r.changed is True
    # W2: replay
    r2 = w.turn(message="oi", id="m1")
    assert r2.changed is False
    assert [(o.code, o.key) for o in r2.outcomes] == [("duplicate-input", "m1")]


def test_w3_start_wait_then_prompt():
    fl = {"id": "lembrete", "name": "L", "steps": [{"id": "espera", "wait": "1d"}, {"id": "aviso", "prompt": "Avise"}]}
    w = World([fl], speak=[{"message": "Oi!"}])
    r = w.turn(start={"flow": "lembrete", "key": "k1"})
    assert r.llm_calls == 0
    assert [e.key for e in r.schedule] == [f"lembrete#k1:espera:{T0_MS + DAY}"]
    assert [(o.kind, o.status) for o in r.outcomes] == [("wait", "waiting")]
    w.clock.advance("1d")
    r = w.turn(wake=r.schedule[0].key)
    assert codes(r)[0] == "no-reply" and r.llm_calls == 1
    assert r.messages[0].key == "lembrete#k1:aviso:1"


# --------------------------------------------------------------------------- §7 budget

def test_budget_wake_event_start_only_do_wait_if_say_zero():
    fl = {"id": "f", "name": "F", "on": [{"event": "ev"}], "steps": [
        {"id": "d", "do": "ok"}, {"id": "c", "if": {"silenced": False}}, {"id": "s", "say": "x"},
        {"id": "w", "wait": "1h"}]}
    w = World([fl], actions=OK)
    r = w.turn(event="ev", key="e1")
    assert r.llm_calls == 0 and w.provider.calls == []


def test_budget_silenced_message_zero_calls_even_with_candidates():
    fl = [{"id": "a", "name": "A", "on": [{"message": ["a"]}], "steps": [{"id": "s", "prompt": "x"}]},
          {"id": "b", "name": "B", "on": [{"message": ["b"]}], "steps": [{"id": "s", "prompt": "x"}]}]
    w = World(fl)
    r = w.turn(message="a", id="m1", silenced="x")
    assert r.llm_calls == 0


def test_budget_silenced_understand_true_one_call_no_speak():
    fl = [{"id": "a", "name": "A", "on": [{"message": ["a"]}], "steps": [{"id": "s", "prompt": "x"}]},
          {"id": "b", "name": "B", "on": [{"message": ["b"]}], "steps": [{"id": "s", "prompt": "x"}]}]
    w = World(fl, understand=[{"flows": {"a": 90}}])
    r = w.turn(message="a", id="m1", silenced={"reason": "x", "understand": True})
    assert r.llm_calls == 1 and w.names() == ["understand"]
    assert line(r, "silenced").detail == "x"


# --------------------------------------------------------------------------- compaction

def _compacting_world(summary):
    fl = {"id": "bv", "name": "BV", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"}]}
    return World([fl], speak=[{"message": "ok"}], summary=summary,
                 compaction={"maxTokens": 50, "compactionThreshold": 0.5, "preserveRecentCount": 2})


def test_compaction_summary_counts_one_call():
    w = _compacting_world(["Resumo curto."])
    history = []
    for _ in range(10):
        history += [user_message("mensagem longa " * 10), assistant_message("resposta longa " * 10)]
    r = w.turn(message="oi", id="m1", history=history)
    assert r.llm_calls == 2
    names = w.names()
    assert names[-1] == "speak" and len(names) == 2
    assert w.provider.calls[0].input.parameters.schema_name in (None, "", "(unnamed)") or \
        w.provider.calls[0].schema_name == "(unnamed)"
    sent = w.provider.calls[1].input.history
    assert len(sent) <= 3
    assert any("Resumo curto." in (h.get("content") or "") for h in sent)


def test_compaction_short_history_no_call():
    w = _compacting_world([])
    r = w.turn(message="oi", id="m1", history=[user_message("oi"), assistant_message("olá")])
    assert r.llm_calls == 1


# --------------------------------------------------------------------------- §4 keys

def test_keys_all_formats():
    ev = {"id": "campanha", "name": "C", "on": [{"event": "ev", "after": "1h"}],
          "steps": [{"id": "w", "wait": "2h"}, {"id": "p", "prompt": "x"}]}
    w = World([ev], speak=[Exception("boom")])
    r = w.turn(event="ev", key="ev1")
    start_at = T0_MS + HOUR
    assert r.schedule[0].key == f"campanha#ev1:start:{start_at}"
    w.clock.advance("1h")
    r = w.turn(wake=r.schedule[0].key)
    wait_at = start_at + 2 * HOUR
    assert r.schedule[0].key == f"campanha#ev1:w:{wait_at}"
    assert r.outcomes[-1].key == "campanha#ev1:w:1"
    w.clock.advance("2h")
    r = w.turn(wake=r.schedule[0].key)
    assert r.schedule[0].key == f"campanha#ev1:p:1:retry:{wait_at + MIN}"
