"""Upstream scenario behaviours S3, S4, S5, S6, S8 re-expressed against the Python API."""

from __future__ import annotations

from falai_django.engine.outcomes import OUTCOME_MESSAGES

from .test_turn_s8_scenarios_a import AI, FIELDS, TRIAGEM
from .turn_kit import DAY, HOUR, T0, T0_MS, World

NEG = {"lead": {"owner": "ai", "tags": [], "stageId": "negociacao"}}
LOST = {"lead": {"owner": "ai", "tags": [], "stageId": "perdido"}}


def build(flows, reply=None, **kw):
    calls = []

    def make(name):
        def run(params, ctx):
            calls.append((name, ctx.key, ctx.dedupe_key, params))
            return reply(name, len(calls)) if reply else {"ok": True}
        return {"run": run}
    actions = {n: make(n) for n in ("notify", "assign_lead", "send_template")}
    actions["notify"]["parameters"] = {"recipient": {"type": "string"}, "message": {"type": "string"}}
    actions["send_template"]["parameters"] = {"templateId": {"type": "string"}}
    conditions = {"inStage": {"check": lambda ctx, stage: (ctx.context or {}).get("lead", {}).get("stageId") == stage}}
    w = World(flows, fields=FIELDS, actions=actions, conditions=conditions, **kw)
    return w, calls


INTERESSE = {"id": "interesse", "name": "Negociação", "on": [{"event": "stage_entered", "after": "1h",
                                                             "if": {"inStage": "negociacao"}}],
             "while": {"inStage": "negociacao"},
             "steps": [{"id": "p", "prompt": "Para quando?", "collect": ["urgencia"]},
                       {"id": "n", "do": "notify", "with": {"recipient": "v",
                                                            "message": "{{data.nome}}: {{data.urgencia}}."}}]}


def test_s3_event_after_while():
    w, calls = build([TRIAGEM(), INTERESSE],
                     understand=[{"flows": {"triagem": 90}, "fields": {"nome": "Ana"}}, {"fields": {"urgencia": "agora"}}],
                     speak=[{"message": "Empresa?"}, {"message": "Para quando?"}, {"message": "E a empresa?"}])
    w.turn(message="oi, sou a Ana", id="m1", context=NEG)
    t2 = w.turn(event="stage_entered", payload={"stageId": "negociacao"}, key="stage:7", context=NEG)
    at = T0_MS + HOUR
    assert t2.llm_calls == 0 and [(e.key, e.replaces) for e in t2.schedule] == [(f"interesse#stage:7:start:{at}", None)]
    (o,) = t2.outcomes
    assert (o.run_id, o.kind, o.status, o.code, o.until) == ("interesse#stage:7", "wait", "waiting", "awaiting-trigger",
                                                             "2026-09-20T11:00:00.000Z")
    assert [(r.flow_id, r.status, r.step_id) for r in t2.session.runs] == [("triagem", "asking", "quem"),
                                                                           ("interesse", "waiting", None)]
    w.clock.advance("1h")
    t3 = w.turn(wake=t2.schedule[0].key, context=NEG, history=[])
    assert t3.llm_calls == 1 and "There is no new message" in w.provider.calls[-1].prompt
    assert [(m.text, m.key) for m in t3.messages] == [("Para quando?", "interesse#stage:7:p:1")]
    assert [(r.flow_id, r.status) for r in t3.session.runs] == [("triagem", "suspended"), ("interesse", "asking")]
    t4 = w.turn(message="para agora", id="m2", context=NEG)
    assert t4.llm_calls == 2
    assert calls == [("notify", "interesse#stage:7:n:1", "interesse:s1:stage:7", {"recipient": "v",
                                                                                "message": "Ana: agora."})]
    assert [(e.flow_id, e.reason) for e in t4.ended] == [("interesse", "end")]
    assert [m.text for m in t4.messages] == ["E a empresa?"]
    assert [(r.flow_id, r.status) for r in t4.session.runs] == [("triagem", "asking")]


