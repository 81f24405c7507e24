"""engine-turn.md §8: the worked expectations, one test each (inputs and keys exact)."""

from __future__ import annotations

from scenarios.kit import T0, T0_MS, Host, codes, make_agent, run_of, texts, triage_flow

from falai_django import ProviderError
from falai_django.engine.jstime import iso_to_ms, to_iso

DAY = 86_400_000
WELCOME = {"id": "boas-vindas", "name": "Boas-vindas", "on": [{"message": []}],
           "steps": [{"id": "nome", "collect": ["nome"]}]}
NOME = {"nome": {"type": "string", "ask": "Pergunte o nome."}}


def test_first_message_to_a_catch_all_speaks_once_with_no_understand_call():
    agent, provider, _ = make_agent([WELCOME], fields=NOME, speak=[{"message": "Oi! Qual é o seu nome?", "nome": None}])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert r.changed is True
    assert r.llm_calls == 1
    assert provider.names() == ["speak"]
    assert [(m.key, m.kind, m.text) for m in r.messages] == [("boas-vindas#m1:nome:1", "ai", "Oi! Qual é o seu nome?")]
    assert [s.run_id for s in r.started] == ["boas-vindas#m1"]
    assert r.session.last_assistant_at == T0
    assert r.session.last_user_at == T0
    run = run_of(r.session, "boas-vindas")
    assert (run.status, run.asked, run.visits) == ("asking", {"nome": 1}, {"nome": 1})
    assert r.session.claims == {"boas-vindas:s1:": {"at": T0}}
    assert r.session.inputs == ["m1"]
    assert r.session.version == 0


def test_replay_of_the_same_message_is_a_duplicate_and_changes_nothing():
    agent, provider, _ = make_agent([WELCOME], fields=NOME, speak=[{"message": "Oi!", "nome": None}])
    first = agent.turn(session_id="s1", message="oi", id="m1")
    again = agent.turn(session_id="s1", message="oi", id="m1", session=first.session)
    assert again.changed is False
    assert [(o.key, o.kind, o.status, o.code) for o in again.outcomes] == [("m1", "wait", "skipped", "duplicate-input")]
    assert again.outcomes[0].message
    assert again.messages == [] and again.schedule == [] and again.llm_calls == 0
    assert again.session == first.session
    assert len(provider.calls) == 1


def test_start_with_a_one_day_wait_then_a_prompt():
    flow = {"id": "lembrete", "name": "Lembrete",
            "steps": [{"id": "espera", "wait": "1d"}, {"id": "aviso", "prompt": "Lembre a pessoa da reunião."}]}
    agent, provider, clock = make_agent([flow], fields={}, speak=[{"message": "Oi! Lembrete da reunião."}])
    r = agent.turn(session_id="s1", start={"flow": "lembrete", "key": "k1"})
    assert r.llm_calls == 0 and r.messages == []
    wake = f"lembrete#k1:espera:{T0_MS + DAY}"
    assert [(e.key, to_iso(e.at), e.replaces) for e in r.schedule] == [(wake, "2026-09-21T10:00:00.000Z", None)]
    assert [(o.kind, o.status, o.code, o.key) for o in r.outcomes] == [("wait", "waiting", None, "lembrete#k1:espera:1")]
    assert r.outcomes[0].until == "2026-09-21T10:00:00.000Z"
    run = run_of(r.session, "lembrete")
    assert run.status == "waiting" and run.waiting.key == wake and run.waiting.set_at == T0
    assert r.session.claims == {"lembrete:s1:k1": {"at": T0}}

    clock.advance("1d")
    w = agent.turn(session_id="s1", wake=wake, session=r.session)
    assert [(o.kind, o.status, o.code, o.next) for o in w.outcomes[:1]] == [("wait", "ok", "no-reply", None)]
    assert w.outcomes[0].key is None
    assert w.llm_calls == 1
    assert [(m.key, m.kind) for m in w.messages] == [("lembrete#k1:aviso:1", "ai")]
    assert w.session.last_assistant_at == "2026-09-21T10:00:00.000Z"
    assert "There is no new message from the customer" in provider.calls[0].prompt
    assert [e.reason for e in w.ended] == ["end"]
    assert w.session.runs == []


