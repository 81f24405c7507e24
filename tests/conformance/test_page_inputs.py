"""The page's "On every input" section: history, silenced (three forms) and context.

From the page, the README ("One addition the page makes") and engine-turn.md §1.3.
"""

from __future__ import annotations

from falai_django import MemoryStore, assistant_message, falai, user_message
from falai_django.testing import fake_clock, mock_provider

from .page_support import ANA_FIELDS, TRIAGEM, Host, build_ana

SID = "5511999990000"
T0 = "2026-09-21T10:00:00.000Z"
REASON = "um humano assumiu a conversa"


def _speak(text):
    return lambda _request: {"message": text}


# --------------------------------------------------------------------------- history


def test_history_items_are_role_content_dicts():
    assert user_message("oi, quero saber como funciona") == {"role": "user", "content": "oi, quero saber como funciona"}
    assert assistant_message("Oi! Com quem eu falo, e de qual empresa?") == {
        "role": "assistant",
        "content": "Oi! Com quem eu falo, e de qual empresa?",
    }


def test_history_reaches_the_model_and_the_current_message_is_quoted_once():
    provider = mock_provider(understand=[{}], speak=[{"message": "Prazer, Maria! De qual empresa?"}])
    agent = build_ana(provider, fake_clock(T0))
    history = [
        user_message("oi, quero saber como funciona"),
        assistant_message("Oi! Com quem eu falo, e de qual empresa?"),
    ]
    r = agent.turn(session_id=SID, message="Sou a Maria", id="m2", session=None, history=history)
    assert r.changed is True
    for call in provider.calls:
        items = [(h["role"], h["content"]) for h in call.input.history]
        assert items == [
            ("user", "oi, quero saber como funciona"),
            ("assistant", "Oi! Com quem eu falo, e de qual empresa?"),
        ]
        assert "Sou a Maria" in call.seen
    # the framework does not keep the history for the host
    assert "history" not in r.session.to_json()


def test_history_is_passed_on_wakes_too():
    clock = fake_clock(T0)
    f = falai().fields(ANA_FIELDS)
    flow = {"id": "t", "on": [{"message": []}], "steps": [{"id": "oi", "say": "Oi!"}, {"id": "w1", "wait": "1d"},
                                                          {"id": "volta", "prompt": "Retome a conversa."}]}
    provider = mock_provider(speak=[{"message": "Oi de novo!"}])
    agent = f.agent(name="Ana", provider=provider, clock=clock, flows=[f.flow(flow)])
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[])
    clock.advance("1d")
    history = [user_message("oi"), assistant_message("Oi!")]
    r2 = agent.turn(session_id=SID, wake=r.schedule[0].key, session=r.session, history=history)
    assert [m.text for m in r2.messages] == ["Oi de novo!"]
    assert [c.schema_name for c in provider.calls] == ["speak"]
    assert [(h["role"], h["content"]) for h in provider.calls[0].input.history] == [("user", "oi"), ("assistant", "Oi!")]


# --------------------------------------------------------------------------- silenced: plain string


def _notify_agent(provider, clock, steps, seen):
    f = falai().fields(ANA_FIELDS)

    def run(params, ctx):
        seen.append({"params": dict(params), "silenced": ctx.silenced, "context": ctx.context, "key": ctx.key})
        return {"ok": True}

    notify = f.action(parameters={"message": {"type": "string"}}, run=run)
    flow = {"id": "triagem", "on": [{"message": []}], "steps": steps}
    return f.agent(name="Ana", provider=provider, clock=clock, flows=[f.flow(flow)], actions={"notify": notify})


def test_plain_string_spends_nothing_sends_nothing_and_do_steps_still_run():
    seen: list = []
    provider = mock_provider()
    steps = [
        {"id": "registrar", "do": "notify", "with": {"message": "lead novo"}},
        {"id": "quem", "prompt": "Descubra quem é.", "collect": ["nome", "empresa"]},
    ]
    agent = _notify_agent(provider, fake_clock(T0), steps, seen)
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[], silenced=REASON,
                   context={"cliente": 42})
    assert provider.calls == []
    assert r.llm_calls == 0
    assert r.messages == []
    assert seen == [{"params": {"message": "lead novo"}, "silenced": REASON, "context": {"cliente": 42},
                     "key": "triagem#m1:registrar:1"}]
    # the run reached a fresh talk step while silenced: it ends, the log says why
    line = r.outcomes[-1]
    assert (line.step_id, line.code, line.detail) == ("quem", "silenced", REASON)
    assert line.status == "skipped"
    assert [run.reason for run in r.ended] == ["skipped"]
    assert r.session.runs == []
    assert r.changed is True


def test_an_asking_run_stays_asking_and_speaks_when_the_gate_opens():
    provider = mock_provider(
        understand=[lambda _r: {}] * 3,
        speak=[_speak("Oi! Com quem eu falo?"), _speak("Prazer! E de qual empresa?")],
    )
    store = MemoryStore()
    host = Host(build_ana(provider, fake_clock(T0)), store)
    host.handle(SID, message="oi", id="m1")
    calls = len(provider.calls)
    r = host.handle(SID, message="Sou a Maria", id="m2", silenced=REASON)
    assert len(provider.calls) == calls
    assert r.messages == [] and r.llm_calls == 0
    assert [o for o in r.outcomes if o.code == "silenced"] == []
    run = store.load(SID).runs[0]
    assert (run.step_id, run.status) == ("quem", "asking")
    assert store.load(SID).inputs == ["m1", "m2"]
    r3 = host.handle(SID, message="alô?", id="m3")
    assert [m.text for m in r3.messages] == ["Prazer! E de qual empresa?"]