def test_s3_while_fails_at_wake():
    w, _ = build([INTERESSE])
    t1 = w.turn(event="stage_entered", payload={"stageId": "negociacao"}, key="stage:7", context=NEG)
    w.clock.advance("1h")
    t2 = w.turn(wake=t1.schedule[0].key, context=LOST)
    assert t2.llm_calls == 0 and t2.messages == [] and [o.code for o in t2.outcomes] == ["premise-changed"]
    assert [(e.flow_id, e.reason) for e in t2.ended] == [("interesse", "skipped")]
    assert t2.session.runs == []


def test_s3_trigger_if_sees_context():
    w, _ = build([INTERESSE])
    t1 = w.turn(event="stage_entered", payload={"stageId": "perdido"}, key="stage:7", context=LOST)
    assert t1.started == [] and t1.session.runs == [] and t1.schedule == []


PEDIU = {"id": "pediu_humano", "name": "Pediu humano", "on": [{"mention": ["pede um humano"]}],
         "steps": [{"id": "s", "say": "Já chamo alguém."}, {"id": "a", "do": "assign_lead", "with": {}}]}


def test_s4_mention_say_silences_floor():
    w, calls = build([TRIAGEM(), PEDIU],
                     understand=[{"flows": {"triagem": 90}, "fields": {"nome": "Ana"}},
                                 {"mentions": {"pediu_humano": True}}, {}],
                     speak=[{"message": "Empresa?"}, {"message": "Enquanto isso: empresa?"}])
    w.turn(message="oi, sou a Ana", id="m1", context=AI)
    t2 = w.turn(message="quero uma pessoa", id="m2", context=AI)
    assert t2.llm_calls == 1 and w.names() == ["understand", "speak", "understand"]
    assert [(m.text, m.kind, m.after_ms, m.key, m.run_id, m.step_id) for m in t2.messages] == [
        ("Já chamo alguém.", "verbatim", 0, "pediu_humano#m2:s:1", "pediu_humano#m2", "s")]
    assert calls == [("assign_lead", "pediu_humano#m2:a:1", "pediu_humano:s1:", {})]
    assert [(o.run_id, o.step_id, o.status, o.code) for o in t2.outcomes] == [
        ("pediu_humano#m2", "s", "ok", None), ("pediu_humano#m2", "a", "ok", None),
        ("triagem#m1", "quem", "skipped", "another-reply")]
    assert [(r.flow_id, r.status, r.step_id) for r in t2.session.runs] == [("triagem", "asking", "quem")]
    t3 = w.turn(message="ok, é a Zeta", id="m3", context=AI)
    assert t3.llm_calls == 2 and [m.text for m in t3.messages] == ["Enquanto isso: empresa?"]
    assert t3.skipped == []


def test_s4_second_mention_already_claimed():
    w, calls = build([TRIAGEM(), PEDIU], understand=[{"mentions": {"pediu_humano": True}},
                                                    {"mentions": {"pediu_humano": True}}],
                     speak=[{"message": "Oi! Quem fala?"}])
    w.turn(message="quero um humano", id="m1", context=AI)
    t2 = w.turn(message="um humano", id="m2", context=AI)
    assert [(s.flow_id, s.anchor, s.trigger_key, s.code, s.message) for s in t2.skipped] == [
        ("pediu_humano", "s1", "m2", "already-claimed", OUTCOME_MESSAGES["already-claimed"])]
    assert len(calls) == 1 and [m.text for m in t2.messages] == ["Oi! Quem fala?"]


CAMPANHA = {"id": "campanha", "name": "Campanha", "steps": [
    {"id": "envio", "do": "send_template", "with": {"templateId": "{{input.templateId}}"}},
    {"id": "espera", "wait": "1d", "else": {"flow": "{{input.flowId}}"}},
    {"id": "nudge", "prompt": "Cutuque."},
    {"id": "espera2", "wait": "2d", "else": {"flow": "{{input.flowId}}"}}]}
FUNIL = {"id": "funil", "name": "Funil", "steps": [{"id": "q", "collect": ["nome"]}]}
START = {"flow": "campanha", "input": {"templateId": "t1", "flowId": "funil"}, "key": "camp:1"}


