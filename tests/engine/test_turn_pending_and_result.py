"""`pending_wakes` (§6), `changed` (§1.6), the outcome table (§2.5) and the result shape."""

from __future__ import annotations

import pytest
from scenarios.kit import T0, T0_MS, make_agent, run_of, triage_flow

from falai_django.engine.jstime import to_iso
from falai_django.engine.outcomes import END_REASONS, OUTCOME_MESSAGES
from falai_django.engine.session import OUTCOME_CODES

RETOMAR = {"id": "retomar", "name": "Retomar", "on": [{"silence": "24h", "if": lambda ctx: ctx.context != "fechado"}],
           "steps": [{"id": "oi", "say": "Oi?"}]}
LEMBRETE = {"id": "lembrete", "name": "Lembrete", "steps": [{"id": "espera", "wait": "1d"}, {"id": "s", "say": "x"}]}


def test_outcome_table_has_the_38_codes_with_one_sentence_each():
    assert tuple(OUTCOME_MESSAGES) == OUTCOME_CODES and len(OUTCOME_MESSAGES) == 38
    for code, sentence in OUTCOME_MESSAGES.items():
        assert sentence.endswith(".") and sentence[0].isupper() and sentence.count(". ") == 0, code
    assert END_REASONS == ("end", "flow", "reset", "skipped", "failed", "replaced")


