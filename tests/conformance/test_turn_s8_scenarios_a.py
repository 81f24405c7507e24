"""engine-turn.md §8 and §5: the upstream scenario behaviours (S1, S2, S12, S13, S14), re-expressed
against the Python API from the spec's rules (keys, calls, outcome codes)."""

from __future__ import annotations

from falai_django import Session

from .turn_kit import DAY, T0, T0_MS, World, codes

FIELDS = {
    "nome": {"type": "string", "ask": "Pergunte o nome."},
    "empresa": {"type": "string", "ask": "Pergunte a empresa."},
    "tamanho": {"type": "string", "enum": ["1-10", "11-50", "51-200", "200+"], "ask": "Pergunte o porte."},
    "urgencia": {"type": "string", "enum": ["agora", "30 dias", "sem prazo"], "ask": "Pergunte o prazo."},
    "orcamento": {"type": "number", "ask": "Pergunte a faixa."},
    "confirmado": {"type": "boolean", "ask": "Resuma e pergunte se está certo."},
    "modelo": {"type": "string", "ask": "Pergunte o modelo."},
}
AI = {"lead": {"owner": "ai", "tags": ["vip"]}}
HUMAN = {"lead": {"owner": "human", "tags": ["vip"]}}


def TRIAGEM(**over):
    fl = {"id": "triagem", "name": "Triagem", "description": "Quer saber se serve para a empresa",
          "on": [{"message": ["quer saber como funciona", "pede um orçamento"]}],
          "steps": [
              {"id": "quem", "prompt": "Descubra quem é e de onde fala.", "collect": ["nome", "empresa"]},
              {"id": "porte", "collect": ["tamanho", "urgencia"]},
              {"id": "grana", "collect": ["orcamento"], "maxAsks": 2},
              {"id": "confirma", "collect": ["confirmado"]},
              {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "quem", "clear": ["confirmado"]}},
              {"id": "avisa", "do": "notify", "with": {"recipient": "vendedor", "message":
                  "Lead: {{data.nome}} ({{data.empresa}}), {{data.tamanho}}, {{data.urgencia}}."}},
              {"id": "tchau", "prompt": "Agradeça."}]}
    fl.update(over)
    return fl


SUPORTE = {"id": "suporte", "name": "Suporte", "on": [{"message": ["algo não funciona"]}],
           "steps": [{"id": "p", "prompt": "Peça detalhes."}]}
RETOMAR = {"id": "retomar", "name": "Retomar", "on": [{"silence": "24h", "if": lambda c: c.context["lead"]["owner"] == "ai"}],
           "steps": [
               {"id": "gate", "if": {"silenced": True}, "then": "lembra", "else": "p1"},
               {"id": "p1", "prompt": "Retome."},
               {"id": "w1", "wait": "2d", "else": "end"},
               {"id": "p2", "prompt": "Última tentativa."},
               {"id": "w2", "wait": "3d", "else": "end"},
               {"id": "n1", "do": "notify", "with": {"recipient": "v", "message": "{{data.nome}} sumiu"}, "then": "end"},
               {"id": "lembra", "do": "notify", "with": {"recipient": "v", "message": "Follow-up com {{data.nome}}."}}]}


def build(flows, **kw):
    calls = []

    def notify(params, ctx):
        calls.append((ctx.key, ctx.dedupe_key, params))
        return {"ok": True}
    w = World(flows, fields=FIELDS, actions={"notify": {"run": notify, "parameters": {
        "recipient": {"type": "string"}, "message": {"type": "string"}}}}, **kw)
    return w, calls


def msg(w, text, mid, **kw):
    kw.setdefault("context", AI)
    return w.turn(message=text, id=mid, **kw)


