"""engine-turn.md §3.6: every step kind, movement, caps and the start order's skips."""

from __future__ import annotations

from datetime import timedelta

from scenarios.kit import T0, T0_MS, Host, codes, make_agent, run_of, triage_flow

from falai_django.engine.jstime import iso_to_ms

HOUR = 3_600_000


def actions(**runs):
    return {name: {"parameters": {}, "run": run} for name, run in runs.items()}


def start(agent, flow_id, key="k1", session=None, **kw):
    return agent.turn(session_id="s1", start={"flow": flow_id, "key": key, **kw}, session=session)


def test_short_waits_ride_as_after_ms_before_say_and_talk():
    flow = {"id": "s13", "name": "S13", "steps": [
        {"id": "a", "say": "A"}, {"id": "p", "wait": "3s"}, {"id": "b", "say": "B"},
        {"id": "w2", "wait": "2s"}, {"id": "q", "prompt": "Pergunte algo.", "collect": ["nome"]}]}
    agent, provider, _ = make_agent([flow], speak=[{"message": "C", "nome": None}])
    r = start(agent, "s13")
    assert [(m.text, m.kind, m.after_ms) for m in r.messages] == [("A", "verbatim", 0), ("B", "verbatim", 3000),
                                                                  ("C", "ai", 2000)]
    inline = [(o.code, o.detail, o.key) for o in r.outcomes if o.code == "inline-delay"]
    assert inline == [("inline-delay", "3000ms", "s13#k1:p:1"), ("inline-delay", "2000ms", "s13#k1:w2:1")]
    assert r.schedule == []


def test_a_short_wait_before_a_do_parks_like_a_long_one():
    flow = {"id": "f", "name": "F", "steps": [{"id": "w", "wait": "3s"}, {"id": "d", "do": "noop"}]}
    agent, _, _ = make_agent([flow], fields={}, actions=actions(noop=lambda p, c: {"ok": True}))
    r = start(agent, "f")
    assert [e.key for e in r.schedule] == [f"f#k1:w:{T0_MS + 3000}"]
    assert [(o.status, o.code) for o in r.outcomes] == [("waiting", None)]


def test_action_results_ok_skipped_failed_and_on_fail():
    seen = []

    def boom(p, c):
        raise RuntimeError("CRM fora do ar")

    flow = {"id": "f", "name": "F", "steps": [
        {"id": "a", "do": "ok", "with": {"x": "{{input.n}}"}},
        {"id": "b", "do": "skip"},
        {"id": "c", "do": "boom", "onFail": "e"},
        {"id": "d", "say": "nunca"},
        {"id": "e", "do": "fail"}]}
    agent, _, _ = make_agent([flow], fields={}, actions={
        "ok": {"parameters": {"x": {"type": "string"}},
               "run": lambda p, c: seen.append((p, c.key, c.dedupe_key, c.input)) or {"ok": True, "detail": "feito"}},
        "skip": {"parameters": {}, "run": lambda p, c: {"skipped": "sem lead"}},
        "boom": {"parameters": {}, "run": boom},
        "fail": {"parameters": {}, "run": lambda p, c: {"failed": "recusado"}}})
    r = start(agent, "f", input={"n": "7"})
    assert seen == [({"x": "7"}, "f#k1:a:1", "f:s1:k1", {"n": "7"})]
    assert [(o.step_id, o.status, o.code, o.detail, o.next) for o in r.outcomes] == [
        ("a", "ok", None, "feito", None),
        ("b", "skipped", "action-skipped", "sem lead", None),
        ("c", "failed", "action-failed", "CRM fora do ar", "e"),
        ("e", "failed", "action-failed", "recusado", None)]
    assert [e.reason for e in r.ended] == ["end"] and r.messages == []