def test_s5_campaign():
    w, calls = build([CAMPANHA, FUNIL],
                     reply=lambda n, i: {"ok": True, "spoke": True, "detail": "template enviado"},
                     understand=[{"fields": {}}], speak=[{"message": "Viu?"}, {"message": "Como se chama?"}])
    t1 = w.turn(start=START, context=AI)
    assert t1.llm_calls == 0
    assert calls == [("send_template", "campanha#camp:1:envio:1", "campanha:s1:camp:1", {"templateId": "t1"})]
    w1 = T0_MS + DAY
    assert [(e.key, e.replaces) for e in t1.schedule] == [(f"campanha#camp:1:espera:{w1}", None)]
    assert [(o.step_id, o.status, o.detail, o.until) for o in t1.outcomes] == [
        ("envio", "ok", "template enviado", None), ("espera", "waiting", None, "2026-09-21T10:00:00.000Z")]
    assert t1.session.last_assistant_at == T0
    w.clock.advance("1d")
    t2 = w.turn(wake=t1.schedule[0].key, context=AI, history=[])
    assert t2.llm_calls == 1 and [(m.text, m.key) for m in t2.messages] == [("Viu?", "campanha#camp:1:nudge:1")]
    assert [(o.step_id, o.status, o.code) for o in t2.outcomes] == [
        ("espera", "ok", "no-reply"), ("nudge", "ok", None), ("espera2", "waiting", None)]
    w.clock.advance("2h")
    t3 = w.turn(message="vi sim", id="m1", context=AI)
    assert [(e.id, e.reason) for e in t3.ended] == [("campanha#camp:1", "flow")]
    assert [(s.run_id, s.flow_id, s.anchor, s.dedupe_key) for s in t3.started] == [
        ("funil#campanha#camp:1:espera2:1", "funil", "s1", "funil:s1:campanha#camp:1:espera2:1")]
    assert [(r.flow_id, r.status, r.hop, r.input) for r in t3.session.runs] == [
        ("funil", "asking", 1, {"templateId": "t1", "flowId": "funil"})]
    assert [m.text for m in t3.messages] == ["Como se chama?"] and t3.llm_calls == 2


def test_s5_defer_reruns_same_key():
    w, calls = build([CAMPANHA, FUNIL], reply=lambda n, i: {"defer": "24h", "detail": "sem créditos"} if i == 1
                     else {"ok": True, "spoke": True})
    t1 = w.turn(start=START, context=AI)
    retry = T0_MS + DAY
    o = t1.outcomes[0]
    assert (o.step_id, o.status, o.detail, o.until) == ("envio", "deferred", "sem créditos", "2026-09-21T10:00:00.000Z")
    assert [e.key for e in t1.schedule] == [f"campanha#camp:1:envio:{retry}"]
    w.clock.advance("24h")
    t2 = w.turn(wake=t1.schedule[0].key, context=AI)
    assert [c[1] for c in calls] == ["campanha#camp:1:envio:1", "campanha#camp:1:envio:1"]
    assert (t2.session.runs[0].step_id, t2.session.runs[0].status) == ("espera", "waiting")


COMENTARIO = {"id": "comentario", "name": "Comentou", "on": [{"event": "ig_comment"}], "anchor": "lead",
              "steps": [{"id": "s", "say": "Vi seu comentário!"},
                        {"id": "n", "do": "notify", "with": {"recipient": "v", "message": "C: {{input.text}}"}}]}


