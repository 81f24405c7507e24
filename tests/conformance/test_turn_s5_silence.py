"""engine-turn.md §5: short waits (§5.1) and silence wakes (§5.2, §3.2.3)."""

from __future__ import annotations

from datetime import timedelta

from .turn_kit import DAY, HOUR, T0, T0_MS, World, codes, line

TRI = {"id": "tri", "name": "Triagem", "on": [{"message": []}], "steps": [{"id": "q", "prompt": "Ajude."}],
       "onEnd": "stay"}
RET = {"id": "retomar", "name": "Retomar", "on": [{"silence": "24h"}],
       "steps": [{"id": "p", "prompt": "Retome."}, {"id": "w1", "wait": "2d"}, {"id": "fim", "say": "tchau"}]}


def _world(flows=None, **kw):
    return World(flows or [TRI, RET], **kw)


def test_arming_first_turn_no_replaces():
    w = _world(speak=[{"message": "Oi!"}])
    r = w.turn(message="oi", id="m1")
    assert [(e.key, e.at, e.replaces) for e in r.schedule] == [
        (f"silence:retomar:s1:{T0_MS}", r.schedule[0].at, None)]
    assert r.schedule[0].at.isoformat().startswith("2026-09-21T10:00:00")


def test_arming_second_speech_replaces_previous():
    w = _world(speak=[{"message": "Oi!"}, {"message": "De novo"}], understand=[{}])
    w.turn(message="oi", id="m1")
    w.clock.advance("1h")
    r = w.turn(message="hm", id="m2")
    t1 = T0_MS + HOUR
    assert [(e.key, e.replaces) for e in r.schedule] == [
        (f"silence:retomar:s1:{t1}", f"silence:retomar:s1:{T0_MS}")]
    assert r.schedule[0].at.timestamp() * 1000 == t1 + DAY


def test_no_arming_when_nothing_spoke():
    w = _world(speak=[{"message": "Oi!"}], understand=[{}])
    w.turn(message="oi", id="m1")
    r = w.turn(message="hm", id="m2", silenced="humano")
    assert r.schedule == []


def test_silence_honoured_starts_run_and_speaks_first():
    w = _world(speak=[{"message": "Oi!"}, {"message": "Sumiu?"}])
    r = w.turn(message="oi", id="m1")
    key = r.schedule[0].key
    w.clock.advance("24h")
    r = w.turn(wake=key)
    assert [s.run_id for s in r.started] == [f"retomar#{T0_MS}"]
    assert r.started[0].dedupe_key == "retomar:s1:"
    run = next(x for x in r.session.runs if x.flow_id == "retomar")
    assert run.trigger.kind == "silence" and run.trigger.key == str(T0_MS)
    assert [m.text for m in r.messages] == ["Sumiu?"]
    assert r.messages[0].key == f"retomar#{T0_MS}:p:1"
    assert r.llm_calls == 1 and w.names() == ["speak", "speak"]
    # the situation text says there is no new customer message
    assert "## Situation" in w.provider.calls[-1].prompt
    # only its own wait wake: retomar (once) is claimed now
    assert [e.key for e in r.schedule] == [f"retomar#{T0_MS}:w1:{T0_MS + DAY + 2 * DAY}"]
    # the triage run that was staying/asking is suspended by the silence run while it spoke
    tri = next(x for x in r.session.runs if x.flow_id == "tri")
    assert tri.status in ("asking", "suspended")


def test_silence_broken_when_customer_wrote():
    w = _world(speak=[{"message": "Oi!"}], understand=[{}])
    r = w.turn(message="oi", id="m1")
    key = r.schedule[0].key
    w.clock.advance("1h")
    w.turn(message="hm", id="m2", silenced="x")  # nobody speaks; lastUserAt moves on
    r = w.turn(wake=key)
    assert r.changed is False
    o = r.outcomes[0]
    assert (o.kind, o.status, o.code, o.key) == ("wait", "skipped", "silence-broken", key)


def test_silence_broken_when_ms_differs():
    w = _world(speak=[{"message": "Oi!"}])
    w.turn(message="oi", id="m1")
    r = w.turn(wake=f"silence:retomar:s1:{T0_MS - 1}")
    assert codes(r) == ["silence-broken"] and r.changed is False


