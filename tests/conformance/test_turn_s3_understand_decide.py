"""engine-turn.md §3.4 (Understand) and §3.5 (Decide): routing, mentions, fields, branches."""

from __future__ import annotations

import copy

import pytest

from falai_django import ProviderError

from .turn_kit import World, line

OK = {"ok": {"run": lambda p, c: {"ok": True}}}


def vendas(**kw):
    return {"id": "vendas", "name": "Vendas", "description": "Comprar", "on": [{"message": ["quero comprar"]}],
            "steps": [{"id": "v", "prompt": "Venda."}], **kw}


def suporte(**kw):
    return {"id": "suporte", "name": "Suporte", "on": [{"message": ["problema", "!elogio"]}],
            "steps": [{"id": "s", "prompt": "Ajude."}], **kw}


CATCH = {"id": "geral", "name": "Geral", "on": [{"message": []}], "steps": [{"id": "g", "prompt": "Converse."}]}


def schema_of(call):
    return call.input.parameters.json_schema


# --------------------------------------------------------------------------- routing

def test_best_score_at_40_routes():
    w = World([vendas(), suporte(), CATCH], understand=[{"flows": {"vendas": 40, "suporte": 39}}],
              speak=[{"message": "Vamos comprar"}])
    r = w.turn(message="quero comprar", id="m1")
    assert [s.run_id for s in r.started] == ["vendas#m1"]
    assert w.names() == ["understand", "speak"]
    assert r.llm_calls == 2


def test_below_40_goes_to_catch_all():
    w = World([vendas(), suporte(), CATCH], understand=[{"flows": {"vendas": 39, "suporte": 10}}],
              speak=[{"message": "Oi"}])
    r = w.turn(message="hm", id="m1")
    assert [s.run_id for s in r.started] == ["geral#m1"]
    # catch-alls are never scored
    props = schema_of(w.provider.calls[0])["properties"]["flows"]["properties"]
    assert set(props) == {"vendas", "suporte"}


def test_below_40_no_catch_all_idle_answers():
    w = World([vendas(), suporte()], understand=[{"flows": {"vendas": 39}}], speak=[{"message": "Olá"}])
    r = w.turn(message="hm", id="m1")
    assert r.started == []
    (m,) = r.messages
    assert (m.text, m.kind, m.key, m.run_id, m.step_id) == ("Olá", "ai", "idle:m1", None, None)
    o = r.outcomes[-1]
    assert (o.kind, o.status, o.key, o.llm_calls, o.code) == ("idle", "ok", "idle:m1", 1, None)
    assert o.run_id is None


def test_tie_goes_to_earlier_flow():
    w = World([vendas(), suporte()], understand=[{"flows": {"vendas": 80, "suporte": 80}}],
              speak=[{"message": "x"}])
    r = w.turn(message="x", id="m1")
    assert r.started[0].flow_id == "vendas"


def test_numeric_string_scores_and_clamp():
    w = World([vendas(), suporte()], understand=[{"flows": {"vendas": "45", "suporte": 300}}],
              speak=[{"message": "x"}])
    r = w.turn(message="x", id="m1")
    assert r.started[0].flow_id == "suporte"


def _asking_on_vendas(scores, extra_speak=1):
    w = World([vendas(onEnd="stay"), suporte(onEnd="stay")],
              understand=[{"flows": {"vendas": 90}}, {"flows": scores}],
              speak=[{"message": "a"}] * (1 + extra_speak))
    w.turn(message="quero comprar", id="m1")
    assert w.run("vendas").status == "asking"
    return w, w.turn(message="x", id="m2")


def test_sticky_needs_15_over_current():
    w, r = _asking_on_vendas({"vendas": 50, "suporte": 64})
    assert r.started == []
    w, r = _asking_on_vendas({"vendas": 50, "suporte": 65})
    assert [s.flow_id for s in r.started] == ["suporte"]
    assert w.run("vendas").status == "suspended"