def test_s6_anchored_event_across_sessions():
    w, calls = build([COMENTARIO])
    anchors = {"lead": {"key": "lead:456"}}
    ig = w.turn(keep=False, session_id="ig1", event="ig_comment", payload={"text": "quanto custa?"}, key="ig:c1",
                anchors=anchors, context=AI)
    assert ig.llm_calls == 0
    assert [(s.run_id, s.flow_id, s.anchor, s.dedupe_key) for s in ig.started] == [
        ("comentario#ig:c1", "comentario", "lead:456", "comentario:lead:456:ig:c1")]
    assert [(m.text, m.kind, m.key) for m in ig.messages] == [("Vi seu comentário!", "verbatim", "comentario#ig:c1:s:1")]
    assert calls == [("notify", "comentario#ig:c1:n:1", "comentario:lead:456:ig:c1",
                      {"recipient": "v", "message": "C: quanto custa?"})]
    assert list(ig.session.claims) == ["comentario:lead:456:ig:c1"]
    wa = w.turn(keep=False, session_id="wa1", event="ig_comment", payload={"text": "e o prazo?"}, key="ig:c2",
                anchors=anchors, claims={"held": {}, "active": ["comentario:lead:456"]}, context=AI)
    assert wa.started == [] and wa.messages == [] and len(calls) == 1
    assert [(s.flow_id, s.anchor, s.trigger_key, s.code) for s in wa.skipped] == [
        ("comentario", "lead:456", "ig:c2", "already-running")]


def test_s6_once_claimed_elsewhere():
    boas = {"id": "boas", "name": "Boas", "on": [{"event": "ig_comment", "repeat": "once"}], "anchor": "lead",
            "steps": [{"id": "s", "say": "Bem-vindo!"}]}
    w, _ = build([boas])
    r = w.turn(session_id="wa1", event="ig_comment", payload={"text": "oi"}, key="ig:c9",
               anchors={"lead": {"key": "lead:456"}},
               claims={"held": {"boas:lead:456:": "2026-09-19T10:00:00.000Z"}, "active": []})
    assert [(s.flow_id, s.anchor, s.trigger_key, s.code) for s in r.skipped] == [
        ("boas", "lead:456", "ig:c9", "already-claimed")]
    assert r.messages == []


def test_s8_agenda_tools_chain_repeat_always():
    check = {"id": "checkAvailability", "description": "Horários",
             "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]},
             "handler": lambda a, c: {"value": {"day": a["day"], "slots": ["14:00", "16:00"]}}}
    agenda = {"id": "agenda", "name": "Agendar", "on": [{"message": ["quer marcar"], "repeat": "always"}],
              "clearOnStart": ["confirmado"], "tools": ["checkAvailability"],
              "steps": [{"id": "horario", "prompt": "Ofereça horários.", "collect": ["confirmado"]},
                        {"id": "ok", "if": {"equals": {"confirmado": True}}, "then": {"flow": "pos"},
                         "else": "horario"}]}
    pos = {"id": "pos", "name": "Pós", "steps": [{"id": "p", "prompt": "Confirme."}]}
    tc = {"message": "", "toolCalls": [{"toolName": "checkAvailability", "arguments": {"day": "amanhã"}}]}
    w, _ = build([agenda, pos], idle="silent", tools=[check],
                 understand=[{"flows": {"pos": 10, "agenda": 5}}],
                 speak=[tc, {"message": "14h ou 16h?"}, {"message": "Fechado!", "confirmado": True},
                        {"message": "Combinado."},
                        {"message": "", "toolCalls": [{"toolName": "checkAvailability", "arguments": {"day": "sexta"}}]},
                        {"message": "Sexta 14h ou 16h."}])
    t1 = w.turn(message="quero marcar", id="m1", context=AI)
    assert w.names() == ["speak", "speak"] and t1.llm_calls == 2
    assert [t.name for t in w.provider.calls[0].input.tools] == ["checkAvailability"]
    last = w.provider.calls[1].input.history[-1]
    assert last["role"] == "tool" and last["name"] == "checkAvailability" and "16:00" in str(last["content"])
    assert [m.text for m in t1.messages] == ["14h ou 16h?"]
    assert (t1.outcomes[0].step_id, t1.outcomes[0].status, t1.outcomes[0].llm_calls) == ("horario", "ok", 2)
    t2 = w.turn(message="16h", id="m2", context=AI)
    assert t2.llm_calls == 1 and t2.session.data["confirmado"] is True
    assert [(e.id, e.reason) for e in t2.ended] == [("agenda#m1", "flow")]
    assert [(s.run_id, s.flow_id) for s in t2.started] == [("pos#agenda#m1:ok:1", "pos")]
    assert [(r.flow_id, r.status, r.hop, r.step_id) for r in t2.session.runs] == [("pos", "asking", 1, "p")]
    t3 = w.turn(message="ótimo", id="m3", context=AI)
    assert t3.llm_calls == 2 and [m.text for m in t3.messages] == ["Combinado."]
    assert [(e.flow_id, e.reason) for e in t3.ended] == [("pos", "end")] and t3.session.runs == []
    t4 = w.turn(message="quero marcar outra", id="m4", context=AI)
    assert [s.run_id for s in t4.started] == ["agenda#m4"]
    assert "confirmado" not in t4.session.data
    assert [m.text for m in t4.messages] == ["Sexta 14h ou 16h."] and t4.llm_calls == 2
    assert sorted(t4.session.claims) == ["agenda:s1:m1", "agenda:s1:m4", "pos:s1:agenda#m1:ok:1"]
    assert w.provider.remaining() == {"understand": 0, "speak": 0, "summary": 0}