def test_s1_triagem_happy_path():
    w, calls = build([TRIAGEM(), SUPORTE],
                     understand=[{"flows": {"triagem": 92, "suporte": 8}},
                                 {"fields": {"nome": "Ana", "empresa": "Zeta", "tamanho": "11-50"}},
                                 {"fields": {"urgencia": "agora"}}, {}, {}, {}, {}],
                     speak=[{"message": "Com quem falo?"}, {"message": "Para quando?"}, {"message": "Faixa?"},
                            {"message": "Pode estimar."}, {"message": "Está certo?"},
                            {"message": "Perfeito!", "confirmado": True}, {"message": "Obrigada!"}])
    t1 = msg(w, "oi, quero saber como funciona", "m1")
    assert t1.llm_calls == 2 and [s.run_id for s in t1.started] == ["triagem#m1"]
    assert [(m.text, m.kind, m.after_ms, m.key) for m in t1.messages] == [
        ("Com quem falo?", "ai", 0, "triagem#m1:quem:1")]
    assert w.run("triagem").asked == {"nome": 1, "empresa": 1}
    t2 = msg(w, "Sou a Ana, da Zeta. Somos uns 30.", "m2")
    assert t2.llm_calls == 2
    assert t2.session.data == {"nome": "Ana", "empresa": "Zeta", "tamanho": "11-50"}
    run = w.run("triagem")
    assert run.step_id == "porte" and run.asked == {"nome": 1, "empresa": 1, "urgencia": 1}
    assert [(o.step_id, o.status) for o in t2.outcomes] == [("quem", "ok"), ("porte", "ok")]
    t3 = msg(w, "para agora", "m3")
    assert w.run("triagem").step_id == "grana" and w.run("triagem").asked["orcamento"] == 1
    msg(w, "não sei", "m4")
    assert w.run("triagem").asked["orcamento"] == 2
    t5 = msg(w, "prefiro não dizer", "m5")
    assert t5.llm_calls == 2
    mx = [o for o in t5.outcomes if o.code == "max-asks"]
    assert [(o.detail, o.step_id) for o in mx] == [("orcamento", "grana")]
    assert w.run("triagem").step_id == "confirma" and w.run("triagem").asked["confirmado"] == 1
    assert "orcamento" not in w.session.data
    t6 = msg(w, "tá certo", "m6")
    assert t6.session.data["confirmado"] is True
    assert calls == [("triagem#m1:avisa:1", "triagem:s1:",
                      {"recipient": "vendedor", "message": "Lead: Ana (Zeta), 11-50, agora."})]
    run = w.run("triagem")
    assert run.step_id == "tchau" and run.status == "asking"
    t7 = msg(w, "obrigada", "m7")
    assert [m.text for m in t7.messages] == ["Obrigada!"]
    assert [(e.id, e.reason) for e in t7.ended] == [("triagem#m1", "end")]
    assert t7.session.runs == [] and list(t7.session.claims) == ["triagem:s1:"]
    assert w.provider.remaining() == {"understand": 0, "speak": 0, "summary": 0}
    assert t3


def test_s1_correction_clears_disputed_fields():
    tri = TRIAGEM(id="triagem2")
    tri["steps"][4] = {"id": "ok", "if": {"equals": {"confirmado": True}},
                       "else": {"step": "quem", "clear": ["confirmado", "empresa"]}}
    w, _ = build([tri], understand=[{"fields": {"empresa": "Zeta Labs"}}],
                 speak=[{"message": "Anotei errado?", "confirmado": False}, {"message": "Confere agora?"}])
    w.session = Session.from_json({
        "id": "s1", "v": 4, "version": 3,
        "data": {"nome": "Ana", "empresa": "Zeta", "tamanho": "11-50", "urgencia": "agora", "orcamento": 5000},
        "runs": [{"id": "triagem2#m1", "flowId": "triagem2", "anchor": "s1", "dedupeKey": "triagem2:s1:",
                  "stepId": "confirma", "status": "asking", "trigger": {"kind": "message", "key": "m1"}, "hop": 0,
                  "startedAt": "2026-09-20T09:00:00.000Z", "asked": {"confirmado": 1},
                  "visits": {"quem": 1, "porte": 1, "grana": 1, "confirma": 1}, "outcomes": []}],
        "claims": {"triagem2:s1:": {"at": "2026-09-20T09:00:00.000Z"}}, "inputs": ["m1"], "metadata": {}})
    t1 = msg(w, "não, a empresa está errada", "m2")
    assert t1.llm_calls == 1
    assert t1.session.data == {"nome": "Ana", "tamanho": "11-50", "urgencia": "agora", "orcamento": 5000}
    assert [(o.step_id, o.status, o.code) for o in t1.outcomes] == [("confirma", "ok", None), ("ok", "ok", None)]
    run = t1.session.runs[0]
    assert run.step_id == "quem" and run.status == "asking"
    assert run.visits == {"quem": 2, "porte": 1, "grana": 1, "confirma": 1, "ok": 1}
    t2 = msg(w, "é Zeta Labs", "m3")
    assert t2.llm_calls == 2 and t2.session.data["empresa"] == "Zeta Labs"
    assert [(o.step_id, o.status, o.code) for o in t2.outcomes] == [
        ("quem", "ok", None), ("porte", "skipped", "already-known"), ("grana", "skipped", "already-known"),
        ("confirma", "ok", None)]
    assert t2.messages[0].text == "Confere agora?"
    assert t2.session.runs[0].visits["confirma"] == 2