def test_sticky_needs_40_absolute():
    w, r = _asking_on_vendas({"suporte": 39})
    assert r.started == []
    w, r = _asking_on_vendas({"suporte": 40})
    assert [s.flow_id for s in r.started] == ["suporte"]


def test_routed_flow_with_suspended_run_resumes():
    always = vendas(onEnd="stay")
    always["on"] = [{"message": ["quero comprar"], "repeat": "always"}]
    w = World([always, suporte(onEnd="stay")],
              understand=[{"flows": {"vendas": 90}}, {"flows": {"suporte": 90}}, {"flows": {"vendas": 90}}],
              speak=[{"message": "a"}, {"message": "b"}, {"message": "c"}])
    w.turn(message="quero comprar", id="m1")
    w.turn(message="problema", id="m2")
    assert w.run("vendas").status == "suspended"
    r = w.turn(message="comprar de novo", id="m3")
    assert r.started == []
    assert w.run("vendas").status == "asking"
    assert w.run("vendas").suspended_at is None
    assert w.run("suporte").status == "suspended"
    assert r.messages[0].run_id == "vendas#m1"


def test_exclusion_phrases_in_prompt():
    w = World([vendas(), suporte()], understand=[{}], speak=[{"message": "x"}])
    w.turn(message="x", id="m1")
    prompt = w.provider.calls[0].prompt
    assert "Score 0 when" in prompt and "elogio" in prompt
    assert "!elogio" not in prompt


def test_once_claimed_flow_is_not_eligible():
    w = World([vendas(), suporte()], understand=[{"flows": {"vendas": 90}}, {"flows": {"suporte": 90}}],
              speak=[{"message": "x"}, {"message": "y"}])
    w.turn(message="comprar", id="m1")
    w.turn(message="problema", id="m2")
    props = schema_of(w.provider.calls[2])["properties"]["flows"]["properties"]
    assert "vendas" not in props


# --------------------------------------------------------------------------- shortcuts and budget

def test_lone_flow_idle_silent_starts_unscored():
    w = World([vendas()], idle="silent", speak=[{"message": "x"}])
    r = w.turn(message="quero", id="m1")
    assert w.names() == ["speak"]
    assert r.started[0].flow_id == "vendas"


def test_lone_flow_with_idle_is_scored():
    w = World([vendas()], understand=[{"flows": {"vendas": 10}}], speak=[{"message": "idle"}])
    r = w.turn(message="quero", id="m1")
    assert w.names() == ["understand", "speak"]
    assert r.started == [] and r.messages[0].key == "idle:m1"


def test_lone_flow_with_catch_all_is_scored():
    w = World([vendas(), CATCH], idle="silent", understand=[{"flows": {"vendas": 90}}], speak=[{"message": "x"}])
    w.turn(message="quero", id="m1")
    assert w.names() == ["understand", "speak"]


def test_catch_all_alone_no_understand():
    w = World([CATCH], speak=[{"message": "Oi"}])
    r = w.turn(message="oi", id="m1")
    assert w.names() == ["speak"] and r.llm_calls == 1


def test_no_flows_idle_one_call():
    w = World([], speak=[{"message": "Oi"}])
    r = w.turn(message="oi", id="m1")
    assert w.names() == ["speak"] and r.llm_calls == 1
    assert r.messages[0].key == "idle:m1"


def test_idle_silent_nothing_to_judge_zero_calls():
    w = World([], idle="silent")
    r = w.turn(message="oi", id="m1")
    assert r.llm_calls == 0 and r.messages == []


def test_floor_alone_no_fields_no_understand():
    w = World([vendas(onEnd="stay")], idle="silent", speak=[{"message": "a"}, {"message": "b"}])
    w.turn(message="quero", id="m1")
    r = w.turn(message="mais", id="m2")
    assert w.names() == ["speak", "speak"]
    assert r.llm_calls == 1