def test_s9_no_flows_idle_with_tools():
    from .test_turn_s8_scenarios_a import build as build_a
    faq = {"id": "faq", "description": "FAQ", "handler": lambda a, c: {"value": f'R$ 10 ({a.get("q")})'},
           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
    w, _ = build_a([], tools=[faq], idle={"prompt": "Não invente preços."}, speak=[{"message": "Oi!"}])
    r = w.turn(message="oi", id="m1")
    assert r.llm_calls == 1 and w.names() == ["speak"]
    assert [t.name for t in w.provider.calls[0].input.tools] == ["faq"]
    assert "Não invente preços." in w.provider.calls[0].prompt
    assert [(m.text, m.kind, m.after_ms, m.key, m.run_id, m.step_id) for m in r.messages] == [
        ("Oi!", "ai", 0, "idle:m1", None, None)]
    (o,) = r.outcomes
    assert (o.kind, o.status, o.key, o.llm_calls) == ("idle", "ok", "idle:m1", 1)
    assert r.session.runs == [] and r.changed is True


def test_s10_race_wake_and_text_with_a_store():
    import pytest

    from falai_django import MemoryStore, SessionConflictError

    from .test_turn_s8_scenarios_a import RETOMAR
    w, _ = build([TRIAGEM(), RETOMAR], understand=[{"flows": {"triagem": 90}, "fields": {"nome": "Ana"}}, {}, {}],
                 speak=[{"message": "Empresa?"}, {"message": "Ainda faz sentido?"}, {"message": "Ótimo!"},
                        {"message": "Ótimo!"}])
    store = MemoryStore()
    t0 = w.turn(keep=False, message="oi, sou a Ana", id="m1", context=AI)
    v1 = store.save(t0.session, 0)
    assert v1.version == 1
    w.clock.advance("24h")
    seen_by_wake, seen_by_text = store.load("s1"), store.load("s1")
    wake = w.turn(keep=False, session=seen_by_wake, wake=t0.schedule[0].key, context=AI, history=[])
    assert [m.text for m in wake.messages] == ["Ainda faz sentido?"]
    store.save(wake.session, 1)
    lost = w.turn(keep=False, session=seen_by_text, message="faz sim", id="m2", context=AI)
    assert lost.ended == [] and [m.text for m in lost.messages] == ["Ótimo!"]
    with pytest.raises(SessionConflictError):
        store.save(lost.session, 1)
    v2 = store.load("s1")
    replay = w.turn(keep=False, session=v2, message="faz sim", id="m2", context=AI)
    assert [(e.flow_id, e.reason) for e in replay.ended] == [("retomar", "end")]
    assert next(o for o in replay.outcomes if o.kind == "wait").code == "replied"
    v3 = store.save(replay.session, 2)
    assert v3.version == 3
    w.clock.advance("2d")
    stale = w.turn(keep=False, session=v3, wake=wake.schedule[0].key, context=AI)
    assert stale.changed is False and [o.code for o in stale.outcomes] == ["stale-wake"]
