"""Toolkit, Agent constructor checks and option defaults (authoring note §1, §6.4, §9.4
constructor-only checks), and the public names of README.md. Written from the spec alone."""

from __future__ import annotations

import inspect
import logging
import subprocess
import sys

import pytest

import falai_django
from falai_django import Agent, FlowConfigurationError, falai
from falai_django.testing import fake_clock, mock_provider

f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome."}})
FLOW = {"id": "triagem", "name": "Triagem", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome"]}]}


def build(**kw):
    kw.setdefault("name", "Ana")
    kw.setdefault("provider", mock_provider())
    return f.agent(**kw)


def err(**kw) -> str:
    with pytest.raises(FlowConfigurationError) as exc:
        build(**kw)
    return str(exc.value)


# ----------------------------------------------------------------------------- names

README_NAMES = [
    "falai", "Agent", "Session", "user_message", "assistant_message", "migrate_session", "from_spec", "to_spec",
    "validate_flow", "flow_spec_schema", "parse_duration", "MemoryStore", "PostgresStore", "SQLiteStore",
    "RedisStore", "SessionConflictError", "InvalidSessionError", "FlowConfigurationError", "ProviderError",
    "GeminiProvider", "FallbackProvider",
]


@pytest.mark.parametrize("name", README_NAMES)
def test_public_names(name):
    assert getattr(falai_django, name) is not None
    exec(f"from falai_django import {name}", {})


def test_testing_names():
    from falai_django.testing import MemoryScheduler, fake_clock, mock_provider  # noqa: F401


def test_import_without_django_settings():
    code = ("import os; os.environ.pop('DJANGO_SETTINGS_MODULE', None); import falai_django; "
            "from falai_django import falai, Agent, Session, MemoryStore, migrate_session, validate_flow; "
            "from falai_django.testing import fake_clock, MemoryScheduler, mock_provider; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "ok", out.stderr


def test_error_classes():
    from falai_django import InvalidSessionError, ProviderError, SessionConflictError
    e = SessionConflictError("s1", 1, 2)
    assert (e.session_id, e.expected_version, e.actual_version) == ("s1", 1, 2)
    assert type(e).__name__ == "SessionConflictError" and isinstance(e, Exception)
    e = InvalidSessionError("s1", "why")
    assert e.session_id == "s1"
    assert str(e) == ('[InvalidSessionError] stored session "s1" is unreadable: why. '
                      'Repair or delete the row; it is never replaced by a fresh conversation.')
    p = ProviderError("gemini", "rate", "slow down", status=429, code="RESOURCE_EXHAUSTED", retry_after_ms=1000,
                      reset_at_ms=None, window=None, should_retry=True, body={"x": 1})
    assert (p.provider, p.kind, p.status, p.code, p.retry_after_ms, p.should_retry) == (
        "gemini", "rate", 429, "RESOURCE_EXHAUSTED", 1000, True)
    assert FlowConfigurationError("x").args


def test_user_and_assistant_message():
    from falai_django import assistant_message, user_message
    assert user_message("oi") == {"role": "user", "content": "oi"}
    assert assistant_message("olá") == {"role": "assistant", "content": "olá"}


def test_migrate_session_signature():
    from falai_django import migrate_session
    params = inspect.signature(migrate_session).parameters
    for name in ("session_id", "flow_id_of", "now"):
        assert name in params
    assert params["now"].default is None
    assert migrate_session({"data": {}, "currentFlow": "f"}, session_id="s1").runs[0].flow_id == "f"


def test_agent_keyword_options():
    params = inspect.signature(Agent).parameters
    for name in ("name", "provider", "flows", "actions", "events", "conditions", "tools", "instructions",
                 "knowledge_base", "idle", "clock", "business_hours", "max_tool_loops", "persona", "goal",
                 "compaction", "debug", "fields"):
        assert name in params, name


# ----------------------------------------------------------------------------- toolkit

def test_toolkit_flow_identity_and_kwargs():
    d = {"id": "x", "name": "X", "steps": []}
    assert f.flow(d) == d
    assert f.flow(id="x", name="X", steps=[]) == d


def test_fields_property_and_agent_injects_fields():
    assert dict(f.fields) == {"nome": {"type": "string", "ask": "Pergunte o nome."}}
    agent = build(flows=[FLOW])
    assert "nome" in agent.fields


def test_root_toolkit_has_every_method():
    root = falai()
    for name in ("fields", "flow", "from_spec", "action", "event", "condition", "agent"):
        assert hasattr(root, name)


def test_action_event_condition_helpers():
    run = lambda params, ctx: {"ok": True}  # noqa: E731
    a = f.action(parameters={"m": {"type": "string"}}, run=run)
    assert a.run is run
    assert dict(a.parameters) == {"m": {"type": "string"}}
    check = lambda ctx, arg: True  # noqa: E731
    c = f.condition(check)
    assert c.check is check
    f.event()
    f.event(direction="inbound")


def test_new_agent_with_fields():
    agent = Agent(name="Ana", provider=mock_provider(), fields={"nome": {"type": "string"}}, flows=[FLOW])
    assert [fl.id for fl in agent.flows] == ["triagem"]


# ----------------------------------------------------------------------------- defaults

def test_defaults():
    agent = build()
    assert agent.max_tool_loops == 5
    assert list(agent.flows) == []
    assert agent.compaction is None
    assert agent.debug is False
    assert agent.business_hours is None


def test_fake_clock_is_the_agents_now():
    clock = fake_clock("2026-09-20T10:00:00Z")
    agent = build(clock=clock)
    assert agent.now() == clock.now()


def test_camel_case_options_accepted():
    agent = build(maxToolLoops=0, knowledgeBase={"a": 1})
    assert agent.max_tool_loops == 0


# ----------------------------------------------------------------------------- constructor checks

def test_every_flow_validated():
    msg = err(flows=[{**FLOW, "clearOnStart": ["zz"]}])
    assert 'flow "triagem": unknown field "zz" in clearOnStart' in msg


def test_duplicate_flow_id():
    msg = err(flows=[FLOW, dict(FLOW)])
    assert 'flow "triagem" is declared twice' in msg


def test_tool_parameters_must_be_object_schema():
    tool = {"id": "buscar", "handler": lambda a, c: {}, "parameters": {"q": {"type": "string"}}}
    assert 'tool "buscar": parameters must be a JSON Schema object' in err(tools=[tool])
    ok = {"id": "buscar", "handler": lambda a, c: {}, "parameters": {"type": "object", "properties": {}}}
    build(tools=[ok])


def test_idle_unknown_tool():
    assert 'idle: unknown tool "x"' in err(idle={"prompt": "p", "tools": ["x"]})
    build(idle="silent")
    build(idle={"prompt": "p"})


@pytest.mark.parametrize("name", ["equals", "known", "silenced"])
def test_condition_shadowing_builtin(name):
    assert f'condition "{name}" shadows a built-in' in err(conditions={name: f.condition(lambda c, a: True)})


def test_unknown_condition_in_agent_and_idle_instructions():
    msg = err(instructions=[{"prompt": "x", "if": {"vip": True}}])
    assert 'agent: unknown condition "vip" in instructions[0].if' in msg
    msg = err(idle={"prompt": "p", "instructions": [{"prompt": "a"}, {"prompt": "x", "if": {"vip": 1}}]})
    assert 'idle: unknown condition "vip" in instructions[1].if' in msg
    build(instructions=[{"prompt": "x", "if": {"vip": True}}], conditions={"vip": f.condition(lambda c, a: True)})


def test_flow_chain_to_missing_flow_builds_with_warning(caplog):
    flow = {**FLOW, "steps": [{"id": "q", "collect": ["nome"], "then": {"flow": "humano"}}]}
    with caplog.at_level(logging.WARNING):
        agent = build(flows=[flow])
    assert any("flow-gone" in w for w in agent.warnings)
    assert any(r.getMessage().startswith("[Agent] ") and "flow-gone" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("compaction", [
    {"maxTokens": 1000, "compactionThreshold": 0.4},
    {"maxTokens": 1000, "compactionThreshold": 0.96},
    {"maxTokens": 1000, "preserveRecentCount": 1},
    {"maxTokens": 1000, "maxToolResultChars": 0},
])
def test_compaction_out_of_range_plain_error(compaction):
    with pytest.raises(Exception) as exc:
        build(compaction=compaction)
    assert not isinstance(exc.value, FlowConfigurationError)


def test_compaction_defaults():
    agent = build(compaction={"maxTokens": 1000})
    c = agent.compaction
    assert (c.compaction_threshold, c.preserve_recent_count, c.max_tool_result_chars, c.enabled) == (0.8, 4, 5000, True)
    build(compaction={"maxTokens": 1000, "compactionThreshold": 0.5, "preserveRecentCount": 2})
    build(compaction={"maxTokens": 1000, "compactionThreshold": 0.95})


def test_toolkit_definitions_read_as_the_upstream_plain_objects():
    run = lambda params, ctx: {"ok": True}  # noqa: E731
    a = f.action(parameters={"m": {"type": "string"}}, run=run)
    assert a == {"parameters": {"m": {"type": "string"}}, "run": run}
    assert a["run"] is run and a.run is run
    d = {"parameters": {}, "run": run}
    assert f.action(d) == d
    assert f.event() == {}
    assert f.event({"direction": "outbound"}) == {"direction": "outbound"}
    assert f.event(direction="inbound")["direction"] == "inbound"
    check = lambda ctx, arg: True  # noqa: E731
    assert f.condition(check) == {"check": check}
    assert f.condition(check)["check"] is check
    agent = build(actions={"a": a, "d": d}, events={"e": f.event(), "p": {}}, conditions={"c": f.condition(check),
                                                                                    "k": {"check": check}})
    assert set(agent.actions) == {"a", "d"}


def test_error_names():
    from falai_django import InvalidSessionError, ProviderError, SessionConflictError
    assert SessionConflictError("s", 1, 2).name == "SessionConflictError"
    assert InvalidSessionError("s", "x").name == "InvalidSessionError"
    assert FlowConfigurationError("x").name == "FlowConfigurationError"
    assert ProviderError("p", "rate", "m").name == "ProviderError"
