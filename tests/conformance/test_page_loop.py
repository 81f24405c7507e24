"""The page's "The loop" section: Ana behind a channel and a queue, the host loop, the no-op
rules, compare-and-swap saves, conflict replays, send-after-save. From the page and README.
"""

from __future__ import annotations

import pytest

from falai_django import (
    Agent,
    GeminiProvider,
    MemoryStore,
    PostgresStore,
    SessionConflictError,
    assistant_message,
    user_message,
)
from falai_django.testing import fake_clock, mock_provider

from .page_support import ANA_FIELDS, TRIAGEM, Host, RacingStore, build_ana

SID = "5511999990000"
FIRST = {"message": "oi, quero saber como funciona", "id": "wamid.HBgL"}


def _any_understand(_request):
    return {}


def _any_speak(_request):
    return {"message": "Oi! Com quem eu falo, e de qual empresa?"}


def _provider(n: int = 12):
    return mock_provider(understand=[_any_understand] * n, speak=[_any_speak] * n)


@pytest.fixture
def clock():
    return fake_clock("2026-09-21T10:00:00Z")


@pytest.fixture
def pg_store(pg_conn, pg_table):
    store = PostgresStore(client=pg_conn, tables={"sessions": pg_table})
    store.initialize()
    return store


# --------------------------------------------------------------------------- the agent


def test_ana_builds_exactly_as_on_the_page_with_a_gemini_provider():
    provider = GeminiProvider(api_key="test-key-not-used", model="gemini-2.5-flash")
    agent = build_ana(provider)
    assert isinstance(agent, Agent)
    assert agent.name == "Ana"
    assert agent.provider is provider
    assert provider.name == "gemini"
    assert [flow.id for flow in agent.flows] == ["triagem"]
    assert list(agent.fields) == ["nome", "empresa", "tamanho", "confirmado"]


def test_ana_also_builds_from_keyword_flow_arguments():
    from falai_django import falai

    f = falai().fields(ANA_FIELDS)
    agent = f.agent(name="Ana", provider=_provider(), flows=[f.flow(**TRIAGEM)])
    assert [flow.id for flow in agent.flows] == ["triagem"]


def test_gemini_provider_with_empty_env_key_is_refused_loudly():
    with pytest.raises(Exception, match=r"apiKey is empty"):
        GeminiProvider(api_key="", model="gemini-2.5-flash")


# --------------------------------------------------------------------------- the loop, first message


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_page_first_message_is_saved_then_sent(backend, request, clock):
    store = MemoryStore() if backend == "memory" else request.getfixturevalue("pg_store")
    host = Host(build_ana(_provider(), clock), store)
    assert store.load(SID) is None
    r = host.handle(SID, **FIRST)
    assert r.changed is True
    # the turn never bumps the version: the store does, by one
    assert r.session.version == 0
    assert store.load(SID).version == 1
    assert [m.text for _, m in host.sent] == ["Oi! Com quem eu falo, e de qual empresa?"]
    message = host.sent[0][1]
    assert message.kind == "ai"
    assert message.run_id == "triagem#wamid.HBgL"
    assert message.step_id == "quem"
    assert message.key == "triagem#wamid.HBgL:quem:1"
    assert message.after_ms == 0
    assert message.media is None
    assert r.schedule == []


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_a_second_delivery_of_the_same_id_is_ignored(backend, request, clock):
    store = MemoryStore() if backend == "memory" else request.getfixturevalue("pg_store")
    provider = _provider()
    host = Host(build_ana(provider, clock), store)
    host.handle(SID, **FIRST)
    calls = len(provider.calls)
    r = host.handle(SID, **FIRST)
    assert r.changed is False
    assert r.messages == [] and r.schedule == []
    assert [o.code for o in r.outcomes] == ["duplicate-input"]
    assert len(provider.calls) == calls  # nothing spent
    assert store.load(SID).version == 1
    assert len(host.sent) == 1


def test_turn_takes_the_page_input_spread_with_session_and_history(clock):
    agent = build_ana(_provider(), clock)
    history = [user_message("oi"), assistant_message("Oi! Com quem eu falo?")]
    input = {"session_id": SID, **FIRST}
    r = agent.turn(**input, session=None, history=history)
    assert r.changed is True
    assert r.session.id == SID
    # the framework does not keep the history in the session for the host
    assert "history" not in r.session.to_json()


