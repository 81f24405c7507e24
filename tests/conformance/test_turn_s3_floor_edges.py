"""engine-turn.md §3.10 floor/suspension and assorted edge rules."""

from __future__ import annotations

from .turn_kit import World, codes, line

OK = {"ok": {"run": lambda p, c: {"ok": True}}}


def test_next_label_for_flow_target_is_template():
    a = {"id": "a", "name": "A", "steps": [{"id": "x", "say": "A", "then": {"flow": "{{data.dest}}"}}]}
    b = {"id": "b", "name": "B", "steps": [{"id": "y", "say": "B"}]}
    w = World([a, b])
    w.turn(event="x", key="x")
    w.session.data["dest"] = "b"
    r = w.turn(start={"flow": "a", "key": "k"})
    assert r.outcomes[0].next == "flow:{{data.dest}}"


def test_step_clear_next_label_is_step_id():
    fl = {"id": "f", "name": "F", "steps": [{"id": "a", "do": "ok", "then": {"step": "b", "clear": ["nome"]}},
                                           {"id": "b", "say": "B"}]}
    w = World([fl], actions=OK)
    r = w.turn(start={"flow": "f", "key": "k"})
    assert r.outcomes[0].next == "b"


def test_ingest_floor_blocks_routing():
    seg = {"id": "seg", "name": "Seg", "steps": [
        {"id": "w", "wait": "1d", "else": "resp"}, {"id": "x", "say": "sem"},
        {"id": "resp", "prompt": "Responda."}]}
    vendas = {"id": "vendas", "name": "V", "on": [{"message": ["comprar"]}], "steps": [{"id": "v", "prompt": "x"}]}
    outro = {"id": "outro", "name": "O", "on": [{"message": ["outro"]}], "steps": [{"id": "o", "prompt": "x"}]}
    w = World([seg, vendas, outro], understand=[{"flows": {"vendas": 100}}], speak=[{"message": "resposta"}])
    w.turn(start={"flow": "seg", "key": "k"})
    r = w.turn(message="quero comprar", id="m1")
    assert line(r, "replied").next == "resp"
    assert all(s.flow_id != "vendas" for s in r.started)
    assert r.messages[0].run_id == "seg#k"


def test_event_run_talk_suspends_asker_which_resumes_after():
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome"]}]}
    ev = {"id": "aviso", "name": "Aviso", "on": [{"event": "ev"}], "steps": [{"id": "p", "prompt": "Avise."}]}
    w = World([tri, ev], speak=[{"message": "Nome?", "nome": None}, {"message": "Aviso!"}])
    w.turn(message="oi", id="m1")
    r = w.turn(event="ev", key="e1")
    assert [m.text for m in r.messages] == ["Aviso!"]
    assert r.llm_calls == 1
    assert [e.id for e in r.ended] == ["aviso#e1"]
    assert w.run("tri").status == "asking"
    assert w.run("tri").suspended_at is None


def test_event_turn_say_does_not_silence_other_talk():
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome"]}]}
    a = {"id": "a", "name": "A", "on": [{"event": "ev"}], "steps": [{"id": "s", "say": "Olá"}]}
    b = {"id": "b", "name": "B", "on": [{"event": "ev"}], "steps": [{"id": "p", "prompt": "Fale."}]}
    w = World([tri, a, b], speak=[{"message": "B fala"}])
    r = w.turn(event="ev", key="e1")
    assert [m.text for m in r.messages] == ["Olá", "B fala"]
    assert "another-reply" not in codes(r)


