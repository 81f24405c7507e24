"""The page's "Timers" and "When the queue loses its jobs" sections: ScheduleEntry, silence
`replaces`, stale wakes, and `pending_wakes`. From the page, README and engine-turn.md §4–§6.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from falai_django import MemoryStore, falai
from falai_django.testing import MemoryScheduler, fake_clock, mock_provider

from .page_support import ANA_FIELDS, TRIAGEM, Host

SID = "5511999990000"
T0 = "2026-09-21T10:00:00.000Z"
T0_MS = 1790000000000 + 244000000 - 3 * 86_400_000  # 2026-09-21T10:00:00Z


def test_t0_constant():
    assert datetime.fromtimestamp(T0_MS / 1000, UTC) == datetime(2026, 9, 21, 10, tzinfo=UTC)


def _agent(provider, clock, flows, **options):
    f = falai().fields(ANA_FIELDS)
    return f.agent(name="Ana", provider=provider, clock=clock, flows=[f.flow(x) for x in flows], **options)


WAIT_FLOW = {
    "id": "triagem",
    "name": "Triagem",
    "on": [{"message": []}],
    "steps": [
        {"id": "w1", "wait": "3d"},
        {"id": "tchau", "prompt": "Pergunte se a pessoa ainda quer conversar."},
    ],
}


# --------------------------------------------------------------------------- the page's example entry


def test_the_pages_schedule_entry_for_w1_wait_3d():
    clock = fake_clock(T0)
    provider = mock_provider()
    agent = _agent(provider, clock, [WAIT_FLOW], idle="silent")
    r = agent.turn(session_id=SID, message="oi, quero saber como funciona", id="wamid.HBgL", session=None, history=[])
    assert r.changed is True
    assert len(r.schedule) == 1
    entry = r.schedule[0]
    assert entry.key == "triagem#wamid.HBgL:w1:1790244000000"
    assert entry.at == datetime(2026, 9, 24, 10, 0, tzinfo=UTC)
    assert entry.at.tzinfo is not None and entry.at.utcoffset() == timedelta(0)
    assert entry.replaces is None
    assert r.messages == []
    assert provider.calls == []  # a lone catch-all reaching a wait, idle silent: nothing spent
    # every key contains ":"; the page's queue job id is the URI-encoded key
    assert ":" in entry.key
    assert quote(entry.key, safe="") == "triagem%23wamid.HBgL%3Aw1%3A1790244000000"


def test_the_wake_fires_once_and_a_second_fire_is_stale():
    clock = fake_clock(T0)
    provider = mock_provider(speak=[{"message": "Oi de novo! Ainda quer conversar?"}])
    store = MemoryStore()
    host = Host(_agent(provider, clock, [WAIT_FLOW], idle="silent"), store)
    host.handle(SID, message="oi", id="wamid.HBgL")
    scheduler = MemoryScheduler()
    for sid, entry in host.queued:
        scheduler.add(sid, entry)
    assert scheduler.due(clock.now()) == []
    clock.advance("3d")
    due = scheduler.due(clock.now())
    assert [w.key for w in due] == ["triagem#wamid.HBgL:w1:1790244000000"]
    r = host.handle(SID, wake=due[0].key)
    assert r.changed is True
    assert [m.text for _, m in host.sent] == ["Oi de novo! Ainda quer conversar?"]
    assert [c.schema_name for c in provider.calls] == ["speak"]  # a wake spends no understand call
    codes = [(o.step_id, o.code) for o in r.outcomes]
    assert ("w1", "no-reply") in codes
    version = store.load(SID).version
    again = host.handle(SID, wake=due[0].key)
    assert again.changed is False
    assert [o.code for o in again.outcomes] == ["stale-wake"]
    assert again.outcomes[0].key == due[0].key
    assert store.load(SID).version == version
    assert len(host.sent) == 1


def test_a_wait_a_reply_already_resolved_makes_the_wake_stale():
    flow = {
        "id": "triagem",
        "on": [{"message": []}],
        "steps": [
            {"id": "w1", "wait": "3d", "else": "respondeu"},
            {"id": "lembrete", "say": "Ainda está aí?"},
            {"id": "respondeu", "say": "Que bom que voltou!"},
        ],
    }
    clock = fake_clock(T0)
    agent = _agent(mock_provider(understand=[{}] * 3), clock, [flow])
    store = MemoryStore()
    host = Host(agent, store)
    host.handle(SID, message="oi", id="m1")
    key = host.queued[0][1].key
    clock.advance("1h")
    r = host.handle(SID, message="voltei", id="m2")
    assert ("w1", "replied") in [(o.step_id, o.code) for o in r.outcomes]
    assert [m.text for _, m in host.sent] == ["Que bom que voltou!"]
    clock.advance("3d")
    stale = host.handle(SID, wake=key)
    assert stale.changed is False
    assert [o.code for o in stale.outcomes] == ["stale-wake"]


def test_a_wake_without_a_session_is_no_session():
    clock = fake_clock(T0)
    agent = _agent(mock_provider(), clock, [WAIT_FLOW])
    r = agent.turn(session_id=SID, wake="triagem#wamid.HBgL:w1:1790244000000", session=None, history=[])
    assert r.changed is False
    assert len(r.outcomes) == 1
    assert r.outcomes[0].code == "no-session"
    assert r.messages == [] and r.schedule == []


# --------------------------------------------------------------------------- silence wakes

RETOMAR = {
    "id": "retomar",
    "on": [{"silence": "24h"}],
    "steps": [{"id": "lembrete", "say": "Oi! Ainda quer saber como funciona?"}],
}


def _silence_agent(clock, speak=5, understand=5, **options):
    provider = mock_provider(
        understand=[lambda _r: {}] * understand,
        speak=[lambda _r: {"message": "Oi! Com quem eu falo, e de qual empresa?"}] * speak,
    )
    return _agent(provider, clock, [TRIAGEM, RETOMAR], **options), provider


def test_silence_wake_counts_from_last_assistant_at_and_replaces_the_earlier_one():
    clock = fake_clock(T0)
    agent, _ = _silence_agent(clock)
    store = MemoryStore()
    host = Host(agent, store)
    r1 = host.handle(SID, message="oi", id="m1")
    assert [(e.key, e.at, e.replaces) for e in r1.schedule] == [
        (f"silence:retomar:{SID}:{T0_MS}", datetime(2026, 9, 22, 10, tzinfo=UTC), None)
    ]
    clock.advance("2h")
    r2 = host.handle(SID, message="Sou a Maria", id="m2")
    t1 = T0_MS + 2 * 3_600_000
    assert [(e.key, e.at, e.replaces) for e in r2.schedule] == [
        (f"silence:retomar:{SID}:{t1}", datetime(2026, 9, 22, 12, tzinfo=UTC), f"silence:retomar:{SID}:{T0_MS}")
    ]
    # the superseded wake fires anyway: harmless, dropped
    clock.advance("1d")
    old = host.handle(SID, wake=f"silence:retomar:{SID}:{T0_MS}")
    assert old.changed is False
    assert [o.code for o in old.outcomes] == ["silence-broken"]
    # the current one is honoured: retomar speaks
    new = host.handle(SID, wake=f"silence:retomar:{SID}:{t1}")
    assert new.changed is True
    assert "Oi! Ainda quer saber como funciona?" in [m.text for m in new.messages]


def test_a_customer_who_wrote_after_the_silence_wake_breaks_it():
    clock = fake_clock(T0)
    agent, _ = _silence_agent(clock)
    store = MemoryStore()
    host = Host(agent, store)
    r1 = host.handle(SID, message="oi", id="m1")
    key = r1.schedule[0].key
    clock.advance("1h")
    # the customer writes while a human owns the conversation: nothing is said, so no new wake
    r2 = host.handle(SID, message="alô?", id="m2", silenced="humano assumiu")
    assert r2.messages == []
    clock.advance("1d")
    r3 = host.handle(SID, wake=key)
    assert r3.changed is False
    assert [o.code for o in r3.outcomes] == ["silence-broken"]


# --------------------------------------------------------------------------- pending_wakes


def _parked_and_silent_session(clock):
    flows = [
        {
            "id": "triagem",
            "on": [{"message": []}],
            "steps": [{"id": "oi", "say": "Oi!"}, {"id": "w1", "wait": "3d"}, {"id": "fim", "say": "Tchau"}],
        },
        RETOMAR,
    ]
    provider = mock_provider()
    agent = _agent(provider, clock, flows)
    r = agent.turn(session_id=SID, message="oi", id="wamid.HBgL", session=None, history=[])
    return agent, provider, r


def test_pending_wakes_returns_parked_runs_then_silence_flows():
    clock = fake_clock(T0)
    agent, provider, r = _parked_and_silent_session(clock)
    turn_keys = sorted(e.key for e in r.schedule)
    session = r.session
    before = copy.deepcopy(session.to_json())
    clock.advance("5h")
    wakes = agent.pending_wakes(session=session, context=None)
    assert [(w.key, w.at) for w in wakes] == [
        ("triagem#wamid.HBgL:w1:1790244000000", datetime(2026, 9, 24, 10, tzinfo=UTC)),
        (f"silence:retomar:{SID}:{T0_MS}", datetime(2026, 9, 22, 10, tzinfo=UTC)),
    ]
    assert sorted(w.key for w in wakes) == turn_keys
    assert all(w.replaces is None for w in wakes)
    # a pure query: no model call, nothing changed, the same answer twice
    assert provider.calls == []
    assert session.to_json() == before
    again = agent.pending_wakes(session=session, context=None)
    assert [(w.key, w.at) for w in again] == [(w.key, w.at) for w in wakes]


def test_pending_wakes_judges_the_trigger_if_on_the_context_passed():
    clock = fake_clock(T0)
    f = falai().fields(ANA_FIELDS)
    vip = f.condition(lambda ctx, arg: bool((ctx.context or {}).get("vip")))
    flows = [
        {"id": "triagem", "on": [{"message": []}], "steps": [{"id": "oi", "say": "Oi!"}]},
        {"id": "retomar", "on": [{"silence": "24h", "if": {"vip": True}}], "steps": [{"id": "l", "say": "Oi?"}]},
    ]
    agent = f.agent(name="Ana", provider=mock_provider(), clock=clock, flows=[f.flow(x) for x in flows],
                    conditions={"vip": vip})
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[], context={"vip": True})
    session = r.session
    assert [w.key for w in agent.pending_wakes(session=session, context={"vip": True})] == [
        f"silence:retomar:{SID}:{T0_MS}"
    ]
    assert agent.pending_wakes(session=session, context={"vip": False}) == []


def test_pending_wakes_judges_repeat_once_on_session_and_passed_claims():
    clock = fake_clock(T0)
    agent, _, r = _parked_and_silent_session(clock)
    session = r.session
    held = {"retomar:" + SID + ":": "2026-09-01T00:00:00.000Z"}
    wakes = agent.pending_wakes(session=session, context=None, claims={"held": held, "active": []})
    assert [w.key for w in wakes] == ["triagem#wamid.HBgL:w1:1790244000000"]


def test_pending_wakes_gives_no_silence_wake_when_the_customer_wrote_last():
    clock = fake_clock(T0)
    agent, _, r = _parked_and_silent_session(clock)
    blob = r.session.to_json()
    blob["lastUserAt"] = "2026-09-21T11:00:00.000Z"
    from falai_django import Session

    wakes = agent.pending_wakes(session=Session.from_json(blob), context=None)
    assert [w.key for w in wakes] == ["triagem#wamid.HBgL:w1:1790244000000"]


def test_pending_wakes_of_a_saved_session_and_replaying_them():
    """The queue lost its jobs: rebuild from the store, fire; firing twice is dropped as stale."""
    clock = fake_clock(T0)
    agent, _, r = _parked_and_silent_session(clock)
    store = MemoryStore()
    store.save(r.session, 0)
    session = store.load(SID)
    wakes = agent.pending_wakes(session=session, context=None)
    scheduler = MemoryScheduler()
    for wake in wakes:
        scheduler.add(session.id, wake)
        scheduler.add(session.id, wake)  # enqueued twice: one job per key
    assert scheduler.size == 2
    clock.advance("3d")
    host = Host(agent, store)
    for wake in scheduler.due(clock.now()):
        host.handle(SID, wake=wake.key)
    again = host.handle(SID, wake="triagem#wamid.HBgL:w1:1790244000000")
    assert again.changed is False
    assert [o.code for o in again.outcomes] == ["stale-wake"]


# --------------------------------------------------------------------------- more of the page's timer rules


def test_a_wait_of_ten_seconds_rides_inline_and_longer_parks():
    clock = fake_clock(T0)
    inline = {"id": "t", "on": [{"message": []}],
              "steps": [{"id": "a", "say": "Um"}, {"id": "p", "wait": "10s"}, {"id": "b", "say": "Dois"}]}
    agent = _agent(mock_provider(), clock, [inline])
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[])
    assert [(m.text, m.after_ms) for m in r.messages] == [("Um", 0), ("Dois", 10_000)]
    assert r.schedule == []
    parked = {"id": "t", "on": [{"message": []}],
              "steps": [{"id": "a", "say": "Um"}, {"id": "p", "wait": "11s"}, {"id": "b", "say": "Dois"}]}
    agent2 = _agent(mock_provider(), clock, [parked])
    r2 = agent2.turn(session_id=SID, message="oi", id="m1", session=None, history=[])
    assert [m.text for m in r2.messages] == ["Um"]
    assert [(e.key, e.at) for e in r2.schedule] == [(f"t#m1:p:{T0_MS + 11_000}", datetime(2026, 9, 21, 10, 0, 11,
                                                                                          tzinfo=UTC))]


def test_memory_scheduler_drops_the_replaced_silence_wake():
    clock = fake_clock(T0)
    agent, _ = _silence_agent(clock)
    store = MemoryStore()
    host = Host(agent, store)
    scheduler = MemoryScheduler()
    for r in (host.handle(SID, message="oi", id="m1"), host.handle(SID, message="Sou a Maria", id="m2")):
        for entry in r.schedule:
            scheduler.add(SID, entry)
    assert scheduler.size == 1
    clock.advance("2d")
    assert [w.key for w in scheduler.due(clock.now())] == [f"silence:retomar:{SID}:{T0_MS}"]


def test_a_wake_and_a_message_race_the_wake_loses_and_is_dropped_as_stale():
    from .page_support import RacingStore

    flow = {
        "id": "triagem",
        "on": [{"message": []}],
        "steps": [
            {"id": "w1", "wait": "3d", "else": "respondeu"},
            {"id": "lembrete", "say": "Ainda está aí?"},
            {"id": "respondeu", "say": "Que bom que voltou!"},
        ],
    }
    clock = fake_clock(T0)
    agent = _agent(mock_provider(understand=[lambda _r: {}] * 4), clock, [flow], idle="silent")
    base = MemoryStore()
    first = Host(agent, base)
    first.handle(SID, message="oi", id="m1")
    key = first.queued[0][1].key
    clock.advance("3d")
    message_host = Host(agent, base)
    racing = RacingStore(base, lambda: message_host.handle(SID, message="voltei", id="m2"))
    wake_host = Host(agent, racing)
    r = wake_host.handle(SID, wake=key)
    assert racing.conflicts == 1
    assert r.changed is False and [o.code for o in r.outcomes] == ["stale-wake"]
    assert wake_host.sent == []
    assert [m.text for _, m in message_host.sent] == ["Que bom que voltou!"]


def test_a_silenced_message_still_resolves_a_wait():
    flow = {
        "id": "triagem",
        "on": [{"message": []}],
        "steps": [
            {"id": "w1", "wait": "3d", "else": "respondeu"},
            {"id": "lembrete", "say": "Ainda está aí?"},
            {"id": "respondeu", "say": "Que bom que voltou!"},
        ],
    }
    clock = fake_clock(T0)
    agent = _agent(mock_provider(), clock, [flow], idle="silent")
    store = MemoryStore()
    host = Host(agent, store)
    host.handle(SID, message="oi", id="m1")
    key = host.queued[0][1].key
    r = host.handle(SID, message="voltei", id="m2", silenced="humano assumiu")
    assert ("w1", "replied") in [(o.step_id, o.code) for o in r.outcomes]
    assert r.messages == []
    stale = host.handle(SID, wake=key)
    assert [o.code for o in stale.outcomes] == ["stale-wake"]


def test_nothing_moved_a_silence_wake_whose_if_now_fails_is_changed_false():
    clock = fake_clock(T0)
    f = falai().fields(ANA_FIELDS)
    vip = f.condition(lambda ctx, arg: bool((ctx.context or {}).get("vip")))
    flows = [
        {"id": "triagem", "on": [{"message": []}], "steps": [{"id": "oi", "say": "Oi!"}]},
        {"id": "retomar", "on": [{"silence": "24h", "if": {"vip": True}}], "steps": [{"id": "l", "say": "Oi?"}]},
    ]
    agent = f.agent(name="Ana", provider=mock_provider(), clock=clock, flows=[f.flow(x) for x in flows],
                    conditions={"vip": vip})
    r = agent.turn(session_id=SID, message="oi", id="m1", session=None, history=[], context={"vip": True})
    key = r.schedule[0].key
    clock.advance("24h")
    w = agent.turn(session_id=SID, wake=key, session=r.session, history=[], context={"vip": False})
    assert w.changed is False
    assert w.started == [] and w.skipped == [] and w.outcomes == [] and w.messages == [] and w.schedule == []