# --------------------------------------------------------------------------- conflicts


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_a_race_on_the_same_message_sends_it_once(backend, request, clock):
    """Two webhooks deliver the same message at once: both turn, one saves, the other conflicts,
    replays against the new version, finds the id seen and returns changed false."""
    base = MemoryStore() if backend == "memory" else request.getfixturevalue("pg_store")
    agent = build_ana(_provider(), clock)
    other = Host(agent, base)
    racing = RacingStore(base, lambda: other.handle(SID, **FIRST))
    host = Host(agent, racing)
    r = host.handle(SID, **FIRST)
    assert racing.conflicts == 1
    assert host.attempts == 2
    assert r.changed is False
    assert [o.code for o in r.outcomes] == ["duplicate-input"]
    assert host.sent == []
    assert len(other.sent) == 1
    assert base.load(SID).version == 1


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_a_race_between_two_messages_replays_the_loser(backend, request, clock):
    base = MemoryStore() if backend == "memory" else request.getfixturevalue("pg_store")
    agent = build_ana(_provider(), clock)
    other = Host(agent, base)
    racing = RacingStore(base, lambda: other.handle(SID, message="Sou a Maria", id="wamid.2"))
    host = Host(agent, racing)
    r = host.handle(SID, **FIRST)
    assert racing.conflicts == 1
    assert host.attempts == 2
    assert r.changed is True
    saved = base.load(SID)
    assert saved.version == 2
    assert saved.inputs == ["wamid.2", "wamid.HBgL"]
    # the loser's first attempt sent nothing; its replay sent once
    assert len(host.sent) <= 1 and len(other.sent) == 1


def test_a_conflicting_save_raises_session_conflict_error_with_versions(clock):
    store = MemoryStore()
    agent = build_ana(_provider(), clock)
    r1 = agent.turn(session_id=SID, **FIRST, session=None, history=[])
    r2 = agent.turn(session_id=SID, message="oi de novo", id="wamid.X", session=None, history=[])
    store.save(r1.session, 0)
    with pytest.raises(SessionConflictError) as info:
        store.save(r2.session, 0)
    assert (info.value.session_id, info.value.expected_version, info.value.actual_version) == (SID, 0, 1)
    assert "[SessionConflictError]" in str(info.value)


def test_a_replay_of_the_same_input_mints_the_same_keys(clock):
    agent = build_ana(_provider(), clock)
    store = MemoryStore()
    host = Host(agent, store)
    host.handle(SID, **FIRST)
    session = store.load(SID)
    a = agent.turn(session_id=SID, message="Sou a Maria, da Acme", id="wamid.2", session=session, history=[])
    b = agent.turn(session_id=SID, message="Sou a Maria, da Acme", id="wamid.2", session=session, history=[])
    assert [m.key for m in a.messages] == [m.key for m in b.messages]
    assert [o.key for o in a.outcomes] == [o.key for o in b.outcomes]
    assert a.session.to_json() == b.session.to_json()
    # turn() never mutated the loaded session
    assert session.inputs == ["wamid.HBgL"]


def test_nothing_moved_is_changed_false(clock):
    """A wake nobody waits on on a session where nothing happens: changed false, nothing to do."""
    agent = build_ana(_provider(), clock)
    store = MemoryStore()
    Host(agent, store).handle(SID, **FIRST)
    r = agent.turn(session_id=SID, wake="triagem#nobody:w1:1", session=store.load(SID), history=[])
    assert r.changed is False
    assert r.messages == [] and r.schedule == []


def test_full_conversation_through_the_loop(clock):
    provider = mock_provider(
        understand=[{}, {"fields": {"nome": "Maria", "empresa": "Acme"}}, {"fields": {"tamanho": "11-50"}}],
        speak=[
            {"message": "Oi! Com quem eu falo, e de qual empresa?", "nome": None, "empresa": None},
            {"message": "Quantas pessoas trabalham aí?", "tamanho": None},
            {"message": "Maria, da Acme, 11-50 pessoas. Tudo certo?", "confirmado": None},
            {"message": "Perfeito!", "confirmado": True},
            {"message": "Obrigada! Um vendedor continua daqui."},
        ],
    )
    store = MemoryStore()
    host = Host(build_ana(provider, clock), store)
    for i, text in enumerate(["oi", "Sou a Maria, da Acme", "umas 30 pessoas", "sim", "valeu"]):
        host.handle(SID, message=text, id=f"w{i}")
        clock.advance("1m")
    data = store.load(SID).data
    assert data == {"nome": "Maria", "empresa": "Acme", "tamanho": "11-50", "confirmado": True}
    assert store.load(SID).version == 5
    texts = [m.text for _, m in host.sent]
    assert texts[:3] == [
        "Oi! Com quem eu falo, e de qual empresa?",
        "Quantas pessoas trabalham aí?",
        "Maria, da Acme, 11-50 pessoas. Tudo certo?",
    ]
    # history passed to the model: everything before this input, ending with Ana's last reply
    last_call = provider.calls[-1]
    history = last_call.input.history
    assert history[-1] == {"role": "assistant", "content": texts[-2]} or history[-1]["role"] == "assistant"
    assert all(item.get("content") != "valeu" for item in history)


def test_the_async_twin_runs_the_same_loop(clock):
    import asyncio

    agent = build_ana(_provider(), clock)
    store = MemoryStore()

    async def handle(session_id, **input):
        while True:
            session = store.load(session_id)
            r = await agent.aturn(session_id=session_id, **input, session=session, history=[])
            if not r.changed:
                return r
            try:
                store.save(r.session, session.version if session else 0)
            except SessionConflictError:
                continue
            return r

    r = asyncio.run(handle(SID, **FIRST))
    assert r.changed is True and [m.key for m in r.messages] == ["triagem#wamid.HBgL:quem:1"]
    again = asyncio.run(handle(SID, **FIRST))
    assert again.changed is False
    assert store.load(SID).version == 1