def test_another_reply_keeps_after_ms_for_next_message():
    # own say never silences own talk; mention say silences the floor's talk on message turns
    tri = {"id": "tri", "name": "T", "on": [{"message": []}],
           "steps": [{"id": "q", "collect": ["nome"]}]}
    men = {"id": "m", "name": "M", "on": [{"mention": []}], "steps": [{"id": "s", "say": "Já volto"}]}
    w = World([tri, men], speak=[{"message": "Nome?", "nome": None}], understand=[{}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="oi", id="m2")
    # the mention detector already claimed once at m1 -> skipped; tri speaks
    assert [s.code for s in r.skipped] == ["already-claimed"]


def test_resume_at_phase5_fires_if_branch():
    a = {"id": "a", "name": "A", "on": [{"message": ["a"], "repeat": "always"}],
         "steps": [{"id": "qa", "prompt": "x", "collect": ["nome"],
                    "branches": [{"if": {"known": ["empresa"]}, "then": "fim"}]},
                   {"id": "fim", "say": "FIM"}]}
    b = {"id": "b", "name": "B", "on": [{"message": ["b"]}],
         "steps": [{"id": "qb", "collect": ["empresa"]}]}
    w = World([a, b], understand=[{"flows": {"a": 90}}, {"flows": {"b": 90}}],
              speak=[{"message": "Nome?", "nome": None}, {"message": "Empresa?", "empresa": "ACME"}])
    w.turn(message="a", id="m1")
    r = w.turn(message="b", id="m2")
    # b's speak envelope completed empresa; b ended; in Settle a resumes to asking (no branch check there)
    assert [e.flow_id for e in r.ended] == ["b"]
    assert w.run("a").status == "asking"


def test_staying_max_asks_reported_once():
    fl = {"id": "f", "name": "F", "on": [{"message": []}], "onEnd": "stay",
          "steps": [{"id": "a", "say": "Oi"}, {"id": "q", "prompt": "Converse", "collect": ["nome"], "maxAsks": 1}]}
    w = World([fl], understand=[{}, {}, {}],
              speak=[{"message": "Nome?", "nome": None}, {"message": "ok"}, {"message": "ok2"}])
    r = w.turn(message="oi", id="m1")
    assert w.run("f").asked == {"nome": 1}
    # the step asked once: maxAsks reached; not staying yet, so next message the step moves on
    r = w.turn(message="hm", id="m2")
    mx = [o for o in r.outcomes if o.code == "max-asks"]
    assert len(mx) == 1 and mx[0].detail == "nome"
    assert w.run("f").staying is True
    r = w.turn(message="hm", id="m3")
    assert "max-asks" not in codes(r)


def test_skip_form_say_once_claim_not_written():
    fl = {"id": "f", "name": "F", "on": [{"event": "ev"}], "steps": [{"id": "s", "say": "oi", "once": True}]}
    w = World([fl])
    r = w.turn(event="ev", key="e1", silenced={"reason": "janela", "skip": True})
    assert "f:s:s1" not in r.session.claims
    assert line(r, "silenced").next == "end"
    assert [e.reason for e in r.ended] == ["end"]


def test_skip_form_fixed_question_skipped():
    fl = {"id": "f", "name": "F", "on": [{"event": "ev"}],
          "steps": [{"id": "q", "collect": ["nome"], "question": "Nome?"}, {"id": "d", "do": "ok"}]}
    w = World([fl], actions=OK)
    r = w.turn(event="ev", key="e1", silenced={"reason": "janela", "skip": True})
    assert r.messages == []
    o = line(r, "silenced")
    assert (o.kind, o.status, o.next) == ("collect", "skipped", "d")
    assert r.session.runs == [] and r.ended[0].asked == {}


def test_skip_form_with_understand_true():
    fl = [{"id": "a", "name": "A", "on": [{"message": ["a"]}],
           "steps": [{"id": "s", "prompt": "x", "collect": ["nome"]}, {"id": "d", "do": "ok"}]},
          {"id": "b", "name": "B", "on": [{"message": ["b"]}], "steps": [{"id": "s", "prompt": "x"}]}]
    w = World(fl, actions=OK, understand=[{"flows": {"a": 90}, "fields": {"nome": "Ana"}}])
    r = w.turn(message="sou Ana", id="m1", silenced={"reason": "janela", "skip": True, "understand": True})
    assert r.llm_calls == 1 and r.session.data == {"nome": "Ana"}
    # nome is known: the collect step is already-known (not silenced) and the run moves on to d
    assert codes(r)[0] == "already-known"


def test_skip_form_asking_run_stays_asking():
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"},
                                                                       {"id": "d", "do": "ok"}], "onEnd": "stay"}
    w = World([tri], actions=OK, speak=[{"message": "Oi"}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="hm", id="m2", silenced={"reason": "janela", "skip": True})
    assert r.outcomes == [] and r.messages == []
    assert w.run("tri").status == "asking"


def test_message_premise_changed_ends_before_moving():
    state = {"ok": True}
    fl = {"id": "f", "name": "F", "on": [{"message": [], "if": lambda ctx: state["ok"]}],
          "steps": [{"id": "q", "prompt": "x"}], "onEnd": "stay"}
    w = World([fl], speak=[{"message": "Oi"}])
    w.turn(message="oi", id="m1")
    state["ok"] = False
    r = w.turn(message="hm", id="m2")
    o = line(r, "premise-changed")
    assert (o.kind, o.status, o.key) == ("prompt", "skipped", None)
    assert [e.reason for e in r.ended] == ["skipped"]


def test_run_outcomes_kept_50():
    fl = {"id": "f", "name": "F", "steps": [{"id": "a", "do": "ok"}, {"id": "b", "if": {"silenced": False},
                                                                       "then": "a", "else": "end"}]}
    w = World([fl], actions=OK)
    r = w.turn(start={"flow": "f", "key": "k"})
    assert len(r.ended[0].outcomes) == 50
    assert r.ended[0].outcomes[-1].code == "step-loop"


def test_hop_limit_on_chain():
    a = {"id": "a", "name": "A", "steps": [{"id": "x", "do": "ok", "then": {"flow": "a"}}]}
    w = World([a], actions=OK)
    r = w.turn(start={"flow": "a", "key": "k", "hop": 3})
    assert [e.hop for e in r.ended] == [3, 4]
    assert [s.code for s in r.skipped] == ["hop-limit"]
    assert r.skipped[0].trigger_key == "a#k:x:1:x:1" or r.skipped[0].trigger_key.endswith(":x:1")


def test_customer_replied_not_checked_on_message_turn():
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"}]}
    ret = {"id": "ret", "name": "R", "on": [{"silence": "1h"}],
           "steps": [{"id": "p", "prompt": "Sumiu?", "collect": ["nome"]}, {"id": "fim", "say": "fim"}]}
    w = World([tri, ret], speak=[{"message": "Oi"}, {"message": "Sumiu?", "nome": None},
                                 {"message": "Valeu", "nome": "Ana"}], understand=[{}])
    r = w.turn(message="oi", id="m1")
    w.clock.advance("1h")
    r = w.turn(wake=r.schedule[0].key)
    assert w.run("ret").status == "asking"
    r = w.turn(message="sou Ana", id="m2")
    assert "customer-replied" not in codes(r)
    assert [m.text for m in r.messages] == ["Valeu", "fim"]


def test_inputs_not_recorded_for_other_kinds():
    w = World([{"id": "f", "name": "F", "steps": [{"id": "w", "wait": "1h"}]}])
    r = w.turn(start={"flow": "f", "key": "k"})
    r = w.turn(wake=r.schedule[0].key)
    r = w.turn(event="x", key="e")
    assert r.session.inputs == []


def test_silence_two_flows_each_replaces_its_own():
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "x"}],
           "onEnd": "stay"}
    r1 = {"id": "r1", "name": "R1", "on": [{"silence": "1h"}], "steps": [{"id": "p", "prompt": "x"}]}
    r2 = {"id": "r2", "name": "R2", "on": [{"silence": "2h"}], "steps": [{"id": "p", "prompt": "x"}]}
    w = World([tri, r1, r2], speak=[{"message": "a"}, {"message": "b"}])
    a = w.turn(message="oi", id="m1")
    w.clock.advance("10m")
    b = w.turn(message="oi", id="m2")
    assert [(e.key.split(":")[1], e.replaces) for e in b.schedule] == [
        ("r1", a.schedule[0].key), ("r2", a.schedule[1].key)]


