"""The speak call's tool rounds (persistence-and-LLM note §6.4): offered tools, gates,
`max_tool_loops`, the wrap-up call, and tool `data` merged at settle."""

from __future__ import annotations

from scenarios.kit import make_agent

FIELDS = {"conta": {"type": "string", "ask": "Pergunte o número da conta."}}
FLOW = {"id": "saldo", "name": "Saldo", "on": [{"message": []}],
        "steps": [{"id": "s", "prompt": "Informe o saldo.", "collect": ["conta"]}]}


def tool(id, handler, **extra):
    return {"id": id, "description": f"tool {id}",
            "parameters": {"type": "object", "properties": {"conta": {"type": "string"}}, "required": ["conta"]},
            "handler": handler, **extra}


def test_a_tool_round_then_the_answer():
    seen = []

    def saldo(args, ctx):
        seen.append((args, ctx.run.id if ctx.run else None))
        return {"value": {"saldo": 10}, "data": {"conta": args["conta"]}}

    agent, provider, _ = make_agent(
        [FLOW], fields=FIELDS, tools=[tool("consulta", saldo)],
        speak=[{"message": "Deixa eu ver...", "toolCalls": [{"toolName": "consulta", "arguments": '{"conta": "9"}'}]},
               {"message": "Seu saldo é R$ 10.", "conta": None}])
    r = agent.turn(session_id="s1", message="meu saldo, conta 9", id="m1")
    assert seen == [({"conta": "9"}, "saldo#m1")]
    assert r.llm_calls == 2 and [m.text for m in r.messages] == ["Seu saldo é R$ 10."]
    first, second = provider.calls[0], provider.calls[1]
    assert [t.id for t in first.input.tools] == ["consulta"] and "## Tools" in first.prompt
    history = second.input.history
    assert history[0] == {"role": "user", "content": "meu saldo, conta 9"}
    assert history[1]["role"] == "assistant" and history[1]["tool_calls"][0]["id"] == "call-0-0"
    assert history[2] == {"role": "tool", "tool_call_id": "call-0-0", "name": "consulta",
                          "content": '{"saldo":10}'}  # as JSON.stringify writes it (LLM note §6.4)
    assert r.session.data == {"conta": "9"}  # tool data completes the collect step
    assert [e.reason for e in r.ended] == ["end"]


def test_max_tool_loops_one_forces_a_wrap_up_without_tools():
    agent, provider, _ = make_agent(
        [FLOW], fields=FIELDS, max_tool_loops=1,
        tools=[tool("consulta", lambda a, c: {"value": "ok"})],
        speak=[{"message": "", "toolCalls": [{"toolName": "consulta", "arguments": {"conta": "1"}}]},
               {"message": "Pronto.", "conta": None}])
    r = agent.turn(session_id="s1", message="saldo", id="m1")
    assert provider.calls[1].input.tools is None and "Do not call any tools." in provider.calls[1].prompt
    assert r.llm_calls == 2


def test_max_tool_loops_zero_offers_no_tools():
    agent, provider, _ = make_agent([FLOW], fields=FIELDS, max_tool_loops=0,
                                    tools=[tool("consulta", lambda a, c: {})],
                                    speak=[{"message": "Qual a conta?", "conta": None}])
    agent.turn(session_id="s1", message="saldo", id="m1")
    assert provider.calls[0].input.tools is None


def test_gates_and_errors_reach_the_model_not_the_host():
    def boom(args, ctx):
        raise RuntimeError("timeout no banco")

    agent, provider, _ = make_agent(
        [FLOW], fields=FIELDS,
        tools=[tool("a", boom), tool("b", lambda a, c: {}, validate_input=lambda a, c: {"valid": False, "error": "conta?"}),
               tool("c", lambda a, c: {}, check_permissions=lambda a, c: False)],
        speak=[{"message": "", "toolCalls": [{"toolName": "a", "arguments": {}}, {"toolName": "b", "arguments": {}},
                                             {"toolName": "c", "arguments": {}}, {"toolName": "z", "arguments": {}}]},
               {"message": "Tive um problema.", "conta": None}])
    r = agent.turn(session_id="s1", message="saldo", id="m1")
    contents = [h["content"] for h in provider.calls[1].input.history if h.get("role") == "tool"]
    assert contents == ['{"error":"timeout no banco"}', '{"error":"Validation failed: conta?"}',
                        '{"error":"Permission denied: not allowed"}', '{"error":"Tool \\"z\\" is not available."}']
    assert [m.text for m in r.messages] == ["Tive um problema."]