def test_silence_broken_when_no_last_assistant_at():
    w = _world()
    w.turn(event="x", key="x")
    r = w.turn(wake=f"silence:retomar:s1:{T0_MS}")
    assert codes(r) == ["silence-broken"]


def test_silence_wake_for_gone_flow():
    w = _world(speak=[{"message": "Oi!"}])
    w.turn(message="oi", id="m1")
    r = w.turn(wake=f"silence:sumiu:s1:{T0_MS}")
    assert [(s.flow_id, s.anchor, s.trigger_key, s.code) for s in r.skipped] == [
        ("sumiu", "s1", str(T0_MS), "flow-gone")]
    assert r.changed is True
    assert r.outcomes == []


def test_silence_wake_if_false_at_fire_is_unchanged():
    state = {"ok": True}
    ret = dict(RET, on=[{"silence": "24h", "if": lambda ctx: state["ok"]}])
    w = _world([TRI, ret], speak=[{"message": "Oi!"}])
    r = w.turn(message="oi", id="m1")
    assert len(r.schedule) == 1
    state["ok"] = False
    r = w.turn(wake=r.schedule[0].key)
    assert r.started == [] and r.skipped == [] and r.changed is False


def test_silence_if_false_at_arming_gives_no_wake():
    ret = dict(RET, on=[{"silence": "24h", "if": lambda ctx: ctx.run.trigger.key == "nope"}])
    w = _world([TRI, ret], speak=[{"message": "Oi!"}])
    r = w.turn(message="oi", id="m1")
    assert r.schedule == []


def test_silence_arming_draft_run_key_is_ms():
    seen = []
    ret = dict(RET, on=[{"silence": "24h", "if": lambda ctx: seen.append((ctx.run.id, ctx.run.trigger.key)) or True}])
    w = _world([TRI, ret], speak=[{"message": "Oi!"}])
    w.turn(message="oi", id="m1")
    assert (f"retomar#{T0_MS}", str(T0_MS)) in seen


def test_silence_flow_id_with_colon_and_session_id():
    ret = dict(RET, id="a:b")
    w = World([TRI, ret], speak=[{"message": "Oi!"}, {"message": "Sumiu?"}])
    r = w.turn(message="oi", id="m1", session_id="55:11")
    key = r.schedule[0].key
    assert key == f"silence:a:b:55:11:{T0_MS}"
    r = w.turn(wake=key, session_id="55:11")
    assert [s.run_id for s in r.started] == [f"a:b#{T0_MS}"]


def test_customer_replied_premise_on_wake_turn():
    ret = {"id": "retomar", "name": "Retomar", "on": [{"silence": "24h"}],
           "steps": [{"id": "w0", "wait": "1h"}, {"id": "fim", "say": "tchau"}]}
    w = _world([TRI, ret], speak=[{"message": "Oi!"}], understand=[{}, {}])
    r = w.turn(message="oi", id="m1")
    w.clock.advance("24h")
    r = w.turn(wake=r.schedule[0].key)
    assert codes(r) == [None]  # the wait line
    wake = r.schedule[0].key
    w.clock.advance("10m")
    s = w.session
    s.last_user_at = w.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    w.session = s
    r = w.turn(wake=wake)
    o = line(r, "customer-replied")
    assert o.status == "skipped" and o.key is None
    assert [e.reason for e in r.ended] == ["skipped"]


def test_silence_business_hours_snap():
    def bh(at, ctx):
        return at + timedelta(hours=3)
    ret = dict(RET, on=[{"silence": "24h", "businessHours": True}])
    w = _world([TRI, ret], speak=[{"message": "Oi!"}], business_hours=bh)
    r = w.turn(message="oi", id="m1")
    assert r.schedule[0].key == f"silence:retomar:s1:{T0_MS}"
    assert r.schedule[0].at.timestamp() * 1000 == T0_MS + DAY + 3 * HOUR


def test_outbound_event_arms_silence():
    w = _world(events={"enviado": {"direction": "outbound"}})
    r = w.turn(event="enviado", key="e1")
    assert [e.key for e in r.schedule] == [f"silence:retomar:s1:{T0_MS}"]


