"""engine-turn.md §3.3 (startRun), §3.11.1 (repeat/claims), §3.11.4 (anchors), §3.11.8 (after)."""

from __future__ import annotations

from .turn_kit import HOUR, MIN, T0, T0_MS, World, codes

OK = {"ok": {"run": lambda p, c: {"ok": True}}}


def _flow(fid="camp", on=None, steps=None, **kw):
    d = {"id": fid, "name": fid.title(), "steps": steps or [{"id": "a", "do": "ok"}]}
    if on is not None:
        d["on"] = on
    d.update(kw)
    return d


def test_start_run_shape_and_started_entry():
    w = World([_flow(steps=[{"id": "w", "wait": "1d"}])], actions=OK)
    r = w.turn(start={"flow": "camp", "key": "k1", "input": {"x": 1}})
    (st,) = r.started
    assert (st.run_id, st.flow_id, st.anchor, st.dedupe_key) == ("camp#k1", "camp", "s1", "camp:s1:k1")
    run = r.session.runs[0]
    assert run.trigger.kind == "start" and run.trigger.key == "k1" and run.trigger.payload == {"x": 1}
    assert run.input == {"x": 1}
    assert run.hop == 0 and run.started_at == T0
    js = r.session.to_json()["runs"][0]
    assert js["trigger"] == {"kind": "start", "key": "k1", "payload": {"x": 1}}
    assert js["input"] == {"x": 1}
    assert js["waiting"] == {"kind": "timer", "key": f"camp#k1:w:{T0_MS + 86_400_000}",
                             "until": "2026-09-21T10:00:00.000Z", "setAt": T0}
    assert r.session.claims == {"camp:s1:k1": {"at": T0}}


def test_start_without_input_has_no_payload_key():
    w = World([_flow(steps=[{"id": "w", "wait": "1d"}])])
    r = w.turn(start={"flow": "camp", "key": "k1"})
    js = r.session.to_json()["runs"][0]
    assert js["trigger"] == {"kind": "start", "key": "k1"}
    assert "input" not in js


def test_start_of_missing_flow_is_flow_gone_skip():
    w = World([_flow()], actions=OK)
    r = w.turn(start={"flow": "nope", "key": "k1"})
    (sk,) = r.skipped
    assert (sk.flow_id, sk.anchor, sk.trigger_key, sk.code) == ("nope", "s1", "k1", "flow-gone")
    assert sk.message
    assert r.outcomes == []
    assert r.changed is True


def test_start_always_blocks_same_key_only():
    w = World([_flow()], actions=OK)
    r1 = w.turn(start={"flow": "camp", "key": "k1"})
    assert [e.reason for e in r1.ended] == ["end"]
    r2 = w.turn(start={"flow": "camp", "key": "k1"})
    assert [(s.code, s.trigger_key) for s in r2.skipped] == [("already-claimed", "k1")]
    assert r2.started == []
    r3 = w.turn(start={"flow": "camp", "key": "k2"})
    assert [s.run_id for s in r3.started] == ["camp#k2"]


def test_once_event_trigger_blocks_any_second_start():
    w = World([_flow(on=[{"event": "ev", "repeat": "once"}])], actions=OK)
    r1 = w.turn(event="ev", key="e1")
    assert r1.started[0].dedupe_key == "camp:s1:"
    r2 = w.turn(event="ev", key="e2")
    assert [(s.code, s.flow_id, s.anchor, s.trigger_key) for s in r2.skipped] == [
        ("already-claimed", "camp", "s1", "e2")]


def test_cooldown():
    w = World([_flow(on=[{"event": "ev", "repeat": {"cooldown": "1h"}}])], actions=OK)
    w.turn(event="ev", key="e1")
    w.clock.advance("30m")
    r = w.turn(event="ev", key="e2")
    assert [s.code for s in r.skipped] == ["cooldown"]
    w.clock.advance("31m")
    r = w.turn(event="ev", key="e3")
    assert [s.run_id for s in r.started] == ["camp#e3"]
    assert r.session.claims["camp:s1:"]["at"] == "2026-09-20T11:01:00.000Z"