def test_step_tools_list_scopes_the_offer():
    flow = dict(FLOW, steps=[dict(FLOW["steps"][0], tools=["b"])])
    agent, provider, _ = make_agent([flow], fields=FIELDS,                                     tools=[tool("a", lambda a, c: {}), tool("b", lambda a, c: {})],
                                    speak=[{"message": "Oi", "conta": None}])
    agent.turn(session_id="s1", message="saldo", id="m1")
    assert [t.id for t in provider.calls[0].input.tools] == ["b"]


def test_concurrency_safe_calls_run_together_and_merge_in_call_order():
    import threading
    import time

    started = []

    def slow(args, ctx):
        started.append(threading.get_ident())
        time.sleep(0.05)
        return {"value": args["conta"], "data": {"conta": args["conta"]}}

    agent, provider, _ = make_agent(
        [FLOW], fields=FIELDS, tools=[tool("a", slow, is_read_only=lambda a: True)],
        speak=[{"message": "", "toolCalls": [{"toolName": "a", "arguments": {"conta": "1"}},
                                             {"toolName": "a", "arguments": {"conta": "2"}}]},
               {"message": "Pronto.", "conta": None}])
    r = agent.turn(session_id="s1", message="saldo", id="m1")
    assert len(set(started)) == 2  # two worker threads
    contents = [h["content"] for h in provider.calls[1].input.history if h.get("role") == "tool"]
    assert contents == ["1", "2"] and r.session.data == {"conta": "2"}


def test_provider_extras_of_a_tool_call_ride_into_the_next_rounds_history():
    agent, provider, _ = make_agent(
        [FLOW], fields=FIELDS, tools=[tool("a", lambda a, c: {"value": "ok"})],
        speak=[{"message": "", "toolCalls": [{"id": "x9", "toolName": "a", "arguments": {"conta": "1"},
                                              "thoughtSignature": "c2ln"}]},
               {"message": "Pronto.", "conta": None}])
    agent.turn(session_id="s1", message="saldo", id="m1")
    (call,) = provider.calls[1].input.history[1]["tool_calls"]
    assert call == {"thoughtSignature": "c2ln", "id": "call-0-0", "name": "a",
                    "arguments": {"conta": "1"}}


def test_a_long_result_is_cut_at_max_result_size_chars_with_a_notice():
    # authoring note §6.3: `value` is serialized (string as-is, else compact JSON) and cut at
    # maxResultSizeChars with a notice giving the total and shown lengths; `data` is untouched.
    long_text = "x" * 120
    agent, provider, _ = make_agent(
        [FLOW], fields=FIELDS,
        tools=[tool("texto", lambda a, c: {"value": long_text}, maxResultSizeChars=50),
               tool("lista", lambda a, c: {"value": list(range(40)), "data": {"conta": "7"}},
                    max_result_size_chars=20),
               tool("curto", lambda a, c: {"value": "cabe"}, maxResultSizeChars=50)],
        speak=[{"message": "", "toolCalls": [{"toolName": "texto", "arguments": {"conta": "1"}},
                                             {"toolName": "lista", "arguments": {"conta": "1"}},
                                             {"toolName": "curto", "arguments": {"conta": "1"}}]},
               {"message": "Pronto.", "conta": None}])
    r = agent.turn(session_id="s1", message="saldo", id="m1")
    contents = [h["content"] for h in provider.calls[1].input.history if h["role"] == "tool"]
    as_json = "[" + ",".join(str(i) for i in range(40)) + "]"
    assert contents == [
        "x" * 50 + "\n[truncated: 120 characters in total, 50 shown]",
        as_json[:20] + f"\n[truncated: {len(as_json)} characters in total, 20 shown]",
        "cabe",
    ]
    assert r.session.data == {"conta": "7"}


def test_the_default_five_tool_rounds_then_one_wrap_up_call():
    # max_tool_loops defaults to 5: five rounds may call tools, then one tool-less wrap-up call.
    ran = []
    call = {"message": "", "toolCalls": [{"toolName": "consulta", "arguments": {"conta": "1"}}]}
    agent, provider, _ = make_agent(
        [FLOW], fields=FIELDS, tools=[tool("consulta", lambda a, c: ran.append(a) or {"value": "ok"})],
        speak=[call] * 5 + [{"message": "Pronto.", "conta": None}])
    r = agent.turn(session_id="s1", message="saldo", id="m1")
    assert len(ran) == 5 and r.llm_calls == 6
    offered = [c.input.tools is not None for c in provider.calls]
    assert offered == [True] * 5 + [False]
    assert "Do not call any tools." in provider.calls[5].prompt
    assert [m.text for m in r.messages] == ["Pronto."]