def test_defer_parks_and_reruns_the_same_step_with_the_same_key():
    keys = []
    answers = iter([{"defer": "2h", "detail": "CRM ocupado"}, {"ok": True}])
    flow = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "sync"}]}
    agent, _, clock = make_agent([flow], fields={}, actions=actions(sync=lambda p, c: keys.append(c.key) or next(answers)))
    r = start(agent, "f")
    line = r.outcomes[0]
    assert (line.status, line.code, line.detail, line.until, line.key) == (
        "deferred", "action-deferred", "CRM ocupado", "2026-09-20T12:00:00.000Z", "f#k1:d:1")
    assert [e.key for e in r.schedule] == [f"f#k1:d:{T0_MS + 2 * HOUR}"]
    clock.advance("2h")
    w = agent.turn(session_id="s1", wake=r.schedule[0].key, session=r.session)
    assert keys == ["f#k1:d:1", "f#k1:d:1"] and [o.status for o in w.outcomes] == ["ok"]


def test_non_duration_defer_is_action_failed_and_follows_on_fail():
    flow = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "sync", "onFail": "x"}, {"id": "y", "say": "não"},
                                             {"id": "x", "say": "sim"}]}
    agent, _, _ = make_agent([flow], fields={}, actions=actions(sync=lambda p, c: {"defer": "amanhã", "detail": "?"}))
    r = start(agent, "f")
    line = r.outcomes[0]
    assert (line.kind, line.status, line.code, line.next) == ("do", "failed", "action-failed", "x")
    assert "sync" in line.detail and "amanhã" in line.detail
    assert [m.text for m in r.messages] == ["sim"]


def test_unregistered_action_at_run_time_fails_the_step():
    flow = {"id": "f", "name": "F", "steps": [{"id": "d", "do": "gone"}]}
    agent, _, _ = make_agent([flow], fields={}, actions=actions(gone=lambda p, c: {"ok": True}))
    del agent.actions["gone"]
    r = start(agent, "f")
    assert [(o.code, o.detail) for o in r.outcomes] == [("action-failed", 'unknown action "gone"')]


def test_spoke_action_and_ctx_set():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "steps": [{"id": "d", "do": "reply"}]}

    def reply(p, c):
        c.set({"nome": "Ana"})
        return {"ok": True, "spoke": True}

    agent, provider, _ = make_agent([flow], actions=actions(reply=reply), speak=[])
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert r.session.data == {"nome": "Ana"} and r.session.last_assistant_at == T0
    assert r.messages == [] and provider.calls == []  # the idle speaker stays quiet


def test_if_step_then_and_else_labels():
    flow = {"id": "f", "name": "F", "steps": [
        {"id": "i", "if": {"known": ["nome"]}, "else": "nao"}, {"id": "sim", "say": "sim", "then": "end"},
        {"id": "nao", "say": "não"}]}
    agent, _, _ = make_agent([flow])
    r = start(agent, "f")
    assert [(o.kind, o.next) for o in r.outcomes][0] == ("if", "nao") and [m.text for m in r.messages] == ["não"]
    r2 = agent.turn(session_id="s2", start={"flow": "f", "key": "k"}, session=None)
    assert r2.outcomes[0].next == "nao"


def test_event_wait_arrives_or_times_out():
    flow = {"id": "f", "name": "F", "steps": [
        {"id": "w", "wait": {"event": "pago", "upTo": "1d"}, "else": "tarde"},
        {"id": "ok", "say": "Recebido!", "then": "end"}, {"id": "tarde", "say": "Não chegou."}]}
    agent, _, clock = make_agent([flow], fields={}, events={"pago": {}})
    r = start(agent, "f")
    line = r.outcomes[0]
    assert (line.status, line.code, line.detail, line.until) == ("waiting", "awaiting-event", "pago",
                                                                  "2026-09-21T10:00:00.000Z")
    assert run_of(r.session, "f").waiting.event == "pago"
    e = agent.turn(session_id="s1", event="pago", key="p1", session=r.session)
    assert (e.outcomes[0].code, e.outcomes[0].next) == ("event-arrived", None)
    assert [m.text for m in e.messages] == ["Recebido!"]
    clock.advance("1d")
    t = agent.turn(session_id="s1", wake=r.schedule[0].key, session=r.session)
    assert (t.outcomes[0].code, t.outcomes[0].next) == ("no-event", "tarde")
    assert [m.text for m in t.messages] == ["Não chegou."]