def test_s2_retomar():
    w, _ = build([TRIAGEM(), RETOMAR],
                 understand=[{"flows": {"triagem": 90}, "fields": {"nome": "Ana"}}, {}],
                 speak=[{"message": "Oi Ana! Empresa?"}, {"message": "Ainda faz sentido?"},
                        {"message": "Ótimo! E a empresa?"}])
    t1 = msg(w, "oi, sou a Ana", "m1")
    key = f"silence:retomar:s1:{T0_MS}"
    assert [(e.key, e.replaces) for e in t1.schedule] == [(key, None)]
    assert t1.schedule[0].at.timestamp() * 1000 == T0_MS + DAY
    w.clock.advance("24h")
    t2 = w.turn(wake=key, context=AI, history=[])
    assert t2.llm_calls == 1 and w.provider.calls[-1].schema_name == "speak"
    assert "There is no new message from the customer" in w.provider.calls[-1].prompt
    assert [s.flow_id for s in t2.started] == ["retomar"]
    assert [(m.text, m.key, m.run_id, m.step_id) for m in t2.messages] == [
        ("Ainda faz sentido?", f"retomar#{T0_MS}:p1:1", f"retomar#{T0_MS}", "p1")]
    ret = w.run("retomar")
    now = T0_MS + DAY
    assert ret.step_id == "w1" and ret.status == "waiting" and ret.waiting.kind == "timer"
    assert w.run("triagem").status == "asking"
    assert [e.key for e in t2.schedule] == [f"retomar#{T0_MS}:w1:{now + 2 * DAY}"]
    w.clock.advance("3h")
    t3 = msg(w, "faz sim!", "m2")
    assert [(e.flow_id, e.reason) for e in t3.ended] == [("retomar", "end")]
    wl = next(o for o in t3.outcomes if o.kind == "wait")
    assert (wl.status, wl.code, wl.next) == ("ok", "replied", "end")
    assert [m.text for m in t3.messages] == ["Ótimo! E a empresa?"]
    assert t3.llm_calls == 2
    assert t3.schedule == [] or all(e.key.startswith("silence:") for e in t3.schedule)


def test_s2_silenced_wake_with_human_owner_is_unchanged():
    w, calls = build([TRIAGEM(), RETOMAR], understand=[{"flows": {"triagem": 90}, "fields": {"nome": "Ana"}}],
                     speak=[{"message": "Oi"}])
    t1 = msg(w, "oi, sou a Ana", "m1")
    w.clock.advance("24h")
    t2 = w.turn(wake=t1.schedule[0].key, context=HUMAN, silenced="humano no comando")
    assert t2.llm_calls == 0 and t2.messages == [] and t2.started == [] and t2.skipped == []
    assert calls == [] and t2.changed is False