def test_idle_after_ms_and_short_wait_lost_when_no_message():
    fl = {"id": "f", "name": "F", "on": [{"event": "ev"}], "steps": [{"id": "p", "wait": "3s"},
                                                                     {"id": "q", "prompt": "x"}]}
    w = World([fl], speak=[{"message": "oi"}])
    r = w.turn(event="ev", key="e1", silenced="x")
    assert r.messages == []
    assert line(r, "inline-delay").detail == "3000ms"


def test_staying_if_branch_only_toward_targets_not_already_run():
    fl = {"id": "f", "name": "F", "on": [{"message": []}], "onEnd": "stay", "steps": [
        {"id": "q", "prompt": "Converse",
         "branches": [{"if": {"known": ["nome"]}, "then": "end"},
                      {"if": {"known": ["empresa"]}, "then": "vip"}]},
        {"id": "fim", "say": "fim", "then": "end"},
        {"id": "vip", "say": "VIP", "then": "end"}]}
    w = World([fl], speak=[{"message": "oi"}, {"message": "oi2"}, {"message": "oi3"}])
    w.turn(message="oi", id="m1")  # q speaks; prompt without collect moves on: fim says, stays at q
    run = w.run("f")
    assert run.staying is True and run.step_id == "q"
    w.session.data["nome"] = "Ana"
    r = w.turn(message="hm", id="m2")
    assert "branch" not in codes(r)  # toward 'end': already run
    w.session.data["empresa"] = "ACME"
    r = w.turn(message="hm", id="m3")
    assert line(r, "branch").next == "vip"
    assert [m.text for m in r.messages] == ["VIP"]