def test_inbound_event_resolves_a_reply_wait_and_outbound_rearms_silence():
    wait = {"id": "f", "name": "F", "steps": [{"id": "w", "wait": "1d", "else": "r"}, {"id": "n", "say": "nada"},
                                             {"id": "r", "say": "respondeu!"}]}
    silence = {"id": "ret", "name": "Ret", "on": [{"silence": "1h"}], "steps": [{"id": "x", "say": "oi?"}]}
    agent, _, clock = make_agent([wait, silence], fields={}, events={"lido": {"direction": "inbound"},
                                                                     "enviado": {"direction": "outbound"}})
    r = start(agent, "f")
    i = agent.turn(session_id="s1", event="lido", key="e1", session=r.session)
    assert (i.outcomes[0].code, i.outcomes[0].next) == ("replied", "r") and i.session.last_user_at == T0
    assert i.session.last_assistant_at == T0  # the say went out
    assert [(e.key, e.replaces) for e in i.schedule] == [(f"silence:ret:s1:{T0_MS}", None)]
    clock.advance("1m")
    o = agent.turn(session_id="s1", event="enviado", key="e2", session=i.session)
    assert o.session.last_assistant_at == "2026-09-20T10:01:00.000Z"
    assert [(e.key, e.replaces) for e in o.schedule] == [(f"silence:ret:s1:{T0_MS + 60_000}",
                                                          f"silence:ret:s1:{T0_MS}")]


def test_say_once_is_sent_once_per_session():
    flow = {"id": "f", "name": "F", "on": [{"event": "ping"}], "steps": [{"id": "oi", "say": "Bem-vindo!", "once": True}]}
    agent, _, _ = make_agent([flow], fields={}, events={"ping": {}})
    r = agent.turn(session_id="s1", event="ping", key="1")
    r2 = agent.turn(session_id="s1", event="ping", key="2", session=r.session)
    assert [m.text for m in r.messages] == ["Bem-vindo!"] and r2.messages == []
    assert [(o.code, o.key) for o in r2.outcomes] == [("already-sent", "f#2:oi:1")]
    assert "f:oi:s1" in r.session.claims
    held = agent.turn(session_id="s9", event="ping", key="1", claims={"held": {"f:oi:s9": T0}})
    assert codes(held) == ["already-sent"]


def test_step_loop_fails_the_run_after_50_steps():
    flow = {"id": "f", "name": "F", "steps": [{"id": "a", "do": "noop"},
                                             {"id": "b", "if": lambda ctx: True, "then": "a", "else": "end"}]}
    agent, _, _ = make_agent([flow], fields={}, actions=actions(noop=lambda p, c: {"ok": True}))
    r = start(agent, "f")
    assert len(r.outcomes) == 51
    last = r.outcomes[-1]
    assert (last.status, last.code, last.key) == ("failed", "step-loop", None)
    assert [e.reason for e in r.ended] == ["failed"]


def test_reset_forever_stops_at_the_hop_limit():
    flow = {"id": "f", "name": "F", "onEnd": "reset", "steps": [{"id": "a", "do": "noop"}]}
    agent, _, _ = make_agent([flow], fields={}, actions=actions(noop=lambda p, c: {"ok": True}))
    r = start(agent, "f")
    assert [(s.run_id) for s in r.started] == ["f#k1", "f#f#k1:a:1", "f#f#f#k1:a:1:a:1", "f#f#f#f#k1:a:1:a:1:a:1",
                                                "f#f#f#f#f#k1:a:1:a:1:a:1:a:1"]
    assert [e.reason for e in r.ended] == ["reset"] * 5
    assert [s.code for s in r.skipped] == ["hop-limit"]


def test_event_at_hop_five_is_skipped():
    flow = {"id": "f", "name": "F", "on": [{"event": "x"}], "steps": [{"id": "a", "say": "oi"}]}
    agent, _, _ = make_agent([flow], fields={}, events={"x": {}})
    r = agent.turn(session_id="s1", event="x", key="e", hop=5)
    assert [s.code for s in r.skipped] == ["hop-limit"] and r.started == []