def test_claims_held_block_like_local():
    w = World([_flow(on=[{"event": "ev", "repeat": "once"}])], actions=OK)
    r = w.turn(event="ev", key="e1", claims={"held": {"camp:s1:": "2026-01-01T00:00:00.000Z"}, "active": []})
    assert [s.code for s in r.skipped] == ["already-claimed"]


def test_claims_active_is_already_running():
    w = World([_flow(on=[{"event": "ev"}])], actions=OK)
    r = w.turn(event="ev", key="e1", claims={"held": {}, "active": ["camp:s1"]})
    assert [s.code for s in r.skipped] == ["already-running"]
    assert r.started == []


def test_one_live_run_per_flow_and_anchor():
    w = World([_flow(on=[{"event": "ev"}], steps=[{"id": "w", "wait": "1d"}])])
    w.turn(event="ev", key="e1")
    r = w.turn(event="ev", key="e2")
    assert [(s.code, s.trigger_key) for s in r.skipped] == [("already-running", "e2")]
    # the claim was not written for the blocked start
    assert "camp:s1:e2" not in r.session.claims


def test_hop_limit():
    w = World([_flow()], actions=OK)
    r = w.turn(start={"flow": "camp", "key": "k1", "hop": 5})
    assert [s.code for s in r.skipped] == ["hop-limit"]
    r = w.turn(start={"flow": "camp", "key": "k2", "hop": 4})
    assert r.started and r.ended[0].hop == 4


def test_event_hop_and_payload():
    w = World([_flow(on=[{"event": "ev"}], steps=[{"id": "w", "wait": "1d"}])])
    r = w.turn(event="ev", key="e1", payload={"p": 1}, hop=3)
    run = r.session.runs[0]
    assert run.hop == 3 and run.input == {"p": 1} and run.trigger.payload == {"p": 1}
    assert run.trigger.kind == "event"


def test_trigger_if_false_writes_nothing():
    w = World([_flow(on=[{"event": "ev", "if": lambda ctx: ctx.input.get("go") is True}])], actions=OK)
    r = w.turn(event="ev", key="e1", payload={"go": False})
    assert r.started == [] and r.skipped == [] and r.outcomes == []


def test_event_trigger_order_next_trigger_tries_when_if_fails():
    w = World([_flow(on=[{"event": "ev", "if": lambda ctx: False}, {"event": "ev"}])], actions=OK)
    r = w.turn(event="ev", key="e1")
    assert [s.run_id for s in r.started] == ["camp#e1"]


def test_event_starts_every_listening_flow_in_agent_order():
    w = World([_flow("a", on=[{"event": "ev"}]), _flow("b", on=[{"event": "ev"}])], actions=OK)
    r = w.turn(event="ev", key="e1")
    assert [s.run_id for s in r.started] == ["a#e1", "b#e1"]


def test_anchor_from_host():
    w = World([_flow(on=[{"event": "ev", "repeat": "once"}], anchor="lead", steps=[{"id": "w", "wait": "1d"}])])
    r = w.turn(event="ev", key="e1", anchors={"lead": {"key": "lead:456"}})
    run = r.session.runs[0]
    assert run.anchor == "lead:456" and run.dedupe_key == "camp:lead:456:"
    assert r.started[0].anchor == "lead:456"
    r = w.turn(event="ev", key="e2", anchors={"lead": {"key": "lead:456"}},
               claims={"held": {}, "active": []})
    assert [s.code for s in r.skipped] == ["already-claimed"]
    assert r.skipped[0].anchor == "lead:456"


def test_anchor_falls_back_to_session_id():
    w = World([_flow(on=[{"event": "ev"}], anchor="lead", steps=[{"id": "w", "wait": "1d"}])])
    r = w.turn(event="ev", key="e1")
    assert r.session.runs[0].anchor == "s1"


def test_clear_on_start():
    w = World([_flow(on=[{"event": "ev"}], clearOnStart=["nome"], steps=[{"id": "w", "wait": "1d"}])])
    s = w.turn(event="x", key="x").session
    s.data["nome"] = "Ana"
    s.data["empresa"] = "ACME"
    w.session = s
    r = w.turn(event="ev", key="e1")
    assert r.session.data == {"empresa": "ACME"}


