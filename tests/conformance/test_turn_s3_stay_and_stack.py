"""engine-turn.md §3.6.7 (onEnd stay/reset), §3.10 (suspended stack) and §3.11.3 (premise),
following the upstream Runner's own expectations, driven through agent.turn()."""

from __future__ import annotations

from falai_django import Session

from .turn_kit import T0, World, codes

FIELDS = {"nome": {"type": "string", "ask": "Nome?"}, "modelo": {"type": "string", "ask": "Modelo?"},
          "confirmado": {"type": "boolean", "ask": "Confirme."}}
AI = {"lead": {"tags": ["vip"], "owner": "ai"}}


def setup(flows, **kw):
    calls = []

    def recorder(name):
        return {"run": lambda p, c: calls.append((name, c.key)) or {"ok": True}}
    actions = {n: recorder(n) for n in ("notify", "add_tags")}
    w = World(flows, fields=FIELDS, actions=actions, **kw)
    return w, calls


def known(data):
    return Session.from_json({"id": "s1", "v": 4, "version": 1, "data": data, "runs": [], "claims": {},
                              "inputs": [], "metadata": {}})


def statuses(r):
    return [(x.id, x.status) for x in r.session.runs]


def test_suspended_resume_is_lifo_by_suspended_at():
    tarde = {"id": "tarde", "name": "Tarde", "steps": [{"id": "w", "wait": "1h"},
                                                      {"id": "p", "prompt": "Fale.", "collect": ["confirmado"]}]}
    funil = {"id": "funil", "name": "Funil", "steps": [{"id": "q", "collect": ["nome"]}]}
    outro = {"id": "outro", "name": "Outro", "steps": [{"id": "q", "collect": ["modelo"]}]}
    w, _ = setup([tarde, funil, outro], speak=[{"message": "Seu nome?"}, {"message": "Oi, sou eu."},
                                              {"message": "Qual modelo?"}, {"message": "Anotado.", "modelo": None}],
                 understand=[{"fields": {"modelo": "iPhone 17"}}])
    t1 = w.turn(start={"flow": "tarde", "key": "a"})
    w.clock.advance("10m")
    t2 = w.turn(start={"flow": "funil", "key": "b"})
    assert statuses(t2) == [("tarde#a", "waiting"), ("funil#b", "asking")]
    w.clock.advance("50m")
    t3 = w.turn(wake=t1.schedule[0].key)
    assert statuses(t3) == [("tarde#a", "asking"), ("funil#b", "suspended")]
    assert t3.session.runs[1].suspended_at == "2026-09-20T11:00:00.000Z"
    w.clock.advance("10m")
    t4 = w.turn(start={"flow": "outro", "key": "c"})
    assert statuses(t4) == [("tarde#a", "suspended"), ("funil#b", "suspended"), ("outro#c", "asking")]
    w.clock.advance("10m")
    t5 = w.turn(message="iPhone 17", id="m1")
    assert [e.id for e in t5.ended] == ["outro#c"]
    assert statuses(t5) == [("tarde#a", "asking"), ("funil#b", "suspended")]
    assert t5.session.runs[0].suspended_at is None
    assert "suspendedAt" not in t5.session.to_json()["runs"][0]


GATE = {"id": "gate", "name": "Gate", "steps": [
    {"id": "c1", "collect": ["confirmado"]},
    {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "c1", "clear": ["confirmado"]}},
    {"id": "fim", "do": "notify"}]}


def test_false_if_clears_and_reenters_with_new_visit():
    w, _ = setup([GATE], speak=[{"message": "Confirma?", "confirmado": None}])
    w.session = known({"confirmado": False})
    r = w.turn(start={"flow": "gate", "key": "k"})
    assert [(o.kind, o.status, o.code, o.next) for o in r.outcomes[:2]] == [
        ("collect", "skipped", "already-known", None), ("if", "ok", None, "c1")]
    assert r.session.data == {}
    run = r.session.runs[0]
    assert run.visits == {"c1": 2, "ok": 1} and run.status == "asking"
    assert r.messages[0].key == "gate#k:c1:2"


def test_explicit_while_checked_on_first_move():
    fl = {"id": "w", "name": "W", "on": [{"message": ["x"]}], "while": {"known": ["nome"]},
          "steps": [{"id": "n", "do": "notify"}]}
    w, calls = setup([fl], idle="silent")
    r = w.turn(message="x", id="m1")
    assert calls == [] and codes(r) == ["premise-changed"]


