"""engine-turn.md §3.6 (advance): steps, follow, chains, onEnd, caps."""

from __future__ import annotations

from .turn_kit import HOUR, T0_MS, World, codes, line


def ok_action(log=None, result=None):
    def run(params, ctx):
        if log is not None:
            log.append((params, ctx.key, ctx.dedupe_key, ctx.input, ctx.run.id, ctx.silenced))
        return result if result is not None else {"ok": True}
    return {"run": run}


def test_do_ok_detail_and_ctx():
    log = []
    flow = {"id": "f", "name": "F", "steps": [
        {"id": "d", "do": "crm", "with": {"msg": "Oi {{data.nome}} {{input.x}} {{context.c}}"}}]}
    w = World([flow], actions={"crm": {"run": lambda p, c: log.append((p, c.key, c.dedupe_key, c.input, c.run.id,
                                                                        c.context, c.now)) or
                                       {"ok": True, "detail": "feito"}, "parameters": {"msg": {"type": "string"}}}})
    w.turn(event="x", key="x")
    w.session.data["nome"] = "Ana"
    r = w.turn(start={"flow": "f", "key": "k1", "input": {"x": "X"}}, context={"c": "C"})
    (p, key, dk, inp, rid, ctxc, now) = log[0]
    assert p == {"msg": "Oi Ana X C"}
    assert key == "f#k1:d:1" and dk == "f:s1:k1" and inp == {"x": "X"} and rid == "f#k1" and ctxc == {"c": "C"}
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.detail, o.key, o.next) == ("do", "ok", None, "feito", "f#k1:d:1", None)


def test_do_set_patches_data():
    flow = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "s"}]}
    w = World([flow], actions={"s": {"run": lambda p, c: c.set({"nome": "Bia", "livre": 1}) or {"ok": True}}})
    r = w.turn(start={"flow": "f", "key": "k"})
    assert r.session.data == {"nome": "Bia", "livre": 1}


def test_do_skipped_failed_thrown_unknown():
    def boom(p, c):
        raise RuntimeError("explodiu")
    flow = {"id": "f", "name": "F", "steps": [
        {"id": "a", "do": "skip", "then": "b"},
        {"id": "b", "do": "fail", "onFail": "c", "then": "end"},
        {"id": "c", "do": "boom"},
        {"id": "d", "do": "ok"}]}
    w = World([flow], actions={"skip": ok_action(result={"skipped": "sem motivo"}),
                               "fail": ok_action(result={"failed": "CRM caiu"}),
                               "boom": {"run": boom}, "ok": ok_action()})
    r = w.turn(start={"flow": "f", "key": "k"})
    got = [(o.step_id, o.kind, o.status, o.code, o.detail, o.next) for o in r.outcomes]
    assert got[0] == ("a", "do", "skipped", "action-skipped", "sem motivo", "b")
    assert got[1] == ("b", "do", "failed", "action-failed", "CRM caiu", "c")
    assert got[2][:4] == ("c", "do", "failed", "action-failed") and "explodiu" in got[2][4]
    assert got[2][5] is None
    assert got[3][:4] == ("d", "do", "ok", None)


def test_defer_that_is_not_a_duration_is_action_failed():
    # README ruling 2: detail names the action and the value; onFail is followed; nothing throws
    flow = {"id": "f", "name": "F", "steps": [{"id": "a", "do": "lazy", "onFail": "b"}, {"id": "x", "say": "x"},
                                              {"id": "b", "say": "falhou"}]}
    w = World([flow], actions={"lazy": ok_action(result={"defer": "amanhã", "detail": "x"})})
    r = w.turn(start={"flow": "f", "key": "k"})
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.next) == ("do", "failed", "action-failed", "b")
    assert "lazy" in o.detail and "amanhã" in o.detail
    assert [m.text for m in r.messages] == ["falhou"]
    assert r.schedule == [] or all(e.key.startswith("silence:") for e in r.schedule)


