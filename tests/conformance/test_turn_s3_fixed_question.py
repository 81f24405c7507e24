"""Fixed `question` (engine-turn.md §3.6.5, README ruling 1)."""

from __future__ import annotations

from .turn_kit import T0, World, codes, line

Q = "Qual é o seu nome completo?"


def qflow(on=None, **kw):
    return {"id": "cad", "name": "Cadastro", "on": on if on is not None else [{"event": "ev"}],
            "steps": [{"id": "nome", "collect": ["nome"], "question": Q}, {"id": "fim", "say": "Obrigado"}], **kw}


def test_fresh_on_event_goes_verbatim_without_call():
    w = World([qflow()])
    r = w.turn(event="ev", key="e1")
    assert r.llm_calls == 0 and w.provider.calls == []
    (m,) = r.messages
    assert (m.text, m.kind, m.key, m.run_id, m.step_id, m.after_ms) == (Q, "verbatim", "cad#e1:nome:1", "cad#e1",
                                                                         "nome", 0)
    o = line(r, "asked-fixed")
    assert (o.kind, o.status, o.key, o.step_id, o.run_id) == ("collect", "ok", "cad#e1:nome:1", "nome", "cad#e1")
    assert o.llm_calls is None
    run = r.session.runs[0]
    assert run.asked == {"nome": 1} and run.status == "asking"
    assert r.session.last_assistant_at == T0


def test_question_is_rendered():
    fl = qflow()
    fl["steps"][0]["question"] = "Oi {{context.saud}}, seu nome?"
    w = World([fl])
    r = w.turn(event="ev", key="e1", context={"saud": "Bia"})
    assert r.messages[0].text == "Oi Bia, seu nome?"


def test_later_asks_are_ai_phrased():
    w = World([qflow()], speak=[{"message": "Pode me dizer seu nome?", "nome": None}], understand=[{}])
    w.turn(event="ev", key="e1")
    r = w.turn(message="hm", id="m1")
    assert [(m.text, m.kind) for m in r.messages] == [("Pode me dizer seu nome?", "ai")]
    assert "asked-fixed" not in codes(r)
    assert r.session.runs[0].asked == {"nome": 2}


def _msg_world(asks, speak=()):
    flows = [qflow(on=[{"message": ["cadastro"]}]),
             {"id": "outro", "name": "Outro", "on": [{"message": ["outro"]}], "steps": [{"id": "o", "prompt": "x"}]}]
    und = {"flows": {"cad": 90}}
    if asks is not None:
        und["asks"] = asks
    return World(flows, understand=[und], speak=list(speak))


def test_asks_property_in_understand_request():
    w = _msg_world(False)
    w.turn(message="quero me cadastrar", id="m1")
    schema = w.provider.calls[0].input.parameters.json_schema
    assert "asks" in schema["properties"]
    t = schema["properties"]["asks"]["type"]
    assert t == "boolean" or "boolean" in t
    assert "asks" in schema["required"]


def test_asks_false_only_verbatim():
    w = _msg_world(False)
    r = w.turn(message="quero me cadastrar", id="m1")
    assert w.names() == ["understand"]
    assert r.llm_calls == 1
    assert [(m.text, m.kind) for m in r.messages] == [(Q, "verbatim")]
    assert codes(r).count("asked-fixed") == 1
    assert r.session.runs[0].asked == {"nome": 1}


def test_asks_true_answers_then_question_verbatim():
    w = _msg_world(True, speak=[{"message": "Claro, funciona assim."}])
    r = w.turn(message="como funciona o cadastro?", id="m1")
    assert w.names() == ["understand", "speak"]
    assert r.llm_calls == 2
    assert [(m.text, m.kind) for m in r.messages] == [("Claro, funciona assim.", "ai"), (Q, "verbatim")]
    assert {m.key for m in r.messages} == {"cad#m1:nome:1"}
    env = w.provider.calls[1].input.parameters.json_schema
    assert set(env["properties"]) == {"message"}
    assert Q in w.provider.calls[1].prompt
    run = r.session.runs[0]
    assert run.asked == {"nome": 1} and run.status == "asking"