def test_stale_session_runs_flow_gone_and_step_gone():
    w, _ = setup([GATE], idle="silent")
    run = {"anchor": "s1", "status": "running", "hop": 0, "startedAt": T0, "asked": {}, "visits": {}, "outcomes": []}
    w.session = Session.from_json({
        "id": "s1", "v": 4, "version": 1, "data": {}, "claims": {}, "inputs": [], "metadata": {},
        "runs": [{**run, "id": "gone#k", "flowId": "gone", "dedupeKey": "gone:s1:", "stepId": "x",
                  "trigger": {"kind": "start", "key": "k"}},
                 {**run, "id": "gate#k", "flowId": "gate", "dedupeKey": "gate:s1:", "stepId": "nope",
                  "trigger": {"kind": "start", "key": "k"}}]})
    r = w.turn(message="oi", id="m1")
    assert codes(r) == ["flow-gone", "step-gone"]
    assert [(e.id, e.reason) for e in r.ended] == [("gone#k", "skipped"), ("gate#k", "skipped")]


LEAD = {"id": "lead", "name": "Lead", "on": [{"message": ["quero"]}], "onEnd": "stay",
        "steps": [{"id": "q", "collect": ["nome"], "maxAsks": 2}, {"id": "avisa", "do": "notify"}]}


def _asked(extra_flows=(), **kw):
    w, calls = setup([LEAD, *extra_flows], **kw)
    w.understand({"flows": {"lead": 90}})
    w.speak({"message": "Qual seu nome?", "nome": None})
    w.turn(message="quero", id="m1")
    return w, calls


def test_stay_reply_that_fills_field_then_every_message_new_key():
    w, calls = _asked()
    w.understand({}, {}, {})
    w.speak({"message": "Prazer, Ana!", "nome": "Ana"}, {"message": "R$ 99."}, {"message": "Dois dias."})
    t2 = w.turn(message="Ana", id="m2")
    assert [m.key for m in t2.messages] == ["lead#m1:q:1"]
    assert calls == [("notify", "lead#m1:avisa:1")]
    run = t2.session.runs[0]
    assert (run.step_id, run.status, run.staying, run.visits) == ("q", "asking", True, {"q": 2, "avisa": 1})
    t3 = w.turn(message="e o preço?", id="m3")
    t4 = w.turn(message="e o prazo?", id="m4")
    assert [[m.key for m in t.messages] for t in (t3, t4)] == [["lead#m1:q:2"], ["lead#m1:q:3"]]
    assert len(calls) == 1 and t4.ended == []
    run = t4.session.runs[0]
    assert (run.status, run.staying, run.visits) == ("asking", True, {"q": 4, "avisa": 1})


def test_stay_understand_fills_field_and_step_answers_same_message():
    w, calls = _asked()
    w.understand({"fields": {"nome": "Ana"}})
    w.speak({"message": "Prazer, Ana!"})
    t2 = w.turn(message="sou a Ana", id="m2")
    assert [(o.step_id, o.status, o.key) for o in t2.outcomes] == [
        ("q", "ok", "lead#m1:q:1"), ("avisa", "ok", "lead#m1:avisa:1"), ("q", "ok", "lead#m1:q:2")]
    assert [(m.key, m.text) for m in t2.messages] == [("lead#m1:q:2", "Prazer, Ana!")]
    assert len(calls) == 1
    run = t2.session.runs[0]
    assert (run.status, run.staying, run.visits["q"]) == ("asking", True, 3)


def test_stay_max_asks_reported_once_and_every_message_answered():
    w, _ = _asked()
    w.understand({}, {}, {})
    w.speak({"message": "Sem problema.", "nome": None}, {"message": "Em que ajudo?"}, {"message": "R$ 99."})
    t2 = w.turn(message="hm", id="m2")
    t3 = w.turn(message="oi?", id="m3")
    t4 = w.turn(message="preço?", id="m4")
    assert [[m.key for m in t.messages] for t in (t2, t3, t4)] == [["lead#m1:q:1"], ["lead#m1:q:2"], ["lead#m1:q:3"]]
    mx = [o for t in (t2, t3, t4) for o in t.outcomes if o.code == "max-asks"]
    assert [(o.detail, o.step_id) for o in mx] == [("nome", "q")]


def test_stay_silenced_message_zero_calls():
    w, _ = _asked()
    w.understand({})
    w.speak({"message": "Prazer!", "nome": "Ana"})
    w.turn(message="Ana", id="m2")
    n = len(w.provider.calls)
    t3 = w.turn(message="oi", id="m3", silenced="pausa")
    assert t3.llm_calls == 0 and len(w.provider.calls) == n and t3.ended == []
    run = t3.session.runs[0]
    assert (run.status, run.staying, run.visits["q"]) == ("asking", True, 2)


