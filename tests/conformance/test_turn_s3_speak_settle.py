"""engine-turn.md §3.7 (Speak) and §3.8 (Settle): failure ladder, tools, idle, usage."""

from __future__ import annotations

import pytest

from falai_django import ProviderError

from .turn_kit import HOUR, MIN, T0_MS, World, line

TALK = {"id": "lem", "name": "Lembrete", "steps": [{"id": "d", "do": "ok"}, {"id": "aviso", "prompt": "Avise."}]}


def _ok(log):
    return {"ok": {"run": lambda p, c: log.append(c.key) or {"ok": True}}}


def test_retry_ladder_five_rungs_then_failed():
    log = []
    w = World([TALK], actions=_ok(log), speak=[ProviderError("mock", "network", "down")] * 6)
    r = w.turn(start={"flow": "lem", "key": "k1"})
    ladder = [1 * MIN, 5 * MIN, 15 * MIN, HOUR, 6 * HOUR]
    for i, delay in enumerate(ladder):
        o = r.outcomes[-1]
        at = int(w.clock.now().timestamp() * 1000) + delay
        assert (o.kind, o.status, o.code, o.key) == ("prompt", "deferred", "provider-unavailable", "lem#k1:aviso:1")
        assert o.llm_calls is None
        assert o.message
        assert [e.key for e in r.schedule] == [f"lem#k1:aviso:1:retry:{at}"]
        assert r.llm_calls == 1
        assert r.changed is True
        run = r.session.runs[0]
        assert run.status == "waiting" and run.waiting.key == r.schedule[0].key
        w.clock.set(r.schedule[0].at)
        r = w.turn(wake=r.schedule[0].key)
        if i < 4:
            assert "## Situation" in w.provider.calls[-1].prompt
    # sixth failure
    o = r.outcomes[-1]
    assert (o.kind, o.status, o.code, o.key) == ("prompt", "failed", "provider-unavailable", "lem#k1:aviso:1")
    assert [e.reason for e in r.ended] == ["failed"]
    assert len([x for x in r.outcomes if x.status == "failed"]) == 1
    assert r.schedule == []
    assert log == ["lem#k1:d:1"]  # the do step is not repeated by retries


def test_auth_error_fails_at_once():
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "auth", "bad key")])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    o = r.outcomes[-1]
    assert (o.kind, o.status, o.code) == ("prompt", "failed", "provider-auth")
    assert [e.reason for e in r.ended] == ["failed"]
    assert r.schedule == []
    assert r.llm_calls == 1


@pytest.mark.parametrize("kind,code,status", [
    ("timeout", "provider-unavailable", "deferred"),
    ("overload", "provider-unavailable", "deferred"),
    ("rate", "provider-unavailable", "deferred"),
    ("unknown", "provider-unavailable", "deferred"),
    ("aborted", "provider-unavailable", "failed"),
    ("quota", "provider-quota", "failed"),
    ("entitlement", "provider-auth", "failed"),
    ("model", "provider-invalid", "failed"),
    ("invalid", "provider-invalid", "failed"),
    ("content", "provider-invalid", "failed"),
    ("context", "provider-context", "failed"),
])
def test_failure_classification(kind, code, status):
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", kind, "x")])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    o = r.outcomes[-1]
    assert (o.code, o.status) == (code, status)


def test_quota_with_reset_is_retried_at_reset():
    reset = T0_MS + 2 * HOUR
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "quota", "x", reset_at_ms=reset)])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    o = r.outcomes[-1]
    assert (o.code, o.status) == ("provider-quota", "deferred")
    assert r.schedule[0].key == f"lem#k1:aviso:1:retry:{reset}"


def test_reset_later_than_rung_wins_but_earlier_does_not():
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "rate", "x", reset_at_ms=T0_MS + 10 * MIN)])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert r.schedule[0].key.endswith(f":retry:{T0_MS + 10 * MIN}")
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "rate", "x", reset_at_ms=T0_MS + 1000)])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert r.schedule[0].key.endswith(f":retry:{T0_MS + MIN}")


def test_should_retry_overrides():
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "network", "x", should_retry=False)])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert r.outcomes[-1].status == "failed"
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "invalid", "x", should_retry=True)])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert (r.outcomes[-1].status, r.outcomes[-1].code) == ("deferred", "provider-invalid")


def test_empty_message_defers():
    w = World([TALK], actions=_ok([]), speak=[{"message": "   "}])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    o = r.outcomes[-1]
    assert (o.code, o.status) == ("provider-unavailable", "deferred")
    assert r.messages == []