def test_async_action_and_tool_handlers():
    import asyncio

    async def act(params, ctx):
        await asyncio.sleep(0)
        return {"ok": True, "detail": "async"}

    async def tool(args, ctx):
        await asyncio.sleep(0)
        return {"value": "v"}
    fl = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "a"}, {"id": "p", "prompt": "x"}]}
    tc = {"message": "", "toolCalls": [{"toolName": "t", "arguments": {}}]}
    w = World([fl], actions={"a": {"run": act}}, tools=[{"id": "t", "handler": tool}],
              speak=[tc, {"message": "fim"}, tc, {"message": "fim"}])
    r = w.turn(start={"flow": "f", "key": "k1"})
    assert r.outcomes[0].detail == "async" and [m.text for m in r.messages] == ["fim"]

    async def go():
        return await w.agent.aturn(session_id="s2", start={"flow": "f", "key": "k1"})
    r = asyncio.run(go())
    assert r.outcomes[0].detail == "async" and [m.text for m in r.messages] == ["fim"]


def test_chained_child_of_reply_resolved_run_inherits_ingest_floor():
    seg = {"id": "seg", "name": "Seg", "steps": [{"id": "w", "wait": "1d", "else": {"flow": "funil"}},
                                                {"id": "x", "say": "sem"}]}
    funil = {"id": "funil", "name": "Funil", "steps": [{"id": "q", "collect": ["nome"]}]}
    vendas = {"id": "vendas", "name": "V", "on": [{"message": ["comprar"]}], "steps": [{"id": "v", "prompt": "x"}]}
    w = World([seg, funil, vendas], understand=[{"flows": {"vendas": 100}}],
              speak=[{"message": "Seu nome?", "nome": None}])
    w.turn(start={"flow": "seg", "key": "k"})
    r = w.turn(message="quero comprar", id="m1")
    assert [s.flow_id for s in r.started] == ["funil"]
    assert r.started[0].run_id == "funil#seg#k:w:1"
    assert [m.text for m in r.messages] == ["Seu nome?"] and r.messages[0].run_id == "funil#seg#k:w:1"
    assert w.run("funil").hop == 1 and w.run("funil").status == "asking"


def test_old_asker_when_branch_still_fires_after_route():
    a = {"id": "a", "name": "A", "on": [{"message": ["a"]}],
         "steps": [{"id": "qa", "prompt": "x", "branches": [{"when": "quer sair", "then": "fim"}]},
                   {"id": "fim", "say": "Tchau A"}], "onEnd": "stay"}
    b = {"id": "b", "name": "B", "on": [{"message": ["b"]}], "steps": [{"id": "qb", "prompt": "x"}]}
    w = World([a, b], understand=[{"flows": {"a": 90}}], speak=[{"message": "A1"}, {"message": "B1"}])
    w.turn(message="a", id="m1")
    w.understand({"flows": {"b": 90, "a": 0}, "branches": {"q1": True}})
    r = w.turn(message="b, e quero sair", id="m2")
    assert "branch" in codes(r)
    assert [m.text for m in r.messages][0] == "Tchau A"