def test_pending_wakes_lists_parked_runs_then_silence_wakes():
    agent, provider, _ = make_agent([triage_flow(), RETOMAR, LEMBRETE], understand=[{"fields": {}}],
                                    speak=[{"message": "Oi!", "nome": None, "empresa": None}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    r2 = agent.turn(session_id="s1", start={"flow": "lembrete", "key": "k"}, session=r.session)
    wakes = agent.pending_wakes(session=r2.session, context=None)
    assert [(w.key, to_iso(w.at), w.replaces) for w in wakes] == [
        (f"lembrete#k:espera:{T0_MS + 86_400_000}", "2026-09-21T10:00:00.000Z", None),
        (f"silence:retomar:s1:{T0_MS}", "2026-09-21T10:00:00.000Z", None)]
    assert [w.key for w in agent.pending_wakes(session=r2.session, context="fechado")] == [wakes[0].key]
    held = agent.pending_wakes(session=r2.session, context=None, claims={"held": {"retomar:s1:": T0}})
    assert [w.key for w in held] == [wakes[0].key]
    assert agent.pending_wakes(session=r2.session.to_json(), context=None)[1].key == wakes[1].key
    assert r2.session.runs[-1].status == "waiting" and len(provider.calls) == 2  # nothing changed, no call


def test_pending_wakes_skips_silence_when_the_customer_spoke_last():
    agent, _, _ = make_agent([RETOMAR], fields={}, idle="silent")
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert r.session.last_assistant_at is None
    assert agent.pending_wakes(session=r.session, context=None) == []


def test_changed_is_false_for_a_turn_that_moves_nothing():
    agent, _, _ = make_agent([LEMBRETE], fields={}, idle="silent")
    r = agent.turn(session_id="s1", start={"flow": "lembrete", "key": "k"})
    # a message with no id on an agent that says nothing still records lastUserAt: changed
    m = agent.turn(session_id="s1", message="oi", session=r.session)
    assert m.changed is True and m.session.last_user_at == T0
    # the same message again at the same instant changes nothing at all
    again = agent.turn(session_id="s1", message="oi", session=m.session)
    assert again.changed is False and again.outcomes == [] and again.session == m.session


def test_turn_never_mutates_its_input_session():
    agent, _, clock = make_agent([LEMBRETE], fields={})
    r = agent.turn(session_id="s1", start={"flow": "lembrete", "key": "k"})
    before = r.session.to_json()
    clock.advance("1d")
    agent.turn(session_id="s1", wake=r.schedule[0].key, session=r.session)
    assert r.session.to_json() == before


PEDIDO = {"id": "pedido", "name": "Pedido",
          "steps": [{"id": "espera", "wait": "1d"}, {"id": "anota", "do": "anota"}, {"id": "fim", "wait": "30d"}]}


def _anota(params, ctx):
    ctx.input["itens"].append("b")  # handlers may change what they are handed in place
    ctx.data["lista"].append("x")
    return {"ok": True}


def test_turns_that_change_runs_data_and_outcomes_leave_the_callers_session_untouched():
    from falai_django.engine.agent import Action
    from falai_django.engine.session import Session

    agent, _, clock = make_agent(
        [triage_flow(), PEDIDO], understand=[{"fields": {}}, {"fields": {}}],
        speak=[{"message": "Oi!", "nome": "Ana", "empresa": None}, {"message": "E a empresa?", "empresa": None}],
        actions={"anota": Action(run=_anota)})
    started = agent.turn(session_id="s1", start={"flow": "pedido", "input": {"itens": ["a"]}, "key": "p1"})
    blob = started.session.to_json()
    blob["data"]["lista"] = ["a"]
    first = agent.turn(session_id="s1", message="oi", id="m1", session=Session.from_json(blob))
    assert first.changed and len(first.session.runs) == 2
    session = first.session
    before = session.to_json()
    pedido = run_of(session, "pedido")
    outcomes, input_ = list(pedido.outcomes), pedido.input

    # a message turn: the asking run is asked again, its outcomes and `asked` grow
    second = agent.turn(session_id="s1", message="sou a Ana", id="m2", session=session)
    assert second.changed and run_of(second.session, "triagem").asked != run_of(session, "triagem").asked
    assert session.to_json() == before

    # a wake turn: the parked run moves, its action changes its input and the data in place
    clock.advance("1d")
    woke = agent.turn(session_id="s1", wake=pedido.waiting.key, session=session)
    moved = run_of(woke.session, "pedido")
    assert moved.step_id == "fim" and moved.input == {"itens": ["a", "b"]}
    assert woke.session.data["lista"] == ["a", "x"]
    assert session.to_json() == before
    assert pedido.outcomes == outcomes and pedido.input is input_ and input_ == {"itens": ["a"]}
    assert session.data["lista"] == ["a"] and pedido.step_id == "espera" and pedido.status == "waiting"


def test_exactly_one_input_kind():
    agent, _, _ = make_agent([], fields={})
    with pytest.raises(TypeError):
        agent.turn(session_id="s1")
    with pytest.raises(TypeError):
        agent.turn(session_id="s1", message="a", wake="b")


def test_usage_is_summed_or_absent():
    agent, _, _ = make_agent([triage_flow()], understand=[{"fields": {}}],
                             speak=[{"message": "Oi!", "nome": None, "empresa": None}], usage=True)
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert r.usage is not None and r.usage.prompt_tokens > 0 and r.usage.completion_tokens == len("Oi!") + len(
        '{"fields": {}}')
    quiet, _, _ = make_agent([], fields={}, idle="silent")
    assert quiet.turn(session_id="s1", message="oi", id="m1").usage is None


def test_result_json_uses_upstream_names():
    agent, _, _ = make_agent([triage_flow()], understand=[{"fields": {}}],
                             speak=[{"message": "Oi!", "nome": None, "empresa": None}])
    j = agent.turn(session_id="s1", message="oi", id="m1").to_json()
    assert set(j) >= {"session", "changed", "messages", "schedule", "outcomes", "started", "ended", "skipped",
                      "llmCalls"}
    assert j["messages"][0] == {"text": "Oi!", "kind": "ai", "afterMs": 0, "key": "triagem#m1:quem:1",
                                "runId": "triagem#m1", "stepId": "quem"}
    assert j["started"] == [{"runId": "triagem#m1", "flowId": "triagem", "anchor": "s1", "dedupeKey": "triagem:s1:"}]


def test_unknown_keyword_is_refused():
    agent, _, _ = make_agent([], fields={})
    with pytest.raises(TypeError, match="sessionId"):
        agent.turn(sessionId="s1", session_id="s1", message="oi")