def test_s2_silenced_pause_gate_notifies():
    w, calls = build([TRIAGEM(), RETOMAR], understand=[{"flows": {"triagem": 90}, "fields": {"nome": "Ana"}}],
                     speak=[{"message": "Oi"}])
    t1 = msg(w, "oi, sou a Ana", "m1")
    w.clock.advance("24h")
    t2 = w.turn(wake=t1.schedule[0].key, context=AI, silenced="pausa")
    assert t2.llm_calls == 0 and t2.messages == []
    assert calls == [(f"retomar#{T0_MS}:lembra:1", "retomar:s1:", {"recipient": "v", "message": "Follow-up com Ana."})]
    assert [(e.flow_id, e.reason) for e in t2.ended] == [("retomar", "end")]


LEMBRETE = {"id": "lembrete", "name": "Lembrete", "on": [{"event": "meeting_booked", "after": "10m"}],
            "instructions": [{"kind": "must", "prompt": "Cite a data exata."}],
            "steps": [{"id": "n", "do": "notify", "with": {"recipient": "v", "message": "Reunião {{input.eventId}}."}},
                      {"id": "p", "prompt": "Confirme a reunião."}]}


def test_s12_wake_reached_prompt():
    tool = {"id": "agendaLink", "description": "Link", "handler": lambda a, c: {"value": "https://x"},
            "parameters": {"type": "object", "properties": {}, "required": []}}
    w, calls = build([LEMBRETE], tools=[tool], speak=[{"message": "Confirmada: https://x"}],
                     instructions=[{"kind": "never", "prompt": "Nunca prometa desconto."},
                                   {"prompt": "Só VIP.", "if": lambda c: "vip" in c.context["lead"]["tags"]},
                                   {"prompt": "Nunca aparece.", "if": lambda c: False}])
    t1 = w.turn(event="meeting_booked", payload={"eventId": "ev-9"}, key="meet:9", context=AI)
    assert t1.llm_calls == 0
    assert [e.key for e in t1.schedule] == [f"lembrete#meet:9:start:{T0_MS + 600_000}"]
    w.clock.advance("10m")
    t2 = w.turn(wake=t1.schedule[0].key, context=AI, history=[])
    assert t2.llm_calls == 1
    assert calls == [("lembrete#meet:9:n:1", "lembrete:s1:meet:9", {"recipient": "v", "message": "Reunião ev-9."})]
    c = w.provider.calls[0]
    assert "Ana" in c.seen and "There is no new message from the customer" in c.prompt
    assert "Nunca prometa desconto." in c.prompt and "Cite a data exata." in c.prompt and "Só VIP." in c.prompt
    assert "Nunca aparece." not in c.seen
    assert [t.name for t in c.input.tools] == ["agendaLink"]
    assert [(m.kind, m.key) for m in t2.messages] == [("ai", "lembrete#meet:9:p:1")]
    assert [(e.flow_id, e.reason) for e in t2.ended] == [("lembrete", "end")]


def test_s12_silenced_wake():
    w, calls = build([LEMBRETE])
    t1 = w.turn(event="meeting_booked", payload={"eventId": "ev-9"}, key="meet:9", context=AI)
    w.clock.advance("10m")
    t2 = w.turn(wake=t1.schedule[0].key, context=AI, silenced="janela fechada")
    assert t2.llm_calls == 0 and w.provider.calls == [] and len(calls) == 1 and t2.messages == []
    assert [(o.step_id, o.status, o.code, o.detail) for o in t2.outcomes] == [
        ("n", "ok", None, None), ("p", "skipped", "silenced", "janela fechada")]
    assert [(e.flow_id, e.reason) for e in t2.ended] == [("lembrete", "skipped")]


TRID = {"id": "trid", "name": "TRID", "on": [{"message": ["quer um iPhone"]}], "steps": [
    {"id": "a", "say": "Oi! Aqui é da TRID."}, {"id": "p", "wait": "3s"},
    {"id": "b", "say": "Chegou o iPhone 17."}, {"id": "q", "prompt": "Qual modelo?", "collect": ["modelo"]}]}