def test_step_gone_and_flow_gone_for_edited_agents():
    flow = {"id": "g", "name": "G", "on": [{"message": []}],
            "steps": [{"id": "pergunta", "prompt": "Pergunte."}, {"id": "outro", "say": "y"}]}
    agent, _, _ = make_agent([flow], fields={}, speak=[{"message": "Oi"}], idle="silent")
    r = agent.turn(session_id="s1", message="oi", id="m1")
    assert run_of(r.session, "g") is None  # a prompt speaks once and moves on
    edited = dict(flow, steps=[{"id": "outro", "say": "y"}])
    parked = {"id": "g", "name": "G", "on": [{"message": []}],
              "steps": [{"id": "w", "wait": "1h"}, {"id": "outro", "say": "y"}]}
    first, _, clock = make_agent([parked], fields={}, idle="silent")
    p = first.turn(session_id="s1", message="oi", id="m1")
    other, _, _ = make_agent([edited], fields={}, idle="silent", clock=clock)
    clock.advance("1h")
    g = other.turn(session_id="s1", wake=p.schedule[0].key, session=p.session)
    assert [(o.code, o.kind, o.status) for o in g.outcomes] == [("step-gone", "if", "skipped")]
    assert [e.reason for e in g.ended] == ["skipped"]
    gone, _, _ = make_agent([{"id": "outro", "name": "Outro", "steps": [{"id": "a", "say": "x"}]}], idle="silent",
                            clock=clock)
    f = gone.turn(session_id="s1", wake=p.schedule[0].key, session=p.session)
    # the step cannot be looked up in a flow that is gone: the line says `if`
    assert [(o.code, o.kind, o.status, o.step_id) for o in f.outcomes] == [("flow-gone", "if", "skipped", "w")]
    assert [e.reason for e in f.ended] == ["skipped"]


def test_premise_change_ends_a_parked_run_at_its_wake():
    flow = {"id": "f", "name": "F", "while": lambda ctx: (ctx.context or {}).get("ativo", False),
            "steps": [{"id": "w", "wait": "1h"}, {"id": "s", "say": "oi"}]}
    agent, _, clock = make_agent([flow], fields={})
    r = agent.turn(session_id="s1", start={"flow": "f", "key": "k"}, context={"ativo": True})
    clock.advance("1h")
    w = agent.turn(session_id="s1", wake=r.schedule[0].key, session=r.session, context={"ativo": False})
    assert codes(w) == ["no-reply", "premise-changed"] and w.messages == []


def test_silence_run_dies_when_the_customer_wrote_since_it_started():
    flow = {"id": "ret", "name": "Ret", "on": [{"silence": "1h"}],
            "steps": [{"id": "oi", "say": "Oi?"}, {"id": "w", "wait": "1d"}, {"id": "tchau", "say": "Tchau"}]}
    agent, _, clock = make_agent([triage_flow(), flow], understand=[{"fields": {}}, {"fields": {}}],
                                 speak=[{"message": "Oi!", "nome": None, "empresa": None},
                                        {"message": "Oi de novo", "nome": None, "empresa": None}])
    host = Host(agent, clock)
    host.message("oi", "m1")
    clock.advance("1h")
    (s,) = host.fire_due()
    assert [m.text for m in s.messages] == ["Oi?"]
    clock.advance("2h")
    host.message("voltei", "m2")
    clock.advance("1d")
    (w,) = host.fire_due()
    assert codes(w) == ["no-reply", "customer-replied"] and w.messages == []


def test_business_hours_snap_a_timer_wait():
    def next_morning(at, ctx):
        return (at + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)

    flow = {"id": "f", "name": "F", "steps": [{"id": "w", "wait": "1h", "businessHours": True}, {"id": "s", "say": "x"}]}
    agent, _, _ = make_agent([flow], fields={}, business_hours=next_morning)
    r = start(agent, "f")
    assert [e.key for e in r.schedule] == [f"f#k1:w:{iso_to_ms('2026-09-21T09:00:00.000Z')}"]