def test_do_spoke_true_sets_last_assistant_at_and_another_reply():
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome"]}]}
    det = {"id": "det", "name": "D", "on": [{"mention": []}], "steps": [{"id": "d", "do": "send"}]}
    w = World([tri, det], actions={"send": ok_action(result={"ok": True, "spoke": True})},
              speak=[{"message": "x", "nome": None}])
    r = w.turn(message="oi", id="m1")
    # the mention detector spoke (action), the catch-all's talk is another-reply
    assert r.messages == []
    assert line(r, "another-reply").key == "tri#m1:q:1"
    assert r.session.last_assistant_at is not None
    assert r.llm_calls == 0


def test_say_renders_media_once():
    flow = {"id": "f", "name": "F", "on": [{"event": "ev"}], "steps": [
        {"id": "oi", "say": "Olá {{data.nome}}{{context.sufixo}}!", "media": {"slug": "catalogo"}, "once": True}]}
    w = World([flow])
    w.turn(event="x", key="x")
    w.session.data["nome"] = "Ana"
    r = w.turn(event="ev", key="e1", context={"sufixo": "?"})
    (m,) = r.messages
    assert (m.text, m.kind, m.media, m.key, m.run_id, m.step_id, m.after_ms) == (
        "Olá Ana?!", "verbatim", {"slug": "catalogo"}, "f#e1:oi:1", "f#e1", "oi", 0)
    assert r.session.claims["f:oi:s1"] == {"at": "2026-09-20T10:00:00.000Z"}
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.key) == ("say", "ok", None, "f#e1:oi:1")
    r = w.turn(event="ev", key="e2")
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.key) == ("say", "skipped", "already-sent", "f#e2:oi:1")
    assert r.messages == []
    # claims.held also blocks
    w2 = World([flow])
    r = w2.turn(event="ev", key="e1", claims={"held": {"f:oi:s1": "2026-01-01T00:00:00.000Z"}, "active": []})
    assert codes(r)[0] == "already-sent"


def test_if_step_lines():
    flow = {"id": "f", "name": "F", "steps": [
        {"id": "c", "if": {"known": ["nome"]}, "else": "n"},
        {"id": "s", "say": "sim", "then": "end"},
        {"id": "n", "say": "não"}]}
    w = World([flow])
    r = w.turn(start={"flow": "f", "key": "k1"})
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.next, o.key) == ("if", "ok", None, "n", "f#k1:c:1")
    w.session.data["nome"] = "A"
    r = w.turn(start={"flow": "f", "key": "k2"})
    o = r.outcomes[0]
    assert (o.kind, o.next) == ("if", None)  # absent then: no next
    assert [m.text for m in r.messages] == ["sim"]


def test_if_false_no_else_ends():
    flow = {"id": "f", "name": "F", "steps": [{"id": "c", "if": {"known": ["nome"]}}, {"id": "s", "say": "sim"}]}
    w = World([flow])
    r = w.turn(start={"flow": "f", "key": "k1"})
    assert r.outcomes[0].next == "end"
    assert [e.reason for e in r.ended] == ["end"]


def test_flow_chain():
    a = {"id": "a", "name": "A", "steps": [{"id": "x", "say": "A", "then": {"flow": "{{data.dest}}"}}]}
    b = {"id": "b", "name": "B", "steps": [{"id": "y", "say": "B"}]}
    w = World([a, b])
    w.turn(event="x", key="x")
    w.session.data["dest"] = "b"
    r = w.turn(start={"flow": "a", "key": "k", "input": {"i": 1}})
    assert [m.text for m in r.messages] == ["A", "B"]
    assert [s.run_id for s in r.started] == ["a#k", "b#a#k:x:1"]
    assert r.started[1].dedupe_key == "b:s1:a#k:x:1"
    assert [(e.id, e.reason) for e in r.ended] == [("a#k", "flow"), ("b#a#k:x:1", "end")]
    child = r.ended[1]
    assert child.hop == 1 and child.trigger.kind == "flow" and child.input == {"i": 1}
    assert r.outcomes[0].next == "flow:{{data.dest}}" or r.outcomes[0].next == "flow:b"