def test_asks_not_judged_answers_then_question():
    # catch-all alone: nothing else to judge, so no understand call and `asks` is never judged
    fl = qflow(on=[{"message": []}])
    w = World([fl], speak=[{"message": "Olá!"}], understand=[{}])
    r = w.turn(message="oi", id="m1")
    assert w.names()[-1] == "speak"
    assert [(m.text, m.kind) for m in r.messages] == [("Olá!", "ai"), (Q, "verbatim")]
    assert r.session.runs[0].asked == {"nome": 1}


def test_question_after_speak_goes_verbatim_same_turn():
    fl = {"id": "cad", "name": "Cadastro", "on": [{"event": "ev"}],
          "steps": [{"id": "boas", "prompt": "Dê boas-vindas."},
                    {"id": "nome", "collect": ["nome"], "question": Q}]}
    w = World([fl], speak=[{"message": "Bem-vindo!"}])
    r = w.turn(event="ev", key="e1")
    assert r.llm_calls == 1
    assert [(m.text, m.kind) for m in r.messages] == [("Bem-vindo!", "ai"), (Q, "verbatim")]
    assert line(r, "asked-fixed").key == "cad#e1:nome:1"


def test_no_question_when_a_field_is_already_known():
    fl = {"id": "cad", "name": "Cadastro", "on": [{"event": "ev"}],
          "steps": [{"id": "q", "collect": ["nome", "empresa"], "question": Q}]}
    w = World([fl], speak=[{"message": "E a empresa?", "empresa": None}])
    w.turn(event="x", key="x")
    w.session.data["nome"] = "Ana"
    r = w.turn(event="ev", key="e1")
    assert [(m.text, m.kind) for m in r.messages] == [("E a empresa?", "ai")]
    assert "asked-fixed" not in codes(r)


def test_question_again_after_clear():
    fl = {"id": "cad", "name": "Cadastro", "on": [{"event": "ev"}],
          "steps": [{"id": "q", "collect": ["confirmado"], "question": "Confirma?"},
                    {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "q", "clear": ["confirmado"]}},
                    {"id": "fim", "say": "Fim"}]}
    w = World([fl], understand=[{}], speak=[{"message": "Entendi, vamos de novo.", "confirmado": False}])
    r = w.turn(event="ev", key="e1")
    assert r.messages[0].text == "Confirma?"
    r = w.turn(message="não", id="m1")
    # the asking step spoke (its envelope wrote confirmado false), the if clears it and re-enters q:
    # the fixed question goes out again, verbatim, no further call
    assert [(m.text, m.kind) for m in r.messages] == [("Entendi, vamos de novo.", "ai"), ("Confirma?", "verbatim")]
    assert r.messages[1].key == "cad#e1:q:2"
    assert r.session.runs[0].asked == {"confirmado": 1}


def test_silenced_question_does_not_go_out():
    w = World([qflow()])
    r = w.turn(event="ev", key="e1", silenced="humano")
    assert r.messages == []
    assert line(r, "silenced").detail == "humano"


def test_last_talk_step_reached_is_the_speaker():
    # mention runs start before the routed run (§3.5), so the routed catch-all's talk step is reached
    # last in phase 5: it speaks, and the mention run's question step is suspended unasked
    tri = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [{"id": "q", "collect": ["empresa"]}]}
    det = {"id": "det", "name": "D", "on": [{"mention": []}],
           "steps": [{"id": "nome", "collect": ["nome"], "question": Q}]}
    w = World([tri, det], speak=[{"message": "Empresa?", "empresa": None}])
    r = w.turn(message="oi", id="m1")
    assert [(m.text, m.kind) for m in r.messages] == [("Empresa?", "ai")]
    assert [x.id for x in r.session.runs] == ["det#m1", "tri#m1"]
    assert w.run("det").status == "suspended" and w.run("det").asked == {}
    assert w.run("tri").status == "asking"


def test_catch_all_question_not_an_asks_trigger_but_reply_asks_honoured():
    # T18: the catch-all is not an eligible message flow, so `asks` is not requested for it;
    # an `asks: false` that comes back anyway still means "only the verbatim question"
    fl = qflow(on=[{"message": []}])
    fl["collect"] = ["nome", "empresa"]
    w = World([fl], understand=[{"asks": False}])
    r = w.turn(message="oi", id="m1")
    schema = w.provider.calls[0].input.parameters.json_schema
    assert "asks" not in schema["properties"]
    assert [(m.text, m.kind) for m in r.messages] == [(Q, "verbatim")]
    assert r.llm_calls == 1