def test_cooldown_blocks_then_overwrites_the_claim():
    flow = {"id": "f", "name": "F", "on": [{"event": "x", "repeat": {"cooldown": "1h"}}], "steps": [{"id": "a", "say": "oi"}]}
    agent, _, clock = make_agent([flow], fields={}, events={"x": {}})
    r = agent.turn(session_id="s1", event="x", key="1")
    clock.advance("30m")
    r2 = agent.turn(session_id="s1", event="x", key="2", session=r.session)
    assert [s.code for s in r2.skipped] == ["cooldown"]
    clock.advance("31m")
    r3 = agent.turn(session_id="s1", event="x", key="3", session=r2.session)
    assert [s.run_id for s in r3.started] == ["f#3"]
    assert r3.session.claims == {"f:s1:": {"at": "2026-09-20T11:01:00.000Z"}}


def test_anchors_claims_held_and_active():
    flow = {"id": "f", "name": "F", "anchor": "lead", "on": [{"event": "x", "repeat": "once"}],
            "steps": [{"id": "w", "wait": "1d"}]}
    agent, _, _ = make_agent([flow], fields={}, events={"x": {}})
    anchors = {"lead": {"key": "lead:456"}}
    r = agent.turn(session_id="s1", event="x", key="1", anchors=anchors)
    run = run_of(r.session, "f")
    assert (run.anchor, run.dedupe_key) == ("lead:456", "f:lead:456:")
    held = agent.turn(session_id="s2", event="x", key="1", anchors=anchors, claims={"held": {"f:lead:456:": T0}})
    assert [s.code for s in held.skipped] == ["already-claimed"]
    active = agent.turn(session_id="s3", event="x", key="1", anchors=anchors, claims={"active": ["f:lead:456"]})
    assert [s.code for s in active.skipped] == ["already-running"]
    again = agent.turn(session_id="s1", event="x", key="2", anchors={"lead": {"key": "lead:789"}}, session=r.session)
    assert [s.anchor for s in again.started] == ["lead:789"]


def test_one_live_run_per_flow_and_anchor():
    flow = {"id": "f", "name": "F", "on": [{"event": "x"}], "steps": [{"id": "w", "wait": "1d"}]}
    agent, _, _ = make_agent([flow], fields={}, events={"x": {}})
    r = agent.turn(session_id="s1", event="x", key="1")
    r2 = agent.turn(session_id="s1", event="x", key="2", session=r.session)
    assert [(s.code, s.trigger_key) for s in r2.skipped] == [("already-running", "2")]


def test_always_claims_are_pruned_to_fifty_oldest_first():
    flow = {"id": "f", "name": "F", "on": [{"event": "x"}], "steps": [{"id": "a", "say": "oi"}]}
    agent, _, clock = make_agent([flow], fields={}, events={"x": {}})
    session = None
    for i in range(55):
        session = agent.turn(session_id="s1", event="x", key=f"e{i}", session=session).session
        clock.advance("1s")
    claims = [k for k in session.claims if k.startswith("f:s1:")]
    assert len(claims) == 50 and "f:s1:e4" not in claims and "f:s1:e5" in claims


def test_inputs_keep_the_last_fifty_ids():
    agent, _, _ = make_agent([], fields={}, idle="silent")
    session = None
    for i in range(52):
        session = agent.turn(session_id="s1", message="x", id=f"m{i}", session=session).session
    assert session.inputs == [f"m{i}" for i in range(2, 52)]


def test_stay_answers_every_message_with_a_new_visit():
    flow = {"id": "f", "name": "F", "on": [{"message": []}], "onEnd": "stay",
            "steps": [{"id": "p", "prompt": "Converse."}, {"id": "fim", "do": "noop"}]}
    agent, provider, _ = make_agent([flow], fields={}, actions=actions(noop=lambda p, c: {"ok": True}),
                                    speak=[{"message": "1"}, {"message": "2"}, {"message": "3"}])
    r = agent.turn(session_id="s1", message="a", id="m1")
    run = run_of(r.session, "f")
    assert (run.step_id, run.staying, run.status, run.visits["p"]) == ("p", True, "asking", 2)
    r2 = agent.turn(session_id="s1", message="b", id="m2", session=r.session)
    r3 = agent.turn(session_id="s1", message="c", id="m3", session=r2.session)
    assert [m.key for m in r2.messages + r3.messages] == ["f#m1:p:2", "f#m1:p:3"]
    assert run_of(r3.session, "f").visits["p"] == 4