def test_unusable_understand_reply_still_costs_one_call():
    w = World([vendas(), suporte()], understand=[{"nada": 1}], speak=[{"message": "x"}])
    r = w.turn(message="x", id="m1")
    assert r.llm_calls == 2
    assert r.started == []  # empty judgement: nothing >= 40, no catch-all -> idle


# --------------------------------------------------------------------------- understand failure

def test_understand_failure_raises_provider_error_and_input_untouched():
    w = World([vendas(), suporte()], understand=[ProviderError("mock", "network", "boom")])
    w.turn(event="x", key="x")  # creates a session
    before = copy.deepcopy(w.session.to_json())
    with pytest.raises(ProviderError):
        w.agent.turn(session_id="s1", message="oi", id="m1", session=w.session)
    assert w.session.to_json() == before


def test_understand_non_provider_error_is_provider_error():
    w = World([vendas(), suporte()], understand=[RuntimeError("503 service unavailable")])
    with pytest.raises(ProviderError):
        w.turn(message="oi", id="m1")


def test_understand_dry_list_raises():
    w = World([vendas(), suporte()])
    with pytest.raises(ProviderError):
        w.turn(message="oi", id="m1")


# --------------------------------------------------------------------------- mentions

def _mention_flow(phrases, **trigger):
    return {"id": "cancel", "name": "Cancelamento", "on": [{"mention": phrases, **trigger}],
            "steps": [{"id": "aviso", "say": "Anotado {{input.motivo}}"}, {"id": "d", "do": "ok"}]}


TRI_ASK = {"id": "tri", "name": "Triagem", "on": [{"message": []}],
           "steps": [{"id": "quem", "collect": ["nome", "empresa"]}]}