def test_stay_silenced_understand_finishes_flow_without_a_word():
    w, calls = _asked()
    w.understand({"fields": {"nome": "Ana"}})
    t2 = w.turn(message="sou a Ana", id="m2", silenced={"reason": "pausa", "understand": True})
    assert t2.messages == [] and len(calls) == 1
    run = t2.session.runs[0]
    assert (run.status, run.staying, run.visits["q"]) == ("asking", True, 2)


def test_start_turn_leaves_staying_run_alone():
    tarefa = {"id": "tarefa", "name": "Tarefa", "steps": [{"id": "n", "do": "notify"}]}
    w, calls = _asked([tarefa])
    w.understand({})
    w.speak({"message": "Prazer!", "nome": "Ana"})
    t2 = w.turn(message="Ana", id="m2")
    t3 = w.turn(start={"flow": "tarefa", "key": "k"})
    assert [c[1] for c in calls] == ["lead#m1:avisa:1", "tarefa#k:n:1"]
    assert [x.to_json() if hasattr(x, "to_json") else x.model_dump() for x in t3.session.runs] == \
        [x.to_json() if hasattr(x, "to_json") else x.model_dump() for x in t2.session.runs]


def test_stay_when_branch_moves_run_and_it_stops_staying():
    menu = {"id": "menu", "name": "Menu", "on": [{"message": ["oi"]}], "onEnd": "stay", "steps": [
        {"id": "h", "collect": ["nome"]},
        {"id": "r", "prompt": "Responda.", "branches": [{"when": "é outra pessoa",
                                                         "then": {"step": "h", "clear": ["nome"]}}]}]}
    w, _ = setup([menu], understand=[{"flows": {"menu": 90}}], speak=[{"message": "Oi, Ana!"}])
    w.session = known({"nome": "Ana"})
    t1 = w.turn(message="oi", id="m1")
    run = t1.session.runs[0]
    assert (run.step_id, run.status, run.staying) == ("r", "asking", True)
    w.understand({"branches": {"menu#m1/r/0": True}})
    w.speak({"message": "Como se chama?", "nome": None})
    t2 = w.turn(message="não sou a Ana", id="m2")
    assert t2.session.data == {}
    run = t2.session.runs[0]
    assert run.step_id == "h" and run.staying is None
    assert [m.step_id for m in t2.messages] == ["h"]
    assert "nome" in w.provider.calls[-1].input.parameters.json_schema["properties"]


def test_stay_say_on_the_way_is_the_answer():
    fl = {"id": "lead", "name": "Lead", "on": [{"message": ["quero"]}], "onEnd": "stay",
          "steps": [{"id": "q", "collect": ["nome"]}, {"id": "s", "say": "Obrigado!"}]}
    w, _ = setup([fl], understand=[{"flows": {"lead": 90}}, {"fields": {"nome": "Ana"}}],
                 speak=[{"message": "Nome?", "nome": None}, {"message": "R$ 99."}])
    w.turn(message="quero", id="m1")
    t2 = w.turn(message="sou a Ana", id="m2")
    assert [(m.kind, m.key) for m in t2.messages] == [("verbatim", "lead#m1:s:1")]
    run = t2.session.runs[0]
    assert (run.step_id, run.status, run.staying) == ("q", "asking", True)
    t3 = w.turn(message="e o preço?", id="m3")
    assert [(m.kind, m.key) for m in t3.messages] == [("ai", "lead#m1:q:2")]


def test_stay_if_branch_taken_on_the_way_not_judged_again():
    fl = {"id": "confirma", "name": "Confirma", "on": [{"message": ["quero"]}], "onEnd": "stay", "steps": [
        {"id": "q", "collect": ["confirmado"], "branches": [{"if": {"equals": {"confirmado": True}}, "then": "avisa"}]},
        {"id": "avisa", "do": "notify", "then": "end"}]}
    w, calls = setup([fl], understand=[{"flows": {"confirma": 90}}],
                     speak=[{"message": "Confirma?", "confirmado": None}, {"message": "Combinado!", "confirmado": True},
                            {"message": "Já te chamam."}, {"message": "Até já."}])
    w.turn(message="quero", id="m1")
    w.turn(message="sim", id="m2")
    t3 = w.turn(message="e agora?", id="m3")
    t4 = w.turn(message="ok", id="m4")
    assert [c[1] for c in calls] == ["confirma#m1:avisa:1"]
    assert [[m.key for m in t.messages] for t in (t3, t4)] == [["confirma#m1:q:2"], ["confirma#m1:q:3"]]