def test_s13_trid():
    w, _ = build([TRID], understand=[{"flows": {"trid": 90}}], speak=[{"message": "Qual modelo?"}])
    r = msg(w, "quero um iphone", "m1")
    assert r.llm_calls == 2 and w.names() == ["understand", "speak"]
    assert [(m.text, m.kind, m.after_ms, m.key, m.run_id, m.step_id) for m in r.messages] == [
        ("Oi! Aqui é da TRID.", "verbatim", 0, "trid#m1:a:1", "trid#m1", "a"),
        ("Chegou o iPhone 17.", "verbatim", 3000, "trid#m1:b:1", "trid#m1", "b"),
        ("Qual modelo?", "ai", 0, "trid#m1:q:1", "trid#m1", "q")]
    assert [(o.step_id, o.kind, o.status, o.detail) for o in r.outcomes] == [
        ("a", "say", "ok", None), ("p", "wait", "ok", "3000ms"), ("b", "say", "ok", None),
        ("q", "collect", "ok", None)]
    assert r.schedule == []


def test_s13_model_in_first_message():
    w, _ = build([TRID], understand=[{"flows": {"trid": 90}, "fields": {"modelo": "17 Pro"}}])
    r = msg(w, "quero um iphone 17 pro", "m1")
    assert r.llm_calls == 1 and w.names() == ["understand"]
    assert [m.text for m in r.messages] == ["Oi! Aqui é da TRID.", "Chegou o iPhone 17."]
    last = r.outcomes[-1]
    assert (last.step_id, last.status, last.code) == ("q", "skipped", "already-known")
    assert [(e.id, e.reason) for e in r.ended] == [("trid#m1", "end")]


def test_s13_second_ask_same_key():
    w, _ = build([TRID], understand=[{"flows": {"trid": 90}}, {}],
                 speak=[{"message": "Qual modelo?"}, {"message": "Ainda: qual?"}])
    msg(w, "quero um iphone", "m1")
    t2 = msg(w, "hm", "m2")
    assert [m.key for m in t2.messages] == ["trid#m1:q:1"]
    assert t2.session.runs[0].asked == {"modelo": 2}


def offered(call):
    return list(call.input.parameters.json_schema["properties"].get("fields", {}).get("properties", {}))


def test_s14_flow_collect_fields():
    agenda = {"id": "agenda", "name": "Agendamento", "on": [{"message": ["quer agendar"]}],
              "collect": ["nome", "orcamento"],
              "steps": [{"id": "quem", "prompt": "Nome?", "collect": ["nome"]}, {"id": "fim", "prompt": "Marcada."}]}
    w, _ = build([agenda], understand=[{"flows": {"agenda": 90}}, {"fields": {"nome": "Ana", "orcamento": 5000}}],
                 speak=[{"message": "Nome?"}, {"message": "Marcada, Ana."}])
    msg(w, "quero agendar", "m1")
    assert offered(w.provider.calls[0]) == ["nome", "orcamento"]
    t2 = msg(w, "Ana, 5 mil", "m2")
    assert offered(w.provider.calls[2]) == ["nome", "orcamento"]
    assert t2.session.data == {"nome": "Ana", "orcamento": 5000}
    assert [m.step_id for m in t2.messages] == ["fim"]


def _rota(**first):
    return {"id": "rota", "name": "Rota", "on": [{"message": []}], "collect": ["nome", "modelo"],
            "steps": [{"id": "quem", "collect": ["nome"], **first}, {"id": "fim", "prompt": "Separe."}]}


def test_s14_catch_all_reads_whole_list():
    w, _ = build([_rota()], understand=[{"fields": {"nome": "Ana", "modelo": "17 Pro"}}],
                 speak=[{"message": "Separando, Ana."}])
    r = msg(w, "sou a Ana, quero 17 pro", "m1")
    assert w.names() == ["understand", "speak"] and offered(w.provider.calls[0]) == ["nome", "modelo"]
    assert r.session.data == {"nome": "Ana", "modelo": "17 Pro"}
    assert (r.outcomes[0].step_id, r.outcomes[0].status, r.outcomes[0].code) == ("quem", "skipped", "already-known")


def _known(data):
    return Session.from_json({"id": "s1", "v": 4, "version": 1, "data": data, "runs": [], "claims": {},
                              "inputs": [], "metadata": {}})