def test_flow_chain_to_missing_flow():
    a = {"id": "a", "name": "A", "steps": [{"id": "x", "say": "A", "then": {"flow": "{{data.dest}}"}}]}
    w = World([a])
    w.turn(event="x", key="x")
    w.session.data["dest"] = "zz"
    r = w.turn(start={"flow": "a", "key": "k"})
    assert [(s.flow_id, s.anchor, s.trigger_key, s.code) for s in r.skipped] == [
        ("zz", "s1", "a#k:x:1", "flow-gone")]
    assert [e.reason for e in r.ended] == ["flow"]


def test_on_end_reset_hop_limit():
    log = []

    def first(params, ctx):
        if ctx.run.hop == 0:
            ctx.set({"nome": "fica"})
        return {"ok": True}
    flow = {"id": "r", "name": "R", "onEnd": "reset", "clearOnStart": ["nome"],
            "steps": [{"id": "a", "do": "first"}, {"id": "b", "do": "ok"}]}
    w = World([flow], actions={"ok": ok_action(log), "first": {"run": first}})
    r = w.turn(start={"flow": "r", "key": "k"})
    assert [e.reason for e in r.ended] == ["reset"] * 5
    assert [s.run_id for s in r.started] == ["r#k", "r#r#k:b:1", "r#r#r#k:b:1:b:1", "r#r#r#r#k:b:1:b:1:b:1",
                                            "r#r#r#r#r#k:b:1:b:1:b:1:b:1"]
    assert [e.hop for e in r.ended] == [0, 1, 2, 3, 4]
    assert [s.code for s in r.skipped] == ["hop-limit"]
    assert r.session.data["nome"] == "fica"


def test_step_loop():
    flow = {"id": "f", "name": "F", "steps": [
        {"id": "a", "do": "ok"}, {"id": "b", "if": {"silenced": False}, "then": "a", "else": "end"}]}
    w = World([flow], actions={"ok": ok_action()})
    r = w.turn(start={"flow": "f", "key": "k"})
    o = r.outcomes[-1]
    assert (o.code, o.status, o.key) == ("step-loop", "failed", None)
    assert o.kind in ("do", "if")
    assert len(r.outcomes) == 51
    assert [e.reason for e in r.ended] == ["failed"]


def test_step_gone_when_the_flow_was_edited_under_a_waiting_run():
    flow = {"id": "f", "name": "F", "steps": [{"id": "w", "wait": "1h"}, {"id": "b", "say": "B"}]}
    w = World([flow])
    r = w.turn(start={"flow": "f", "key": "k"})
    edited = World([{"id": "f", "name": "F", "steps": [{"id": "w2", "wait": "1h"}]}])
    edited.session = w.session
    r = edited.turn(wake=r.schedule[0].key)
    o = r.outcomes[-1]
    assert (o.code, o.status, o.key, o.run_id) == ("step-gone", "skipped", None, "f#k")
    assert [e.reason for e in r.ended] == ["skipped"]


def test_already_known_and_resuming_ok_lines():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "q1", "collect": ["nome"]}, {"id": "q2", "collect": ["empresa"]}, {"id": "fim", "say": "fim"}]}
    w = World([flow], speak=[{"message": "Nome?", "nome": None}],
              understand=[{}, {"fields": {"nome": "Ana", "empresa": "ACME"}}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="Ana da ACME", id="m2")
    got = [(o.step_id, o.kind, o.status, o.code, o.next, o.key) for o in r.outcomes]
    assert got[0] == ("q1", "collect", "ok", None, None, "f#m1:q1:1")  # resuming, moved without speaking
    assert got[1] == ("q2", "collect", "skipped", "already-known", None, "f#m1:q2:1")
    assert got[2][:3] == ("fim", "say", "ok")
    assert r.llm_calls == 1


def test_max_asks_flow():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "porte", "collect": ["tamanho"], "maxAsks": 2, "then": "fim"}, {"id": "fim", "say": "fim"}]}
    w = World([flow], speak=[{"message": "Porte?", "tamanho": None}, {"message": "Porte??", "tamanho": None}],
              understand=[{}, {}])
    r = w.turn(message="oi", id="m1")
    assert r.session.runs[0].asked == {"tamanho": 1}
    r = w.turn(message="hm", id="m2")
    assert r.session.runs[0].asked == {"tamanho": 2}
    assert [m.key for m in r.messages] == ["f#m1:porte:1"]  # same visit, same key
    r = w.turn(message="hm", id="m3")
    got = [(o.kind, o.status, o.code, o.detail, o.next, o.key) for o in r.outcomes]
    assert got[0] == ("collect", "skipped", "max-asks", "tamanho", None, "f#m1:porte:1")
    assert got[1] == ("collect", "ok", None, None, "fim", "f#m1:porte:1")
    assert [m.text for m in r.messages] == ["fim"]