def test_event_with_after_parks_then_is_replaced_then_is_already_claimed():
    flow = {"id": "interesse", "name": "Interesse", "on": [{"event": "stage", "after": "1h"}],
            "steps": [{"id": "oi", "say": "Vi que você avançou!"}]}
    agent, _, _ = make_agent([flow], fields={}, events={"stage": {}})
    r = agent.turn(session_id="s1", event="stage", payload={"deal": 7}, key="stage:7")
    assert r.llm_calls == 0
    assert [(s.run_id, s.dedupe_key) for s in r.started] == [("interesse#stage:7", "interesse:s1:stage:7")]
    assert [e.key for e in r.schedule] == [f"interesse#stage:7:start:{T0_MS + 3_600_000}"]
    first = r.outcomes[0]
    assert (first.kind, first.status, first.code, first.key) == ("wait", "waiting", "awaiting-trigger", None)
    assert first.until == "2026-09-20T11:00:00.000Z"
    run = run_of(r.session, "interesse")
    assert run.step_id is None and run.status == "waiting" and run.input == {"deal": 7}

    r2 = agent.turn(session_id="s1", event="stage", payload={"deal": 8}, key="stage:8", session=r.session)
    assert [(e.id, e.reason) for e in r2.ended] == [("interesse#stage:7", "replaced")]
    assert r2.outcomes[0].code == "awaiting-trigger"
    assert [x.id for x in r2.session.runs] == ["interesse#stage:8"]

    r3 = agent.turn(session_id="s1", event="stage", payload={"deal": 8}, key="stage:8", session=r2.session)
    assert [(s.flow_id, s.trigger_key, s.code) for s in r3.skipped] == [("interesse", "stage:8", "already-claimed")]
    assert r3.outcomes == [] and r3.started == []
    # the replaced run's wake arrives later and is stale
    stale = agent.turn(session_id="s1", wake=r.schedule[0].key, session=r3.session)
    assert stale.changed is False and codes(stale) == ["stale-wake"]


def test_mention_say_while_triage_asks_silences_the_floor_talk():
    mention = {"id": "preco", "name": "Preço", "on": [{"mention": ["pergunta o preço"]}],
               "steps": [{"id": "tabela", "say": "Nossos planos começam em R$ 99."}, {"id": "avisa", "do": "notify"}]}
    notified = []
    agent, provider, _ = make_agent(
        [triage_flow(), mention],
        understand=[{"fields": {}}, {"mentions": {"preco": True}, "fields": {}}],
        speak=[{"message": "Oi! Com quem eu falo?", "nome": None, "empresa": None}],
        actions={"notify": {"parameters": {}, "run": lambda p, ctx: notified.append(ctx.key) or {"ok": True}}},
    )
    host = Host(agent, agent.clock)
    host.message("oi", "m1")
    r = host.message("quanto custa?", "m2")
    assert r.llm_calls == 1
    assert provider.names() == ["understand", "speak", "understand"]
    assert [(m.kind, m.key) for m in r.messages] == [("verbatim", "preco#m2:tabela:1")]
    assert notified == ["preco#m2:avisa:1"]
    line = r.outcomes[-1]
    assert (line.kind, line.status, line.code, line.key) == ("collect", "skipped", "another-reply", "triagem#m1:quem:1")
    assert run_of(r.session, "triagem").status == "asking"


def test_retry_ladder_five_deferrals_then_failed():
    agent, provider, clock = make_agent(
        [triage_flow()],
        understand=[{"fields": {}}],
        speak=[ProviderError("mock", "network", "boom")] * 6,
    )
    host = Host(agent, clock)
    r = host.message("oi", "m1")
    ladder = [60_000, 300_000, 900_000, 3_600_000, 21_600_000]
    seen = []
    for delay in ladder:
        line = r.outcomes[-1]
        assert (line.kind, line.status, line.code, line.key) == ("collect", "deferred", "provider-unavailable",
                                                                 "triagem#m1:quem:1")
        now = iso_to_ms(to_iso(clock.now()))
        assert line.until == to_iso(clock.now().__class__.fromtimestamp((now + delay) / 1000, clock.now().tzinfo))
        (entry,) = r.schedule
        assert entry.key == f"triagem#m1:quem:1:retry:{now + delay}"
        seen.append(entry.key)
        assert r.changed and r.messages == []
        clock.advance(delay)
        (r,) = host.fire_due()
        assert r.llm_calls == 1
    line = r.outcomes[-1]
    assert (line.kind, line.status, line.code) == ("collect", "failed", "provider-unavailable")
    assert [e.reason for e in r.ended] == ["failed"]
    assert r.schedule == [] and r.session.runs == []
    assert len(set(seen)) == 5