def test_silence_anchor_last_inbound_breaks():
    ret = dict(RET, anchor="lead")
    w = _world([TRI, ret], speak=[{"message": "Oi!"}])
    r = w.turn(message="oi", id="m1", anchors={"lead": {"key": "lead:1"}})
    key = r.schedule[0].key
    r = w.turn(wake=key, anchors={"lead": {"key": "lead:1", "lastInboundAt": "2026-09-20T11:00:00.000Z"}})
    assert codes(r) == ["silence-broken"]


# --------------------------------------------------------------------------- short waits §5.1

def test_short_waits_s13():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "a", "say": "A"}, {"id": "p", "wait": "3s"}, {"id": "b", "say": "B"},
        {"id": "q", "prompt": "Pergunte.", "collect": ["nome"]}]}
    w = World([flow], speak=[{"message": "C", "nome": None}], understand=[{}])
    r = w.turn(message="oi", id="m1")
    # the catch-all's first step is a say, so its fields cost an understand call (§3.4.2 step 8)
    assert w.names() == ["understand", "speak"]
    assert [(m.text, m.kind, m.after_ms) for m in r.messages] == [("A", "verbatim", 0), ("B", "verbatim", 3000),
                                                                  ("C", "ai", 0)]
    o = line(r, "inline-delay")
    assert (o.kind, o.status, o.detail, o.key) == ("wait", "ok", "3000ms", "f#m1:p:1")
    assert r.schedule == [] or all(e.key.startswith("silence:") for e in r.schedule)


def test_short_waits_accumulate_and_attach_to_ai_message():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "p1", "wait": "2s", "then": "p2"}, {"id": "p2", "wait": "1.5s"},
        {"id": "q", "prompt": "Pergunte."}]}
    w = World([flow], idle="silent")
    r = w.turn(message="oi", id="m1")
    # p1's then is p2, a wait: not say/talk -> parks
    assert r.messages == []
    assert r.schedule[0].key == f"f#m1:p1:{T0_MS + 2000}"


def test_short_wait_exactly_10s_inline_and_after_ms_on_ai():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "p", "wait": "10s"}, {"id": "q", "prompt": "Pergunte."}]}
    w = World([flow], speak=[{"message": "C"}])
    r = w.turn(message="oi", id="m1")
    assert [(m.text, m.after_ms) for m in r.messages] == [("C", 10000)]


def test_wait_over_10s_parks():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "p", "wait": "11s"}, {"id": "b", "say": "B"}]}
    w = World([flow], idle="silent")
    r = w.turn(message="oi", id="m1")
    assert r.messages == [] and r.schedule[0].key == f"f#m1:p:{T0_MS + 11000}"
    assert r.llm_calls == 0


def test_short_wait_before_do_parks():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "p", "wait": "3s"}, {"id": "d", "do": "ok"}]}
    w = World([flow], actions={"ok": {"run": lambda p, c: {"ok": True}}}, idle="silent")
    r = w.turn(message="oi", id="m1")
    assert r.schedule[0].key == f"f#m1:p:{T0_MS + 3000}"
    wl = r.outcomes[-1]
    assert (wl.kind, wl.status, wl.code) == ("wait", "waiting", None)


def test_short_wait_then_end_parks():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "b", "say": "B"}, {"id": "p", "wait": "3s", "then": "end"}]}
    w = World([flow])
    r = w.turn(message="oi", id="m1")
    assert any(e.key == f"f#m1:p:{T0_MS + 3000}" for e in r.schedule)


def test_short_wait_then_step_id_say_inline():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [
        {"id": "p", "wait": "5s", "then": "b"}, {"id": "x", "do": "ok"}, {"id": "b", "say": "B"}]}
    w = World([flow], actions={"ok": {"run": lambda p, c: {"ok": True}}})
    r = w.turn(message="oi", id="m1")
    assert [(m.text, m.after_ms) for m in r.messages] == [("B", 5000)]
    assert line(r, "inline-delay").next == "b"


def test_timer_wait_business_hours():
    def bh(at, ctx):
        return at + timedelta(hours=1)
    flow = {"id": "f", "name": "F", "steps": [{"id": "p", "wait": "1h", "businessHours": True},
                                             {"id": "b", "say": "B"}]}
    w = World([flow], business_hours=bh)
    r = w.turn(start={"flow": "f", "key": "k"})
    assert r.schedule[0].key == f"f#k:p:{T0_MS + 2 * HOUR}"
    assert r.outcomes[0].until == "2026-09-20T12:00:00.000Z"
    assert T0