def test_stay_on_own_path_talk_step():
    menu = {"id": "menu", "name": "Menu", "on": [{"message": ["oi"]}], "onEnd": "stay", "steps": [
        {"id": "q", "collect": ["confirmado"], "branches": [{"when": "quer comprar", "then": "sim"},
                                                          {"when": "quer suporte", "then": "nao"}]},
        {"id": "sim", "prompt": "Venda.", "then": "end"},
        {"id": "nao", "prompt": "Resolva.", "then": "end"}]}
    w, _ = setup([menu], understand=[{"flows": {"menu": 90}}, {"branches": {"menu#m1/q/0": True}}],
                 speak=[{"message": "Quer comprar?", "confirmado": None}, {"message": "Ótimo!"}, {"message": "R$ 99."}])
    w.turn(message="oi", id="m1")
    t2 = w.turn(message="quero comprar", id="m2")
    assert [m.step_id for m in t2.messages] == ["sim"]
    run = t2.session.runs[0]
    assert (run.step_id, run.staying) == ("sim", True)
    t3 = w.turn(message="e o preço?", id="m3")
    assert [m.step_id for m in t3.messages] == ["sim"]


def test_stay_finishing_while_another_asks_waits_suspended():
    modelo = {"id": "modelo", "name": "Modelo", "on": [{"message": ["carro"]}], "steps": [{"id": "m",
                                                                                          "collect": ["modelo"]}]}
    w, calls = setup([LEAD, modelo], understand=[{"flows": {"modelo": 90}}, {}],
                     speak=[{"message": "Qual modelo?", "modelo": None}, {"message": "Anotado!", "modelo": "Corolla"}])
    w.session = known({"nome": "Ana"})
    w.turn(message="carro", id="m1")
    t2 = w.turn(start={"flow": "lead", "key": "k"})
    assert [c[1] for c in calls] == ["lead#k:avisa:1"]
    assert statuses(t2) == [("modelo#m1", "asking"), ("lead#k", "suspended")]
    t3 = w.turn(message="Corolla", id="m3")
    assert [m.key for m in t3.messages] == ["modelo#m1:m:1"]
    assert [(x.id, x.status, x.step_id) for x in t3.session.runs] == [("lead#k", "asking", "q")]


def test_routed_message_answered_by_new_run_and_asker_suspended():
    modelo = {"id": "modelo", "name": "Modelo", "on": [{"message": ["carro"]}], "steps": [{"id": "m",
                                                                                          "collect": ["modelo"]}]}
    w, _ = setup([modelo, LEAD], understand=[{"flows": {"modelo": 90}}, {"flows": {"lead": 90}, "fields": {"nome": "Ana"}}],
                 speak=[{"message": "Qual modelo?", "modelo": None}, {"message": "Prazer, Ana!"}])
    w.turn(message="carro", id="m1")
    t2 = w.turn(message="quero, sou a Ana", id="m2")
    assert [m.run_id for m in t2.messages] == ["lead#m2"]
    assert statuses(t2) == [("modelo#m1", "suspended"), ("lead#m2", "asking")]


def test_silenced_wake_talk_ends_and_start_say_skipped():
    nudge = {"id": "nudge", "name": "Nudge", "steps": [{"id": "w", "wait": "1h"}, {"id": "p", "prompt": "Cutuque."}]}
    tarefa = {"id": "tarefa", "name": "Tarefa", "steps": [{"id": "n", "do": "notify"}, {"id": "s", "say": "Feito."}]}
    w, calls = setup([nudge, tarefa])
    t1 = w.turn(start={"flow": "nudge", "key": "k"})
    w.clock.advance("1h")
    t2 = w.turn(wake=t1.schedule[0].key, silenced="pausa")
    assert [(e.id, e.reason) for e in t2.ended] == [("nudge#k", "skipped")]
    last = t2.outcomes[-1]
    assert (last.kind, last.status, last.code, last.detail, last.step_id) == ("prompt", "skipped", "silenced",
                                                                             "pausa", "p")
    t3 = w.turn(start={"flow": "tarefa", "key": "k2"}, silenced="pausa")
    assert [c[1] for c in calls] == ["tarefa#k2:n:1"] and t3.messages == []
    assert [(o.kind, o.status, o.code, o.detail) for o in t3.outcomes] == [
        ("do", "ok", None, None), ("say", "skipped", "silenced", "pausa")]


def test_silenced_asking_run_changed_true():
    tri = {"id": "triagem", "name": "T", "on": [{"message": ["quer"]}],
           "steps": [{"id": "quem", "collect": ["nome"]}, {"id": "avisa", "do": "notify"}]}
    w, _ = setup([tri], understand=[{"flows": {"triagem": 90}}], speak=[{"message": "Nome?", "nome": None}])
    w.turn(message="quer", id="m1")
    t2 = w.turn(message="oi", id="m2", silenced="humano no comando")
    assert w.names() == ["understand", "speak"]
    run = t2.session.runs[0]
    assert (run.id, run.status, run.step_id) == ("triagem#m1", "asking", "quem")
    assert t2.messages == [] and t2.llm_calls == 0 and t2.changed is True