def test_auth_error_fails_at_once_with_no_wake():
    agent, _, _ = make_agent([triage_flow()], understand=[{"fields": {}}],
                             speak=[ProviderError("mock", "auth", "bad key")])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert [(o.status, o.code) for o in r.outcomes] == [("failed", "provider-auth")]
    assert r.schedule == [] and [e.reason for e in r.ended] == ["failed"]
    assert r.changed is True


def test_max_asks_two_then_the_step_moves_on():
    agent, provider, _ = make_agent(
        [triage_flow()],
        fields={**__import__("scenarios.kit", fromlist=["TRIAGE_FIELDS"]).TRIAGE_FIELDS},
        understand=[{"fields": {"nome": "Ana", "empresa": "ACME"}}, {"fields": {}}, {"fields": {}}, {"fields": {}}],
        speak=[
            {"message": "Quantas pessoas?", "tamanho": None},
            {"message": "E o tamanho?", "tamanho": None},
            {"message": "Tudo certo?", "confirmado": None},
        ],
    )
    host = Host(agent, agent.clock)
    r1 = host.message("sou Ana da ACME", "m1")
    assert [o.code for o in r1.outcomes][:1] == ["already-known"]
    run = run_of(r1.session, "triagem")
    assert run.step_id == "porte" and run.asked == {"tamanho": 1}
    r2 = host.message("hmm", "m2")
    assert run_of(r2.session, "triagem").asked == {"tamanho": 2}
    r3 = host.message("não sei", "m3")
    lines = [(o.kind, o.status, o.code, o.detail, o.next) for o in r3.outcomes]
    assert lines[0] == ("collect", "skipped", "max-asks", "tamanho", None)
    assert lines[1] == ("collect", "ok", None, None, None)  # resuming asker moved without speaking
    assert r3.outcomes[1].key == "triagem#m1:porte:1"
    assert [m.key for m in r3.messages] == ["triagem#m1:confirma:1"]


def test_confirm_loop_clears_the_field_and_its_asks():
    agent, provider, _ = make_agent(
        [triage_flow()],
        understand=[{"fields": {"nome": "Ana", "empresa": "ACME", "tamanho": "11-50"}}, {"fields": {}},
                    {"fields": {}}],
        speak=[
            {"message": "Ana, da ACME, 11-50 pessoas. Certo?", "confirmado": None},
            {"message": "Ok!", "confirmado": False},
            {"message": "E agora, tudo certo?", "confirmado": None},
        ],
    )
    host = Host(agent, agent.clock)
    r1 = host.message("sou Ana da ACME, 11-50 pessoas", "m1")
    assert codes(r1)[:2] == ["already-known", "already-known"]
    assert r1.messages[0].key == "triagem#m1:confirma:1"
    r2 = host.message("não", "m2")
    keys = [(o.step_id, o.code, o.key) for o in r2.outcomes]
    assert ("ok", None, "triagem#m1:ok:1") in keys
    assert ("quem", "already-known", "triagem#m1:quem:2") in keys
    assert ("porte", "already-known", "triagem#m1:porte:2") in keys
    # the confirm step is reached after this turn's speak call: it waits for the next message
    assert [m.key for m in r2.messages] == ["triagem#m1:confirma:1"]
    assert texts(r2) == ["Ok!"]
    run = run_of(r2.session, "triagem")
    assert "confirmado" not in r2.session.data
    assert (run.step_id, run.status, run.visits["confirma"]) == ("confirma", "asking", 2)
    assert "confirmado" not in run.asked
    r3 = host.message("a empresa é outra", "m3")
    assert [m.key for m in r3.messages] == ["triagem#m1:confirma:2"]
    assert texts(r3) == ["E agora, tudo certo?"]
    assert run_of(r3.session, "triagem").asked["confirmado"] == 1
