"""Compaction (engine-turn.md §3.1, §7; DECISIONS T9): one summary call before both calls."""

from __future__ import annotations

from scenarios.kit import make_agent

from falai_django import assistant_message, user_message


def test_a_long_history_is_summarised_once_and_counted():
    history = [user_message("x" * 400) if i % 2 == 0 else assistant_message("y" * 400) for i in range(10)]
    agent, provider, _ = make_agent([], fields={}, compaction={"maxTokens": 500, "preserveRecentCount": 2},
                                    summary=["A pessoa quer um orçamento."], speak=[{"message": "Certo!"}])
    r = agent.turn(session_id="s1", message="e então?", id="m1", history=history)
    assert provider.names() == ["(unnamed)", "speak"]
    assert provider.calls[0].input.parameters.json_schema == {}
    assert r.llm_calls == 2
    speak_history = provider.calls[1].input.history
    assert speak_history[0] == {"role": "system", "content": "Summary of the earlier conversation: A pessoa quer um "
                                                             "orçamento."}
    assert speak_history[1:] == history[-2:]


def test_a_short_history_is_left_alone():
    agent, provider, _ = make_agent([], fields={}, compaction={"maxTokens": 5000}, speak=[{"message": "Oi"}])
    r = agent.turn(session_id="s1", message="oi", id="m1", history=[user_message("oi")])
    assert provider.names() == ["speak"] and r.llm_calls == 1
