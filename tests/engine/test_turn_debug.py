"""`debug=True` turns on one log line per turn for that agent only."""

from falai_django import falai
from falai_django.testing import fake_clock, mock_provider


def _agent(name: str, debug: bool):
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome."}})
    return f.agent(
        name=name,
        provider=mock_provider(speak=[{"message": "Oi! Como você se chama?", "nome": None}]),
        flows=[f.flow({"id": "boas", "on": [{"message": []}], "steps": [{"id": "nome", "collect": ["nome"]}]})],
        clock=fake_clock("2026-09-20T10:00:00Z"),
        debug=debug,
    )


def test_debug_agent_logs_one_summary_line_per_turn(caplog):
    agent = _agent("Debugada", True)
    agent.turn(session_id="s1", message="oi", id="m1")  # only the agent's own logger is at DEBUG
    lines = [r for r in caplog.records if r.name == "falai_django.agent.Debugada"]
    assert len(lines) == 1
    text = lines[0].getMessage()
    assert "turn s1 message key=m1 changed=True llm_calls=1" in text
    assert "boas#m1:nome:1" in text


def test_debug_on_one_agent_does_not_turn_on_another(caplog):
    _agent("Barulhenta", True)
    quiet = _agent("Quieta", False)
    quiet.turn(session_id="s2", message="oi", id="m1")
    assert not [r for r in caplog.records if r.name.startswith("falai_django.agent")]