def test_s14_catch_all_first_step_fields_free():
    w, _ = build([_rota()], speak=[{"message": "Como se chama?"}])
    w.session = _known({"modelo": "17"})
    r = msg(w, "oi", "m1")
    assert w.names() == ["speak"] and r.llm_calls == 1


def test_s14_catch_all_first_step_fixed_question_is_judged():
    w, _ = build([_rota(question="Como você se chama?")], understand=[{"fields": {"nome": "Ana"}}],
                 speak=[{"message": "Separando, Ana."}])
    w.session = _known({"modelo": "17"})
    r = msg(w, "oi, aqui é a Ana", "m1")
    assert w.names() == ["understand", "speak"]
    assert [m.text for m in r.messages] == ["Separando, Ana."]


def _cadastro(**step):
    return {"id": "cadastro", "name": "Cadastro", "steps": [
        {"id": "q", "collect": ["nome", "empresa"], "question": "Nome e empresa?", "maxAsks": 2, **step},
        {"id": "fim", "prompt": "Agradeça."}]}


def test_s14_fixed_question_then_ai_then_max_asks():
    w, _ = build([_cadastro()], understand=[{}, {}], speak=[{"message": "Pode dizer?"}, {"message": "Obrigada!"}])
    t1 = w.turn(start={"flow": "cadastro", "key": "k"}, context=AI)
    assert t1.llm_calls == 0 and w.provider.calls == []
    assert [(m.text, m.kind, m.key) for m in t1.messages] == [("Nome e empresa?", "verbatim", "cadastro#k:q:1")]
    assert [(o.kind, o.status, o.code, o.step_id) for o in t1.outcomes] == [("collect", "ok", "asked-fixed", "q")]
    assert t1.session.runs[0].asked == {"nome": 1, "empresa": 1}
    assert t1.session.last_assistant_at == T0
    t2 = msg(w, "hm", "m2")
    assert [(m.kind, m.text) for m in t2.messages] == [("ai", "Pode dizer?")]
    assert t2.session.runs[0].asked == {"nome": 2, "empresa": 2}
    t3 = msg(w, "hm", "m3")
    assert "max-asks" in codes(t3)
    assert [m.step_id for m in t3.messages] == ["fim"]
    assert w.provider.remaining() == {"understand": 0, "speak": 0, "summary": 0}


def test_s14_confirm_loop_fixed_again():
    conf = {"id": "confirma", "name": "Confirma", "steps": [
        {"id": "c", "collect": ["confirmado"], "question": "Posso confirmar?"},
        {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "c", "clear": ["confirmado"]}},
        {"id": "fim", "prompt": "Agradeça."}]}
    w, _ = build([conf], speak=[{"message": "Tudo bem, vamos rever.", "confirmado": False}])
    w.turn(start={"flow": "confirma", "key": "k"}, context=AI)
    t2 = msg(w, "não", "m2")
    assert [(m.kind, m.text) for m in t2.messages] == [("ai", "Tudo bem, vamos rever."),
                                                      ("verbatim", "Posso confirmar?")]
    run = t2.session.runs[0]
    assert (run.step_id, run.status, run.asked, run.visits) == ("c", "asking", {"confirmado": 1}, {"c": 2, "ok": 1})


def test_s14_staying_run_answers_in_ai_words():
    faq = {"id": "faq", "name": "FAQ", "onEnd": "stay", "steps": [{"id": "q", "collect": ["nome"],
                                                                   "question": "Seu nome?"}]}
    w, _ = build([faq], understand=[{}], speak=[{"message": "Mais alguma coisa?"}])
    w.session = _known({"nome": "Ana"})
    t1 = w.turn(start={"flow": "faq", "key": "k"}, context=AI)
    assert t1.session.runs[0].step_id == "q" and t1.session.runs[0].staying is True
    s = t1.session.copy_deep() if hasattr(t1.session, "copy_deep") else t1.session
    s.data = {}
    w.session = s
    t2 = msg(w, "e o horário?", "m2")
    assert w.names() == ["understand", "speak"]
    assert [m.kind for m in t2.messages] == ["ai"]
