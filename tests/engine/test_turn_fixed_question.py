"""Ruling 1 and engine-turn.md §3.6.5: a talk step's fixed `question` and the `asks` judgement."""

from __future__ import annotations

from scenarios.kit import Host, make_agent, run_of

FIELDS = {"nome": {"type": "string", "ask": "Pergunte o nome."}, "email": {"type": "string", "ask": "x"}}
CADASTRO = {"id": "cadastro", "name": "Cadastro", "on": [{"message": ["quer se cadastrar"]}],
            "steps": [{"id": "nome", "collect": ["nome"], "question": "Qual é o seu nome completo?"},
                      {"id": "email", "collect": ["email"], "question": "E o seu e-mail?"}]}


def test_asks_false_sends_only_the_verbatim_question():
    agent, provider, _ = make_agent([CADASTRO], fields=FIELDS,
                                    understand=[{"flows": {"cadastro": 90}, "asks": False, "fields": {}}])
    r = agent.turn(session_id="s1", message="quero me cadastrar", id="m1")
    schema = provider.calls[0].input.parameters.json_schema
    assert "asks" in schema["required"] and schema["properties"]["asks"]["type"] == ["boolean", "null"]
    assert r.llm_calls == 1 and provider.names() == ["understand"]
    assert [(m.kind, m.text, m.key) for m in r.messages] == [("verbatim", "Qual é o seu nome completo?",
                                                             "cadastro#m1:nome:1")]
    line = r.outcomes[-1]
    assert (line.kind, line.status, line.code, line.key, line.step_id) == ("collect", "ok", "asked-fixed",
                                                                           "cadastro#m1:nome:1", "nome")
    assert run_of(r.session, "cadastro").asked == {"nome": 1}
    assert r.session.last_assistant_at is not None


def test_asks_true_answers_first_then_the_question_follows():
    agent, provider, _ = make_agent(
        [CADASTRO], fields=FIELDS,
        understand=[{"flows": {"cadastro": 90}, "asks": True, "fields": {}}],
        speak=[{"message": "Sim, o cadastro é gratuito!"}])
    r = agent.turn(session_id="s1", message="quero me cadastrar, é grátis?", id="m1")
    assert r.llm_calls == 2
    speak_call = provider.calls[1]
    assert list(speak_call.input.parameters.json_schema["properties"]) == ["message"]
    assert "Qual é o seu nome completo?" in speak_call.prompt and "word for word" in speak_call.prompt
    assert [(m.kind, m.text) for m in r.messages] == [("ai", "Sim, o cadastro é gratuito!"),
                                                      ("verbatim", "Qual é o seu nome completo?")]
    assert {m.key for m in r.messages} == {"cadastro#m1:nome:1"}
    assert [(o.status, o.code) for o in r.outcomes] == [("ok", None), ("ok", "asked-fixed")]
    assert run_of(r.session, "cadastro").asked == {"nome": 1}  # one ask for the two messages


def test_later_asks_are_the_models_own_words():
    agent, provider, _ = make_agent(
        [CADASTRO], fields=FIELDS,
        understand=[{"flows": {"cadastro": 90}, "asks": False, "fields": {}}, {"fields": {}}],
        speak=[{"message": "Pode me dizer seu nome?", "nome": None}])
    host = Host(agent, agent.clock)
    host.message("quero me cadastrar", "m1")
    r = host.message("hm", "m2")
    assert [(m.kind, m.text) for m in r.messages] == [("ai", "Pode me dizer seu nome?")]
    assert run_of(r.session, "cadastro").asked == {"nome": 2}


def test_a_fixed_question_reached_after_the_speak_call_goes_out_verbatim():
    agent, provider, _ = make_agent(
        [CADASTRO], fields=FIELDS,
        understand=[{"flows": {"cadastro": 90}, "asks": False, "fields": {}}, {"fields": {}}],
        speak=[{"message": "Prazer, Ana!", "nome": "Ana"}])
    host = Host(agent, agent.clock)
    host.message("quero me cadastrar", "m1")
    r = host.message("Ana", "m2")
    assert [(m.kind, m.text, m.key) for m in r.messages] == [("ai", "Prazer, Ana!", "cadastro#m1:nome:1"),
                                                            ("verbatim", "E o seu e-mail?", "cadastro#m1:email:1")]
    assert r.llm_calls == 2 and run_of(r.session, "cadastro").asked == {"nome": 1, "email": 1}


def test_a_wake_reaching_a_fixed_question_sends_it_with_no_call():
    flow = {"id": "f", "name": "F", "steps": [{"id": "w", "wait": "1h"},
                                             {"id": "nome", "collect": ["nome"], "question": "Como se chama?"}]}
    agent, provider, clock = make_agent([flow], fields=FIELDS)
    r = agent.turn(session_id="s1", start={"flow": "f", "key": "k"})
    clock.advance("1h")
    w = agent.turn(session_id="s1", wake=r.schedule[0].key, session=r.session)
    assert provider.calls == [] and w.llm_calls == 0
    assert [(m.kind, m.text) for m in w.messages] == [("verbatim", "Como se chama?")]
    assert w.outcomes[-1].code == "asked-fixed"


def test_no_asks_judged_answers_then_asks():
    catch_all = {"id": "c", "name": "C", "on": [{"message": []}],
                 "steps": [{"id": "nome", "collect": ["nome"], "question": "Qual seu nome?"}]}
    agent, provider, _ = make_agent([catch_all], fields={"nome": FIELDS["nome"]}, understand=[{"fields": {}}],
                                    speak=[{"message": "Oi! Tudo bem?"}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert "asks" not in provider.calls[0].input.parameters.json_schema["properties"]
    assert [(m.kind, m.text) for m in r.messages] == [("ai", "Oi! Tudo bem?"), ("verbatim", "Qual seu nome?")]