def test_default_max_asks_3():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome"]}]}
    w = World([flow], speak=[{"message": "?", "nome": None}] * 3, understand=[{}] * 3)
    for i in range(3):
        w.turn(message="hm", id=f"m{i}")
    assert w.session.runs[0].asked == {"nome": 3}
    r = w.turn(message="hm", id="m9")
    assert codes(r)[0] == "max-asks"
    assert r.session.runs == []


def test_speak_envelope_fields_written_and_asked_counted_after():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome", "empresa"]}]}
    w = World([flow], speak=[{"message": "E a empresa?", "nome": "Ana", "empresa": None}])
    r = w.turn(message="sou a Ana", id="m1")
    assert r.session.data == {"nome": "Ana"}
    assert r.session.runs[0].asked == {"empresa": 1}
    env = w.provider.calls[0].input.parameters.json_schema
    assert set(env["properties"]) == {"message", "nome", "empresa"}
    assert set(env["required"]) == {"message", "nome", "empresa"}
    assert env["additionalProperties"] is False


def test_speak_completing_moves_on_and_drain_runs_after_speak():
    log = []
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "q", "collect": ["nome"]}, {"id": "d", "do": "ok"}, {"id": "s", "say": "Valeu"},
        {"id": "q2", "collect": ["empresa"]}]}
    w = World([flow], actions={"ok": ok_action(log)}, speak=[{"message": "Oi Ana", "nome": "Ana"}],
              understand=[{}])
    r = w.turn(message="sou a Ana", id="m1")
    assert [m.text for m in r.messages] == ["Oi Ana", "Valeu"]
    assert len(log) == 1
    run = r.session.runs[0]
    assert run.step_id == "q2" and run.status == "asking"
    assert r.llm_calls == 2
    # q2 reached after the speak call waits for the next message
    assert [o.step_id for o in r.outcomes] == ["q", "d", "s"]


def test_confirm_loop():
    flow = {"id": "triagem", "name": "Triagem", "on": [{"message": []}], "steps": [
        {"id": "quem", "collect": ["nome", "empresa"]},
        {"id": "confirma", "collect": ["confirmado"]},
        {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "quem", "clear": ["confirmado"]}},
        {"id": "tchau", "say": "Tchau"}]}
    w = World([flow], speak=[{"message": "Nome e empresa?", "nome": None, "empresa": None},
                             {"message": "Confirma?", "confirmado": None},
                             {"message": "Confirma de novo?", "confirmado": None}],
              understand=[{"fields": {"nome": "Ana", "empresa": "ACME"}}, {}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="Ana, ACME", id="m2")
    assert r.messages[0].key == "triagem#m1:confirma:1"
    w.speak()
    # a "no": the speak envelope of the asking step gets confirmado false
    w.provider._queues["speak"].appendleft({"message": "Hm, vamos corrigir", "confirmado": False})
    r = w.turn(message="não", id="m3")
    # confirma spoke (answer "no"), then ok's else clears confirmado and asked; quem skips; confirma asks again
    steps = [(o.step_id, o.code) for o in r.outcomes]
    assert ("quem", "already-known") in steps
    run = r.session.runs[0]
    assert run.step_id == "confirma" and run.visits["confirma"] == 2
    assert "confirmado" not in r.session.data
    assert run.asked.get("confirmado", 0) == 0
    assert run.status == "asking"


def test_on_end_stay_answers_every_message_new_visit():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "onEnd": "stay",
            "steps": [{"id": "q", "collect": ["nome"]}, {"id": "d", "say": "Pronto"}]}
    w = World([flow], speak=[{"message": "Nome?", "nome": "Ana"}, {"message": "Oi de novo"},
                             {"message": "De novo"}], understand=[])
    r = w.turn(message="sou Ana", id="m1")
    assert [m.text for m in r.messages] == ["Nome?", "Pronto"]
    run = r.session.runs[0]
    assert run.staying is True and run.status == "asking" and run.step_id == "q" and run.visits["q"] == 2
    r = w.turn(message="e aí", id="m2")
    assert [m.key for m in r.messages] == ["f#m1:q:2"]
    assert r.session.runs[0].visits["q"] == 3
    r = w.turn(message="e aí", id="m3")
    assert [m.key for m in r.messages] == ["f#m1:q:3"]


