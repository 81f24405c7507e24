"""Scenario: a wake and a message hit the same session version. The wake saves first; the
message's save raises SessionConflictError and the host replays it on the new version.
Nothing is sent twice, and a replay on one version mints the same keys."""

from __future__ import annotations

import pytest

from falai_django import MemoryStore, SessionConflictError

from .kit import T0_MS, make_agent, run_of, triage_flow

FOLLOW = {"id": "aviso", "name": "Aviso", "on": [{"event": "pago", "after": "1h"}],
          "steps": [{"id": "diz", "say": "Pagamento confirmado!"}]}


def dump(r):
    return ([m.to_json() for m in r.messages], [e.to_json() for e in r.schedule], [o.to_json() for o in r.outcomes],
            r.session.to_json())


def test_race_conflict_and_replay():
    agent, provider, clock = make_agent(
        [triage_flow(), FOLLOW], events={"pago": {}},
        understand=[{"fields": {}}, {"fields": {"nome": "Ana"}}, {"fields": {"nome": "Ana"}}],
        speak=[{"message": "Oi! Com quem falo?", "nome": None, "empresa": None},
               {"message": "E a empresa, Ana?", "empresa": None},
               {"message": "E a empresa, Ana?", "empresa": None}],
    )
    store = MemoryStore()
    r = agent.turn(session_id="s1", message="oi", id="m1")
    store.save(r.session, 0)
    s = store.load("s1")
    r = agent.turn(session_id="s1", event="pago", key="pay:1", session=s)
    store.save(r.session, s.version)
    clock.advance("1h")
    wake_key = f"aviso#pay:1:start:{T0_MS + 3_600_000}"
    assert [e.key for e in r.schedule] == [wake_key]

    loaded = store.load("s1")  # both turns load version 2
    by_wake = agent.turn(session_id="s1", wake=wake_key, session=loaded)
    by_message = agent.turn(session_id="s1", message="sou a Ana", id="m2", session=loaded)
    sent = []
    store.save(by_wake.session, loaded.version)
    sent.extend(by_wake.messages)
    with pytest.raises(SessionConflictError) as info:
        store.save(by_message.session, loaded.version)
    assert (info.value.expected_version, info.value.actual_version) == (2, 3)

    again = store.load("s1")
    replay = agent.turn(session_id="s1", message="sou a Ana", id="m2", session=again)
    saved = store.save(replay.session, again.version)
    sent.extend(replay.messages)
    assert [(m.key, m.text) for m in sent] == [("aviso#pay:1:diz:1", "Pagamento confirmado!"),
                                              ("triagem#m1:quem:1", "E a empresa, Ana?")]
    # the lost attempt would have sent the same key: a sender deduping on it sends once
    assert [m.key for m in by_message.messages] == [m.key for m in replay.messages]
    assert saved.version == 4 and saved.data == {"nome": "Ana"}
    assert run_of(saved, "aviso") is None and run_of(saved, "triagem").asked == {"nome": 1, "empresa": 2}
    assert saved.inputs == ["m1", "m2"]


def test_replay_on_the_same_version_is_identical():
    def build():
        return make_agent([triage_flow(), FOLLOW], events={"pago": {}},
                          understand=[{"fields": {"nome": "Ana"}}],
                          speak=[{"message": "Oi, Ana! E a empresa?", "empresa": None}])

    agent_a, _, _ = build()
    agent_b, _, _ = build()
    a = agent_a.turn(session_id="s1", message="oi, sou a Ana", id="m1")
    b = agent_b.turn(session_id="s1", message="oi, sou a Ana", id="m1")
    assert dump(a) == dump(b)
    e1 = agent_a.turn(session_id="s1", event="pago", key="pay:1", session=a.session)
    e2 = agent_b.turn(session_id="s1", event="pago", key="pay:1", session=a.session)
    assert dump(e1) == dump(e2)
    assert a.session.version == 0  # turn() never bumps the version


def test_silence_nudge_races_a_reply_and_the_replay_ends_the_nudge():
    retomar = {"id": "retomar", "name": "Retomar", "on": [{"silence": "24h"}],
               "steps": [{"id": "p1", "prompt": "Retome."}, {"id": "w1", "wait": "2d", "else": "end"},
                         {"id": "tchau", "say": "Tchau!"}]}
    agent, provider, clock = make_agent(
        [triage_flow(), retomar],
        understand=[{"fields": {"nome": "Ana"}}, {"fields": {}}, {"fields": {}}],
        speak=[{"message": "Oi Ana! De qual empresa?", "empresa": None},
               {"message": "Oi Ana, ainda faz sentido?"},
               {"message": "Ótimo! E a empresa?", "empresa": None},   # the lost attempt spends one too
               {"message": "Ótimo! E a empresa?", "empresa": None}])
    store = MemoryStore()
    t0 = agent.turn(session_id="s1", message="oi, sou a Ana", id="m1")
    store.save(t0.session, 0)
    clock.advance("24h")
    seen_by_wake, seen_by_text = store.load("s1"), store.load("s1")
    wake = agent.turn(session_id="s1", wake=t0.schedule[0].key, session=seen_by_wake, history=[])
    assert [m.text for m in wake.messages] == ["Oi Ana, ainda faz sentido?"]
    store.save(wake.session, 1)
    lost = agent.turn(session_id="s1", message="faz sim", id="m2", session=seen_by_text)
    assert lost.ended == [] and [m.text for m in lost.messages] == ["Ótimo! E a empresa?"]
    with pytest.raises(SessionConflictError):
        store.save(lost.session, 1)
    v2 = store.load("s1")
    replay = agent.turn(session_id="s1", message="faz sim", id="m2", session=v2)
    assert [(e.flow_id, e.reason) for e in replay.ended] == [("retomar", "end")]
    assert [(o.kind, o.status, o.code) for o in replay.outcomes if o.kind == "wait"] == [("wait", "ok", "replied")]
    v3 = store.save(replay.session, 2)
    assert v3.version == 3
    clock.advance("2d")
    stale = agent.turn(session_id="s1", wake=wake.schedule[0].key, session=v3)
    assert stale.changed is False and [o.code for o in stale.outcomes] == ["stale-wake"]