def test_mention_say_while_triage_asks_another_reply():
    w = World([TRI_ASK, _mention_flow(["cancelar"], extract={"motivo": {"type": "string"}})],
              actions=OK,
              speak=[{"message": "Oi, nome?", "nome": None, "empresa": None}],
              understand=[{}, {"mentions": {"cancel": True}, "extract": {"cancel": {"motivo": "caro"}}}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="quero cancelar, caro", id="m2")
    assert r.llm_calls == 1
    assert [(m.text, m.kind) for m in r.messages] == [("Anotado caro", "verbatim")]
    o = line(r, "another-reply")
    assert (o.kind, o.status, o.key) == ("collect", "skipped", "tri#m1:quem:1")
    assert w.run("tri").status == "asking"
    ended = [e for e in r.ended if e.flow_id == "cancel"]
    assert ended and ended[0].input == {"motivo": "caro"} and ended[0].trigger.kind == "mention"
    assert ended[0].trigger.payload == {"motivo": "caro"}
    assert r.session.last_assistant_at is not None


def test_mention_false_starts_nothing():
    w = World([TRI_ASK, _mention_flow(["cancelar"])], actions=OK,
              speak=[{"message": "Oi", "nome": None, "empresa": None}, {"message": "De novo", "nome": None,
                                                                          "empresa": None}],
              understand=[{}, {"mentions": {"cancel": False}}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="x", id="m2")
    assert all(s.flow_id != "cancel" for s in r.started)


def test_code_only_mention_detector_runs_every_message():
    seen = []
    flow = {"id": "det", "name": "Det", "on": [{"mention": [], "if": lambda ctx: seen.append(1) or True}],
            "steps": [{"id": "d", "do": "ok"}]}
    w = World([flow], actions=OK, idle="silent")
    r = w.turn(message="x", id="m1")
    assert [s.run_id for s in r.started] == ["det#m1"]
    r = w.turn(message="y", id="m2")
    assert [s.code for s in r.skipped] == ["already-claimed"]
    assert r.llm_calls == 0


def test_mention_flows_in_understand_envelope():
    w = World([TRI_ASK, _mention_flow(["cancelar", "!trocar"], extract={"motivo": {"type": "string"}})],
              actions=OK, speak=[{"message": "Oi", "nome": None, "empresa": None}],
              understand=[{}])
    w.turn(message="oi", id="m1")
    schema = schema_of(w.provider.calls[0])
    assert "mentions" in schema["properties"] and "extract" in schema["properties"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(schema["properties"])
    prompt = w.provider.calls[0].prompt
    assert "Does not count when" in prompt and "trocar" in prompt


# --------------------------------------------------------------------------- fields

def test_fields_coercion_and_dropped_lines():
    fields = {"nome": {"type": "string"}, "idade": {"type": "integer"}, "valor": {"type": "number"},
              "ok": {"type": "boolean", "extract": "anywhere"},
              "tamanho": {"type": "string", "enum": ["1-10", "11-50"]}}
    flow = {"id": "tri", "name": "T", "on": [{"message": []}],
            "steps": [{"id": "a", "say": "oi"}, {"id": "q", "collect": ["nome", "idade", "valor", "ok", "tamanho"]}]}
    w = World([flow], fields=fields,
              understand=[{"fields": {"nome": 12, "idade": "42,9", "valor": "1,5", "ok": "sim", "tamanho": "200+",
                                      "ghost": "x"}}],
              speak=[{"message": "?"}])
    r = w.turn(message="x", id="m1")
    assert r.session.data == {"nome": "12", "idade": 42, "valor": 1.5, "ok": True}
    nie = line(r, "not-in-enum")
    assert (nie.kind, nie.status, nie.detail, nie.run_id, nie.key) == ("collect", "skipped", "tamanho", None, None)
    uf = line(r, "unknown-field")
    assert (uf.kind, uf.status, uf.detail, uf.run_id) == ("collect", "skipped", "ghost", None)


def test_bad_value():
    fields = {"idade": {"type": "integer"}}
    flow = {"id": "tri", "name": "T", "on": [{"message": []}],
            "steps": [{"id": "a", "say": "oi"}, {"id": "q", "collect": ["idade"]}]}
    w = World([flow], fields=fields, understand=[{"fields": {"idade": "abc"}}], speak=[{"message": "?"}])
    r = w.turn(message="x", id="m1")
    bv = line(r, "bad-value")
    assert (bv.kind, bv.status, bv.detail, bv.key, bv.run_id) == ("collect", "skipped", "idade", None, None)
    assert "idade" not in r.session.data


def test_boolean_fields_not_harvested_by_default():
    flow = {"id": "tri", "name": "T", "on": [{"message": []}],
            "steps": [{"id": "a", "say": "oi"}, {"id": "q", "collect": ["confirmado", "nome"]}]}
    w = World([flow], understand=[{}], speak=[{"message": "?"}])
    w.turn(message="x", id="m1")
    props = schema_of(w.provider.calls[0])["properties"]["fields"]["properties"]
    assert "nome" in props and "confirmado" not in props


def test_catch_all_free_fields_no_understand():
    # first step is a talk step without question collecting every flowField: free
    flow = {"id": "tri", "name": "T", "on": [{"message": []}],
            "steps": [{"id": "q", "collect": ["nome"]}]}
    w = World([flow], speak=[{"message": "?", "nome": None}])
    w.turn(message="x", id="m1")
    assert w.names() == ["speak"]


def test_catch_all_non_free_fields_cost_understand():
    flow = {"id": "tri", "name": "T", "on": [{"message": []}],
            "steps": [{"id": "q", "collect": ["nome"]}, {"id": "q2", "collect": ["empresa"]}]}
    w = World([flow], understand=[{"fields": {"empresa": "ACME"}}], speak=[{"message": "?", "nome": None}])
    r = w.turn(message="sou da ACME", id="m1")
    assert w.names() == ["understand", "speak"]
    assert r.session.data == {"empresa": "ACME"}


def test_flow_level_collect_feeds_fields():
    fl = vendas(collect=["empresa"])
    w = World([fl, suporte()], understand=[{"flows": {"vendas": 90}, "fields": {"empresa": "ACME"}}],
              speak=[{"message": "x"}])
    r = w.turn(message="x", id="m1")
    assert r.session.data == {"empresa": "ACME"}


def test_clear_on_start_before_extracted_values_land():
    fl = vendas(clearOnStart=["empresa"], collect=["empresa"])
    w = World([fl, suporte()], understand=[{"flows": {"vendas": 90}, "fields": {"empresa": "NOVA"}}],
              speak=[{"message": "x"}])
    w.turn(event="x", key="x")
    w.session.data["empresa"] = None
    w.session.data["empresa"] = "VELHA"
    # empresa is known, so not harvestable; clearOnStart removes it anyway
    r = w.turn(message="x", id="m1")
    assert "empresa" not in r.session.data or r.session.data["empresa"] == "NOVA"


# --------------------------------------------------------------------------- branches

def _branch_flow():
    return {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [
        {"id": "q", "prompt": "Pergunte o que quer.", "collect": ["nome"],
         "branches": [{"when": "o cliente quer falar com humano", "then": "humano"},
                      {"if": {"known": ["empresa"]}, "then": "emp"}]},
        {"id": "fim", "say": "fim", "then": "end"},
        {"id": "humano", "say": "Chamando humano", "then": "end"},
        {"id": "emp", "say": "Empresa!", "then": "end"},
    ]}


def test_when_branch_fires_from_understanding():
    w = World([_branch_flow()], speak=[{"message": "Nome?", "nome": None}])
    w.turn(message="oi", id="m1")
    w.understand(lambda req: {"branches": {k: True for k in
                                           req.parameters.json_schema["properties"]["branches"]["properties"]}})
    r = w.turn(message="quero humano", id="m2")
    props = schema_of(w.provider.calls[-1])["properties"]["branches"]["properties"]
    assert list(props) == ["q1"]
    o = line(r, "branch")
    assert (o.kind, o.status, o.key, o.next) == ("collect", "ok", "tri#m1:q:1", "humano")
    assert [m.text for m in r.messages] == ["Chamando humano"]
    assert r.llm_calls == 1


def test_branch_key_real_name_accepted():
    w = World([_branch_flow()], speak=[{"message": "Nome?", "nome": None}])
    w.turn(message="oi", id="m1")
    w.understand({"branches": {"tri#m1/q/0": True}})
    r = w.turn(message="quero humano", id="m2")
    assert line(r, "branch").next == "humano"


def test_if_branch_fires_without_understanding_of_it():
    w = World([_branch_flow()], speak=[{"message": "Nome?", "nome": None}])
    w.turn(message="oi", id="m1")
    w.understand({"fields": {"empresa": "ACME"}})
    r = w.turn(message="sou da ACME", id="m2")
    # empresa is not a flowField of tri, so it is not harvested: understand returns it anyway and it lands
    # (declared field) - then the if branch fires
    assert r.session.data.get("empresa") == "ACME"
    assert line(r, "branch").next == "emp"


def test_branch_key_index_counts_every_branch():
    fl = {"id": "tri", "name": "T", "on": [{"message": []}], "steps": [
        {"id": "q", "prompt": "x", "collect": ["nome"],
         "branches": [{"if": {"known": ["empresa"]}, "then": "emp"},
                      {"when": "quer humano", "then": "humano"}]},
        {"id": "humano", "say": "Humano", "then": "end"},
        {"id": "emp", "say": "Empresa", "then": "end"}]}
    w = World([fl], speak=[{"message": "Nome?", "nome": None}])
    w.turn(message="oi", id="m1")
    w.understand({"branches": {"tri#m1/q/1": True}})
    r = w.turn(message="humano", id="m2")
    assert line(r, "branch").next == "humano"
    prompt = w.provider.calls[-1].prompt
    assert "- q1: quer humano" in prompt