def test_non_provider_error_in_speak_is_classified():
    class Boom(Exception):
        status_code = 401
    w = World([TALK], actions=_ok([]), speak=[Boom("unauthorized")])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert (r.outcomes[-1].code, r.outcomes[-1].status) == ("provider-auth", "failed")


def test_retry_wake_under_silence_ends_run():
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "network", "x")])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    r = w.turn(wake=r.schedule[0].key, silenced="humano")
    assert line(r, "silenced").detail == "humano"
    assert [e.reason for e in r.ended] == ["skipped"]


def test_idle_failure_writes_idle_deferred():
    w = World([], speak=[ProviderError("mock", "network", "x")])
    r = w.turn(message="oi", id="m1")
    (o,) = r.outcomes
    assert (o.kind, o.status, o.code, o.key, o.llm_calls) == ("idle", "deferred", "provider-unavailable", None, 1)
    assert r.schedule == [] and r.messages == []
    assert r.changed is True


def test_idle_ignores_envelope_fields_and_gets_message_only_envelope():
    w = World([], speak=[{"message": "Oi", "nome": "X"}])
    r = w.turn(message="oi", id="m1")
    assert r.session.data == {}
    env = w.provider.calls[0].input.parameters.json_schema
    assert set(env["properties"]) == {"message"}


# --------------------------------------------------------------------------- tools

def _tool_world(n_rounds, max_tool_loops=None, **kw):
    calls = []

    def handler(args, ctx):
        calls.append(args)
        return {"value": {"preco": 10}, "data": {"empresa": "ACME"}}
    opts = {"tools": [{"id": "preco", "description": "Preço", "handler": handler,
                       "parameters": {"type": "object", "properties": {"item": {"type": "string"}}}}]}
    if max_tool_loops is not None:
        opts["max_tool_loops"] = max_tool_loops
    tc = {"message": "", "toolCalls": [{"toolName": "preco", "arguments": {"item": "x"}}]}
    speak = [tc] * n_rounds + [{"message": "Custa 10"}]
    w = World([TALK], actions=_ok([]), speak=speak, **opts, **kw)
    return w, calls


def test_tool_round_then_answer():
    w, calls = _tool_world(1)
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert r.llm_calls == 2
    assert calls == [{"item": "x"}]
    assert [m.text for m in r.messages] == ["Custa 10"]
    assert r.session.data["empresa"] == "ACME"
    assert r.outcomes[-1].llm_calls == 2
    assert w.provider.calls[0].input.tools
    # the second call sees the tool result in history
    hist = w.provider.calls[1].input.history
    assert any(h.get("role") == "tool" for h in hist)


def test_tools_capped_at_max_tool_loops_plus_one():
    w, calls = _tool_world(10, max_tool_loops=2)
    w.provider._queues["speak"].clear()
    tc = {"message": "", "toolCalls": [{"toolName": "preco", "arguments": {}}]}
    w.speak(tc, tc, {"message": "fim"})
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert r.llm_calls == 3
    assert len(calls) == 2
    assert not w.provider.calls[2].input.tools
    assert "Do not call any tools." in w.provider.calls[2].prompt


def test_max_tool_loops_zero_disables_tools():
    w, calls = _tool_world(0, max_tool_loops=0)
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert r.llm_calls == 1
    assert not w.provider.calls[0].input.tools


def test_unknown_tool_result_error_does_not_fail_turn():
    tc = {"message": "", "toolCalls": [{"toolName": "nao-existe", "arguments": {}}]}
    w = World([TALK], actions=_ok([]), speak=[tc, {"message": "ok"}],
              tools=[{"id": "preco", "handler": lambda a, c: {"value": 1}}])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert [m.text for m in r.messages] == ["ok"]
    tool_items = [h for h in w.provider.calls[1].input.history if h.get("role") == "tool"]
    assert "not available" in tool_items[0]["content"]


# --------------------------------------------------------------------------- usage

def test_usage_summed_across_calls():
    w = World([{"id": "a", "name": "A", "on": [{"message": ["a"]}], "steps": [{"id": "s", "prompt": "x"}]},
               {"id": "b", "name": "B", "on": [{"message": ["b"]}], "steps": [{"id": "s", "prompt": "x"}]}],
              understand=[{"flows": {"a": 90}}], speak=[{"message": "abc"}], usage=True)
    r = w.turn(message="a", id="m1")
    assert r.llm_calls == 2
    und_msg = w.provider.calls[0]
    import json
    envelope = {"flows": {"a": 90}}  # the mock's understand message is the envelope as JSON text
    assert r.usage.completion_tokens - len("abc") in (len(json.dumps(envelope)),
                                                       len(json.dumps(envelope, separators=(",", ":"))))
    assert r.usage.prompt_tokens == sum(len(c.system or "") + len(c.prompt or "") for c in w.provider.calls)
    assert und_msg