def test_trigger_after_parks_and_replaces():
    w = World([_flow("interesse", on=[{"event": "stage", "after": "1h"}], steps=[{"id": "a", "say": "oi"}])])
    r = w.turn(event="stage", key="stage:7")
    assert r.llm_calls == 0
    assert [s.run_id for s in r.started] == ["interesse#stage:7"]
    at = T0_MS + HOUR
    assert [(e.key, e.replaces) for e in r.schedule] == [(f"interesse#stage:7:start:{at}", None)]
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.key) == ("wait", "waiting", "awaiting-trigger", None)
    assert o.until == "2026-09-20T11:00:00.000Z"
    run = r.session.runs[0]
    assert run.step_id is None and run.status == "waiting"
    # a different key while parked: the old run is replaced
    r2 = w.turn(event="stage", key="stage:8")
    assert [(e.id, e.reason) for e in r2.ended] == [("interesse#stage:7", "replaced")]
    assert all(o.code != "replaced" for o in r2.outcomes)
    assert [s.run_id for s in r2.started] == ["interesse#stage:8"]
    assert [run.id for run in r2.session.runs] == ["interesse#stage:8"]
    # the same key again: already-claimed
    r3 = w.turn(event="stage", key="stage:8")
    assert [s.code for s in r3.skipped] == ["already-claimed"]
    # the old wake is stale
    r4 = w.turn(wake=f"interesse#stage:7:start:{at}")
    assert r4.changed is False and codes(r4) == ["stale-wake"]
    # the new wake enters the first step
    w.clock.advance("1h")
    r5 = w.turn(wake=r2.schedule[0].key)
    assert [m.text for m in r5.messages] == ["oi"]
    assert r5.messages[0].key == "interesse#stage:8:a:1"


def test_business_hours_snaps_event_start_without_after():
    def bh(at, ctx):
        from datetime import timedelta
        return at + timedelta(hours=2)
    w = World([_flow(on=[{"event": "ev", "businessHours": True}], steps=[{"id": "a", "say": "oi"}])],
              business_hours=bh)
    r = w.turn(event="ev", key="e1")
    assert codes(r) == ["awaiting-trigger"]
    assert r.schedule[0].key == f"camp#e1:start:{T0_MS + 2 * HOUR}"


def test_always_claims_pruned_to_50():
    w = World([_flow(on=[{"event": "ev"}])], actions=OK)
    for i in range(53):
        w.clock.advance(MIN)
        w.turn(event="ev", key=f"e{i}")
    claims = [k for k in w.session.claims if k.startswith("camp:s1:")]
    assert len(claims) == 50
    assert "camp:s1:e0" not in w.session.claims and "camp:s1:e52" in w.session.claims


def test_premise_default_trigger_if():
    state = {"ok": True}
    w = World([_flow(on=[{"event": "ev", "if": lambda ctx: state["ok"]}],
                     steps=[{"id": "w", "wait": "1h"}, {"id": "a", "do": "ok"}])], actions=OK)
    r = w.turn(event="ev", key="e1")
    state["ok"] = False
    w.clock.advance("1h")
    r = w.turn(wake=r.schedule[0].key)
    o = r.outcomes[-1]
    assert (o.code, o.kind, o.status, o.key) == ("premise-changed", "do", "skipped", None)
    assert codes(r) == ["no-reply", "premise-changed"]
    assert [e.reason for e in r.ended] == ["skipped"]


def test_while_overrides_premise():
    state = {"ok": True}
    w = World([_flow(on=[{"event": "ev"}], steps=[{"id": "w", "wait": "1h"}, {"id": "a", "do": "ok"}],
                     **{"while": lambda ctx: state["ok"]})], actions=OK)
    r = w.turn(event="ev", key="e1")
    state["ok"] = False
    r = w.turn(wake=r.schedule[0].key)
    assert "premise-changed" in codes(r)


def test_start_runs_hold_without_while():
    w = World([_flow(on=[{"event": "ev", "if": lambda ctx: False}], steps=[{"id": "w", "wait": "1h"},
                                                                            {"id": "a", "do": "ok"}])], actions=OK)
    r = w.turn(start={"flow": "camp", "key": "k"})
    r = w.turn(wake=r.schedule[0].key)
    assert "premise-changed" not in codes(r)
    assert [e.reason for e in r.ended] == ["end"]