def test_a_say_step_reached_while_silenced_ends_the_run():
    seen: list = []
    steps = [{"id": "aviso", "say": "Já te respondo!"}, {"id": "alerta", "do": "notify", "with": {"message": "x"}}]
    agent = _notify_agent(mock_provider(), fake_clock(T0), steps, seen)
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[], silenced=REASON)
    assert r.messages == []
    assert seen == []
    assert [(o.step_id, o.status, o.code, o.detail) for o in r.outcomes] == [("aviso", "skipped", "silenced", REASON)]
    assert [run.reason for run in r.ended] == ["skipped"]


# --------------------------------------------------------------------------- silenced: understand


def test_understand_form_spends_the_understand_call_and_fields_land():
    provider = mock_provider(understand=[{"fields": {"nome": "Maria", "empresa": "Acme"}}])
    agent = build_ana(provider, fake_clock(T0))
    r = agent.turn(session_id=SID, message="Sou a Maria, da Acme", id="m1", session=None, history=[],
                   silenced={"reason": REASON, "understand": True})
    assert [c.schema_name for c in provider.calls] == ["understand"]
    assert r.llm_calls == 1
    assert r.messages == []
    assert r.session.data == {"nome": "Maria", "empresa": "Acme"}


def test_understand_false_is_the_plain_form():
    provider = mock_provider()
    agent = build_ana(provider, fake_clock(T0))
    r = agent.turn(session_id=SID, message="Sou a Maria", id="m1", session=None, history=[],
                   silenced={"reason": REASON})
    assert provider.calls == [] and r.messages == []


# --------------------------------------------------------------------------- silenced: skip


def test_skip_form_skips_the_say_and_takes_then_so_the_do_step_still_alerts():
    seen: list = []
    steps = [{"id": "aviso", "say": "Já te respondo!"}, {"id": "alerta", "do": "notify", "with": {"message": "x"}}]
    provider = mock_provider()
    agent = _notify_agent(provider, fake_clock(T0), steps, seen)
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[],
                   silenced={"reason": "janela de 24h fechada", "skip": True})
    assert provider.calls == [] and r.messages == []
    aviso = [o for o in r.outcomes if o.step_id == "aviso"]
    assert [(o.status, o.code, o.detail, o.next) for o in aviso] == [
        ("skipped", "silenced", "janela de 24h fechada", "alerta")
    ]
    assert [s["params"] for s in seen] == [{"message": "x"}]
    assert seen[0]["silenced"] == "janela de 24h fechada"


def test_skip_form_skips_a_fresh_talk_step_and_follows_its_then():
    seen: list = []
    steps = [
        {"id": "quem", "prompt": "Descubra quem é.", "collect": ["nome"], "then": "alerta"},
        {"id": "outro", "say": "nunca"},
        {"id": "alerta", "do": "notify", "with": {"message": "cliente escreveu"}},
    ]
    provider = mock_provider()
    agent = _notify_agent(provider, fake_clock(T0), steps, seen)
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[],
                   silenced={"reason": "janela fechada", "skip": True})
    assert provider.calls == [] and r.messages == []
    quem = [o for o in r.outcomes if o.step_id == "quem"]
    assert [(o.status, o.code, o.detail, o.next) for o in quem] == [("skipped", "silenced", "janela fechada", "alerta")]
    assert [s["params"] for s in seen] == [{"message": "cliente escreveu"}]
    assert "outro" not in [o.step_id for o in r.outcomes]


def test_skip_form_leaves_an_asking_run_asking():
    provider = mock_provider(understand=[lambda _r: {}] * 3, speak=[_speak("Oi! Com quem eu falo?"), _speak("E aí?")])
    store = MemoryStore()
    host = Host(build_ana(provider, fake_clock(T0)), store)
    host.handle(SID, message="oi", id="m1")
    calls = len(provider.calls)
    r = host.handle(SID, message="alô", id="m2", silenced={"reason": "janela fechada", "skip": True})
    assert len(provider.calls) == calls and r.messages == []
    run = store.load(SID).runs[0]
    assert (run.step_id, run.status) == ("quem", "asking")


# --------------------------------------------------------------------------- context


def test_context_reaches_actions_on_every_input_kind():
    seen: list = []
    steps = [{"id": "registrar", "do": "notify", "with": {"message": "{{context.nome}}"}}, {"id": "fim", "say": "ok"}]
    agent = _notify_agent(mock_provider(), fake_clock(T0), steps, seen)
    agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[], context={"nome": "Maria"})
    assert seen[0]["context"] == {"nome": "Maria"}
    assert seen[0]["params"] == {"message": "Maria"}


def test_ana_has_no_context_and_needs_none():
    provider = mock_provider(understand=[{}], speak=[{"message": "Oi!"}])
    agent = build_ana(provider, fake_clock(T0))
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[])
    assert r.changed is True


def test_triagem_flow_dict_is_unchanged_by_building():
    import copy

    before = copy.deepcopy(TRIAGEM)
    build_ana(mock_provider())
    assert TRIAGEM == before