def test_deferred_usage_and_llm_calls_still_count():
    w = World([TALK], actions=_ok([]), speak=[ProviderError("mock", "network", "x")])
    r = w.turn(start={"flow": "lem", "key": "k1"})
    assert r.llm_calls == 1


def test_speak_prompt_sections_for_message():
    fl = {"id": "f", "name": "Fluxo", "description": "Descrição", "on": [{"message": []}],
          "steps": [{"id": "q", "collect": ["nome"]}]}
    w = World([fl], speak=[{"message": "Nome?", "nome": None}])
    w.turn(message="  oi tudo bem  ", id="m1")
    p = w.provider.calls[0].prompt
    assert "## Flow" in p and "Fluxo: Descrição" in p
    assert "## Still to collect" in p
    assert "## Customer's latest message" in p and '"oi tudo bem"' in p
    assert "## Response format" in p
    assert w.provider.calls[0].system.startswith("## Identity")
    assert 'You are "Ana".' in w.provider.calls[0].system


def test_host_history_and_context_untouched_by_tool_rounds():
    import copy

    from falai_django import user_message
    w, _ = _tool_world(2)
    history = [user_message("antes")]
    ctx = {"lead": {"tags": ["a"]}}
    h0, c0 = copy.deepcopy(history), copy.deepcopy(ctx)
    r = w.turn(start={"flow": "lem", "key": "k1"}, history=history, context=ctx)
    assert r.llm_calls == 3
    assert history == h0 and ctx == c0


def test_tool_round_history_items_have_the_spec_shape():
    # persistence-and-LLM note §6.4: user item first (the customer's text), then one assistant item
    # with tool_calls [{id: "call-<round>-<i>", name, arguments}] (arguments parsed), then tool items
    fl = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"}]}
    calls = [{"toolName": "orc", "arguments": {"pessoas": 30}}, {"toolName": "orc", "arguments": '{"pessoas": 5}'}]
    w = World([fl], tools=[{"id": "orc", "handler": lambda a, c: {"value": {"total": a["pessoas"]}}}],
              speak=[{"message": "Deixa eu calcular.", "toolCalls": calls}, {"message": "Fica 1500."}])
    w.turn(message="quanto custa?", id="m1")
    hist = w.provider.calls[1].input.history
    assert hist[0] == {"role": "user", "content": "quanto custa?"}
    assert hist[1] == {"role": "assistant", "content": "Deixa eu calcular.",
                       "tool_calls": [{"id": "call-0-0", "name": "orc", "arguments": {"pessoas": 30}},
                                      {"id": "call-0-1", "name": "orc", "arguments": {"pessoas": 5}}]}
    assert [(h["role"], h["tool_call_id"], h["name"]) for h in hist[2:]] == [
        ("tool", "call-0-0", "orc"), ("tool", "call-0-1", "orc")]
    # results are written as JSON.stringify writes them: compact
    assert [h["content"] for h in hist[2:]] == ['{"total":30}', '{"total":5}']


def test_tool_gate_and_error_results_exact_text():
    fl = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"}]}
    ran = []

    def boom(a, c):
        raise RuntimeError("planilha fora do ar")
    gated = {"id": "gated", "handler": lambda a, c: ran.append(a) or {"value": "ok"},
             "validate_input": lambda a, c: {"valid": True} if isinstance(a.get("p"), int)
             else {"valid": False, "error": "p must be a number", "correctedInput": {"p": 0}},
             "check_permissions": lambda a, c: {"allowed": False, "reason": "unlucky"} if a.get("p") == 13
             else {"allowed": True}}
    tc = {"message": "", "toolCalls": [{"toolName": "gated", "arguments": {"p": "x"}},
                                       {"toolName": "gated", "arguments": {"p": 13}},
                                       {"toolName": "gated", "arguments": '{"p": 30}'},
                                       {"toolName": "sumida", "arguments": {}},
                                       {"toolName": "boom", "arguments": {}},
                                       {"toolName": "none", "arguments": {}}]}
    w = World([fl], tools=[gated, {"id": "boom", "handler": boom}, {"id": "none", "handler": lambda a, c: None}],
              speak=[tc, {"message": "Pronto."}])
    w.turn(message="oi", id="m1")
    assert ran == [{"p": 30}]
    contents = [h["content"] for h in w.provider.calls[1].input.history if h["role"] == "tool"]
    assert contents == [
        '{"error":"Validation failed: p must be a number","correctedInput":{"p":0}}',
        '{"error":"Permission denied: unlucky"}',
        "ok",
        '{"error":"Tool \\"sumida\\" is not available."}',
        '{"error":"planilha fora do ar"}',
        '{"ok":true}']