def test_started_includes_runs_that_ended_this_turn():
    w = World([_flow()], actions=OK)
    r = w.turn(start={"flow": "camp", "key": "k1"})
    assert [s.run_id for s in r.started] == ["camp#k1"]
    (e,) = r.ended
    assert e.reason == "end" and e.id == "camp#k1"
    assert e.outcomes[-1].kind == "do"
    assert r.session.runs == []


def test_always_claims_pruned_by_at_not_key_order():
    from falai_django import Session

    from .turn_kit import iso
    w = World([_flow(on=[{"event": "ev"}])], actions=OK)
    claims = {f"camp:s1:e{i}": {"at": iso(T0_MS - (i + 1) * MIN)} for i in range(50)}  # e49 is the oldest
    s = Session.from_json({"id": "s1", "v": 4, "version": 3, "data": {}, "runs": [], "claims": claims,
                           "inputs": [], "metadata": {}})
    r = w.agent.turn(session_id="s1", event="ev", key="new", session=s)
    kept = set(r.session.claims)
    assert len(kept) == 50
    assert "camp:s1:e49" not in kept and "camp:s1:e0" in kept and "camp:s1:new" in kept


def test_once_claims_never_pruned():
    w = World([_flow("a", on=[{"event": "ev", "repeat": "once"}]), _flow("b", on=[{"event": "ev"}])], actions=OK)
    w.turn(event="ev", key="first")
    for i in range(55):
        w.clock.advance(MIN)
        w.turn(event="ev", key=f"e{i}")
    assert "a:s1:" in w.session.claims


def test_flow_chain_input_given_is_not_rendered():
    a = {"id": "a", "name": "A", "steps": [{"id": "x", "do": "ok", "then": {"flow": "b",
                                                                          "input": {"v": "{{data.nome}}"}}}]}
    b = {"id": "b", "name": "B", "steps": [{"id": "w", "wait": "1h"}]}
    w = World([a, b], actions=OK)
    r = w.turn(start={"flow": "a", "key": "k", "input": {"pai": 1}})
    child = r.session.runs[0]
    assert child.input == {"v": "{{data.nome}}"} and child.trigger.kind == "flow"
    assert child.id == "b#a#k:x:1" and child.hop == 1


def test_start_order_if_before_claim():
    w = World([_flow(on=[{"event": "ev", "repeat": "once", "if": lambda c: (c.input or {}).get("go", True)}])],
              actions=OK)
    w.turn(event="ev", key="e1")
    r = w.turn(event="ev", key="e2", payload={"go": False})
    assert r.skipped == []  # the false `if` comes first: no skip entry even though the claim is held


def test_start_order_claim_before_hop_before_live():
    w = World([_flow(steps=[{"id": "w", "wait": "1d"}])])
    w.turn(start={"flow": "camp", "key": "k1"})
    r = w.turn(start={"flow": "camp", "key": "k1", "hop": 7})
    assert [s.code for s in r.skipped] == ["already-claimed"]
    r = w.turn(start={"flow": "camp", "key": "k2", "hop": 7})
    assert [s.code for s in r.skipped] == ["hop-limit"]
    r = w.turn(start={"flow": "camp", "key": "k3"})
    assert [s.code for s in r.skipped] == ["already-running"]


def test_cooldown_before_hop():
    w = World([_flow(on=[{"event": "ev", "repeat": {"cooldown": "1h"}}])], actions=OK)
    w.turn(event="ev", key="e1")
    r = w.turn(event="ev", key="e2", hop=9)
    assert [s.code for s in r.skipped] == ["cooldown"]


def test_replaced_run_keeps_new_start_and_old_end_in_result():
    w = World([_flow(on=[{"event": "ev", "after": "1h", "repeat": {"cooldown": "1m"}}], steps=[{"id": "a", "do": "ok"}])],
              actions=OK)
    w.turn(event="ev", key="e1")
    w.clock.advance("2m")
    r = w.turn(event="ev", key="e2")
    assert [(e.id, e.reason, e.step_id, e.status) for e in r.ended] == [("camp#e1", "replaced", None, "waiting")]
    assert [s.run_id for s in r.started] == ["camp#e2"]
    assert r.session.claims["camp:s1:"]["at"] == "2026-09-20T10:02:00.000Z"