def test_on_end_stay_without_talk_step_ends():
    flow = {"id": "f", "name": "F", "onEnd": "stay", "steps": [{"id": "s", "say": "x"}]}
    w = World([flow])
    r = w.turn(start={"flow": "f", "key": "k"})
    assert [e.reason for e in r.ended] == ["end"]


def test_wake_reaching_talk_step_speaks_first():
    flow = {"id": "lembrete", "name": "Lembrete", "steps": [
        {"id": "espera", "wait": "1d"}, {"id": "aviso", "prompt": "Lembre."}]}
    w = World([flow], speak=[{"message": "Lembrete!"}])
    r = w.turn(start={"flow": "lembrete", "key": "k1"})
    assert r.llm_calls == 0
    assert [e.key for e in r.schedule] == [f"lembrete#k1:espera:{T0_MS + 24 * HOUR}"]
    w.clock.advance("1d")
    r = w.turn(wake=r.schedule[0].key)
    assert codes(r)[0] == "no-reply"
    assert [(m.text, m.key) for m in r.messages] == [("Lembrete!", "lembrete#k1:aviso:1")]
    assert r.llm_calls == 1
    assert "There is no new message" in w.provider.calls[0].prompt or "## Situation" in w.provider.calls[0].prompt
    assert r.session.last_assistant_at == "2026-09-21T10:00:00.000Z"


def test_event_turn_never_understands_and_asker_left_alone():
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["nome"]}]}
    w = World([tri], speak=[{"message": "Nome?", "nome": None}], events={"x": {}})
    w.turn(message="oi", id="m1")
    r = w.turn(event="x", key="e1")
    assert r.llm_calls == 0 and r.messages == [] and r.outcomes == []
    assert r.session.runs[0].status == "asking"


def test_stack_fall_through():
    # A asks; B takes the floor asking; B's last field arrives via understand and its tail is a do:
    # the suspended A answers the same message.
    a = {"id": "a", "name": "A", "on": [{"message": ["assunto a"], "repeat": "always"}],
         "steps": [{"id": "qa", "collect": ["nome"]}]}
    b = {"id": "b", "name": "B", "on": [{"message": ["assunto b"]}],
         "steps": [{"id": "qb", "collect": ["empresa"]}, {"id": "d", "do": "ok"}]}
    w = World([a, b], actions={"ok": ok_action()},
              understand=[{"flows": {"a": 90}}, {"flows": {"b": 90}}, {"fields": {"empresa": "ACME"}}],
              speak=[{"message": "Nome?", "nome": None}, {"message": "Empresa?", "empresa": None},
                     {"message": "E o nome?", "nome": None}])
    w.turn(message="assunto a", id="m1")
    r = w.turn(message="assunto b", id="m2")
    assert w.run("a").status == "suspended"
    r = w.turn(message="ACME", id="m3")
    assert [m.text for m in r.messages] == ["E o nome?"]
    assert r.messages[0].run_id == "a#m1"
    assert [e.flow_id for e in r.ended] == ["b"]
