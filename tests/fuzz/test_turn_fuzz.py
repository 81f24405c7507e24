"""hypothesis over `turn()`: random flows built from every step kind, random messages, wakes,
events and starts, a provider that answers from the schema with junk and failures mixed in.

After every input the fuzzer asserts:

- the only exception out of `turn()` is the documented one: `ProviderError`, on a message
  turn, when the understand call failed (engine-turn.md §3.4.6);
- at most one run is `asking` at rest (§3.10 rule 1);
- `changed: False` leaves the session equal to the input and sends/schedules nothing (§1.6);
- a replay of the same input against the same session gives identical keys (message keys,
  schedule keys and times, outcome keys, run ids) and the same session (the host's conflict
  path relies on it); replays alternate between `turn`, `turn_stream` and `aturn`, whose
  final results must be that same turn;
- no live run without its claim (§3.3 step 7); no run parked on a wake that was never
  scheduled, and `pending_wakes()` lists every parked run's wake (§6);
- every `ScheduleEntry.at` is an aware UTC datetime;
- the session's JSON round trip is stable (dict, text, and through a store save and load);
- every outcome code is one of the 38 and carries its message; the kept lists stay capped.

The host loop is played honestly: load from a MemoryStore, turn, save with the loaded
version when changed, then remember the schedule (the wakes a later input may fire).
Examples: FALAI_FUZZ_EXAMPLES (default 120; CI derandomizes so a failure reproduces).
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from falai_django import FlowConfigurationError, ProviderError, Session, assistant_message, user_message
from falai_django.engine.jstime import to_iso
from falai_django.engine.outcomes import OUTCOME_MESSAGES
from falai_django.stores.memory import MemoryStore
from falai_django.testing import fake_clock

from .world import FuzzProvider, aware_utc, build_agent, flows, inputs

SID = "5511999990000"
EXAMPLES = int(os.environ.get("FALAI_FUZZ_EXAMPLES", "120"))
IN_CI = os.environ.get("CI", "").lower() == "true"
RUN_STATUSES = {"running", "asking", "waiting", "suspended"}


def kwargs_for(op: dict, state: dict, session: Session | None, agent) -> dict | None:
    """The turn() keyword arguments for one abstract input (None: nothing sensible to send)."""
    n = state["n"]
    common = {"context": op["context"], "silenced": op["silenced"], "anchors": op["anchors"], "claims": op["claims"]}
    kind = op["kind"]
    if kind == "message":
        ids = state["message_ids"]
        if op["id"] == "repeat" and ids:
            message_id = ids[n % len(ids)]
        elif op["id"] == "none":
            message_id = None
        else:
            message_id = f"wamid.{n}"
            ids.append(message_id)
        extra = {"id": message_id} if message_id is not None else {}
        if op["at"] is not None:
            extra["at"] = op["at"]
        return {"message": op["text"], **extra, **common}
    if kind == "wake":
        which = op["which"]
        if which == "scheduled":
            keys = state["scheduled"]
        elif which == "pending" and session is not None:
            keys = [w.key for w in agent.pending_wakes(session=session, context=op["context"],
                                                        anchors=op["anchors"])]
        elif which == "stale":
            keys = ["f0#nada:s0:1", "f1#x:s1:1700000000000"]
        else:
            keys = [f"silence:f0:{SID}:1758362400000", "silence:sumiu:outra:1"]
        if not keys:
            return None
        return {"wake": keys[op["pick"] % len(keys)], **common}
    if kind == "event":
        seen = state["event_keys"]
        key = seen[n % len(seen)] if op["key"] == "repeat" and seen else f"ev:{n}"
        seen.append(key)
        return {"event": op["name"], "payload": op["payload"], "key": key, "hop": op["hop"], **common}
    seen = state["start_keys"]
    key = seen[n % len(seen)] if op["key"] == "repeat" and seen else f"start:{n}"
    seen.append(key)
    start = {"flow": op["flow"], "key": key, "hop": op["hop"]}
    if op["input"] is not None:
        start["input"] = op["input"]
    return {"start": start, **common}


def keys_of(r) -> dict:
    return {
        "messages": [(m.key, m.kind, m.text, m.after_ms, m.run_id, m.step_id) for m in r.messages],
        "schedule": [(s.key, s.at, s.replaces) for s in r.schedule],
        "outcomes": [(o.key, o.run_id, o.step_id, o.kind, o.status, o.code, o.next) for o in r.outcomes],
        "started": [(s.run_id, s.dedupe_key) for s in r.started],
        "ended": [(e.id, e.reason) for e in r.ended],
        "skipped": [(s.flow_id, s.trigger_key, s.code) for s in r.skipped],
        "changed": r.changed,
        "session": r.session.to_json(),
    }


def check_invariants(session: Session | None, r, kind: str) -> None:
    s = r.session
    blob = s.to_json()
    asking = [run.id for run in s.runs if run.status == "asking"]
    assert len(asking) <= 1, f"more than one run asking at rest: {asking}"
    for run in s.runs:
        assert run.status in RUN_STATUSES, run.status
        assert run.dedupe_key in s.claims, f"live run {run.id} has no claim {run.dedupe_key!r}"
        assert len(run.outcomes) <= 50
        if run.status == "waiting":
            assert run.waiting is not None and run.waiting.key and run.waiting.until
        if run.status == "suspended":
            assert run.suspended_at
    live = [(run.flow_id, run.anchor) for run in s.runs]
    assert len(live) == len(set(live)), f"two live runs of one flow+anchor: {live}"
    assert len(s.inputs) <= 50
    assert s.version == (session.version if session is not None else 0), "turn() must not change the version"

    if not r.changed:
        assert r.messages == [] and r.schedule == [], "changed: False must send and schedule nothing"
        if session is not None:
            assert blob == session.to_json(), "changed: False left a different session"
    for entry in r.schedule:
        assert aware_utc(entry.at), f"schedule entry at {entry.at!r} is not aware UTC"
        assert entry.key
    for line in r.outcomes:
        if line.code is not None:
            assert line.code in OUTCOME_MESSAGES, line.code
            assert line.message == OUTCOME_MESSAGES[line.code]
        else:
            assert line.message is None
    keys = [m.key for m in r.messages]
    assert all(keys), keys
    if kind != "message":
        assert not any(m.key.startswith("idle:") for m in r.messages), "idle speaks only on message turns"

    # JSON round trips: dict, text, and json.dumps (what every store does)
    assert Session.from_json(blob, SID).to_json() == blob
    assert Session.from_json_text(s.to_json_text(), SID).to_json() == blob
    assert json.loads(json.dumps(blob)) == blob


@settings(max_examples=EXAMPLES, deadline=None, derandomize=IN_CI, database=None if IN_CI else settings().database,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(data=st.data())
def test_random_inputs_against_random_flows_keep_the_turn_invariants(data):
    flow_dicts = data.draw(flows(), label="flows")
    provider = FuzzProvider(failure_rate=data.draw(st.sampled_from([0.0, 0.1, 0.5]), label="failure_rate"))
    clock = fake_clock("2026-09-20T10:00:00Z")
    try:
        agent = build_agent(flow_dicts, provider, clock,
                            idle=data.draw(st.sampled_from([None, "silent", {"prompt": "Seja breve."}]),
                                           label="idle"),
                            with_business_hours=data.draw(st.booleans(), label="business_hours"),
                            compaction=data.draw(st.sampled_from([None, None, {"maxTokens": 40,
                                                                              "preserveRecentCount": 2}]),
                                                 label="compaction"))
    except FlowConfigurationError as exc:
        event(f"refused: {str(exc)[:60]}")
        assume(False)
    ops = data.draw(inputs(data.draw(st.integers(3, 14), label="input_count")), label="inputs")

    store = MemoryStore()
    state = {"n": 0, "message_ids": [], "event_keys": [], "start_keys": [], "scheduled": [], "ever_scheduled": set()}
    history: list[dict] = []  # the host's transcript, passed on every input (compaction trims it)
    deadline = time.monotonic() + 20  # bound one example in time, whatever it draws
    for n, op in enumerate(ops):
        if time.monotonic() > deadline:
            break
        state["n"] = n
        if op["advance"]:
            clock.advance(op["advance"])
        session = store.load(SID)
        kwargs = kwargs_for(op, state, session, agent)
        if kwargs is None:
            continue
        if "wake" in kwargs:  # a queue fires a wake at (or after) its time
            due = [e.at for e in state["scheduled"] if e.key == kwargs["wake"]]
            if due and due[0] > clock.now():
                clock.set(to_iso(due[0]))
        call = {"session_id": SID, "session": session, "history": list(history), **kwargs}

        provider.reset(f"{n}")
        calls_before = len(provider.log)
        try:
            r = agent.turn(**call)
        except ProviderError:
            assert op["kind"] == "message", "only a message turn's understand call may raise ProviderError"
            assert provider.log[-1] == "understand", f"a ProviderError escaped from a {provider.log[-1]} call"
            event("understand failed (ProviderError, documented)")
            continue
        event(f"{op['kind']}: changed={r.changed}")
        if "summary" in provider.log[calls_before:]:
            event("compaction summarised the history")
        for code in {line.code for line in r.outcomes} | {skip.code for skip in r.skipped}:
            event(f"code {code}")
        for ended in r.ended:
            event(f"ended {ended.reason}")
        check_invariants(session, r, op["kind"])

        provider.reset(f"{n}")  # the host's replay after a conflict: same input, same session, same answers
        if n % 3 == 1:  # replays go through turn_stream and aturn too: the final result is the same turn
            chunks = list(agent.turn_stream(**call))
            assert chunks[-1].get("done") is True and all("delta" in c for c in chunks[:-1])
            again = chunks[-1]["result"]
        elif n % 3 == 2:
            again = asyncio.run(agent.aturn(**call))
        else:
            again = agent.turn(**call)
        assert keys_of(again) == keys_of(r), "a replay of the same input gave different keys"
        assert session is None or call["session"].to_json() == session.to_json(), "turn() mutated its input"

        state["ever_scheduled"].update(e.key for e in r.schedule)
        waiting = {run.waiting.key for run in r.session.runs if run.status == "waiting"}
        assert waiting <= state["ever_scheduled"], f"a run waits on a wake never scheduled: {waiting - state['ever_scheduled']}"
        pending = {w.key for w in agent.pending_wakes(session=r.session, context=op["context"], anchors=op["anchors"])}
        assert waiting <= pending, "pending_wakes() misses a parked run's wake"
        for wake in agent.pending_wakes(session=r.session, context=op["context"], anchors=op["anchors"]):
            assert aware_utc(wake.at)

        if r.changed:
            if "message" in kwargs:
                history.append(user_message(kwargs["message"]))
            history.extend(assistant_message(m.text) for m in r.messages)
            saved = store.save(r.session, session.version if session is not None else 0)
            loaded = store.load(SID)
            assert loaded.to_json() == saved.to_json()
            replaced = {e.replaces for e in r.schedule if e.replaces}
            state["scheduled"] = [e for e in state["scheduled"] if e.key not in replaced] + list(r.schedule)


STATUSES = ["running", "asking", "waiting", "suspended"]
TRIGGER_KINDS = ["message", "mention", "silence", "event", "start", "flow"]


@st.composite
def odd_sessions(draw) -> dict:
    """Blobs that pass the shape check but hold runs no turn would leave behind: unknown flows and
    steps, an asking run with a `waiting`, two askers, a waiting run with no key, and so on."""
    runs = []
    for i in range(draw(st.integers(0, 3))):
        flow_id = draw(st.sampled_from(["f0", "f1", "f2", "sumiu"]))
        run_id = f"{flow_id}#k{i}"
        run = {
            "id": run_id, "flowId": flow_id, "anchor": draw(st.sampled_from([SID, "lead:1"])),
            "dedupeKey": f"{flow_id}:{SID}:", "stepId": draw(st.sampled_from(["s0", "s1", "s3", "nada", None])),
            "status": draw(st.sampled_from(STATUSES)),
            "trigger": {"kind": draw(st.sampled_from(TRIGGER_KINDS)), "key": f"k{i}"},
            "hop": draw(st.integers(0, 6)), "startedAt": "2026-09-20T09:00:00.000Z",
            "asked": draw(st.dictionaries(st.sampled_from(["nome", "ok", "idade"]), st.integers(0, 5), max_size=2)),
            "visits": draw(st.dictionaries(st.sampled_from(["s0", "s1", "s2"]), st.integers(0, 60), max_size=2)),
            "outcomes": [],
        }
        if draw(st.booleans()):
            waiting = {"kind": draw(st.sampled_from(["timer", "event"])), "setAt": "2026-09-20T09:00:00.000Z"}
            if draw(st.booleans()):
                waiting["key"] = f"{run_id}:s1:1758362400000"
                waiting["until"] = "2026-09-20T10:00:00.000Z"
            if waiting["kind"] == "event":
                waiting["event"] = draw(st.sampled_from(["pago", "visita", "fantasma"]))
            run["waiting"] = waiting
        if draw(st.booleans()):
            run["suspendedAt"] = "2026-09-20T09:30:00.000Z"
        if draw(st.integers(0, 3)) == 0:
            run["staying"] = True
        if draw(st.booleans()):
            run["input"] = {"origem": "site"}
        runs.append(run)
    blob = {"id": SID, "v": 4, "version": draw(st.integers(1, 9)),
            "data": draw(st.dictionaries(st.sampled_from(["nome", "idade", "ok", "porte", "x"]),
                                         st.one_of(st.none(), st.booleans(), st.integers(-1, 99), st.text(max_size=4)),
                                         max_size=3)),
            "runs": runs, "claims": {r["dedupeKey"]: {"at": "2026-09-20T09:00:00.000Z"} for r in runs},
            "inputs": ["wamid.0"], "metadata": {}}
    if draw(st.booleans()):
        blob["lastAssistantAt"] = "2026-09-20T09:00:00.000Z"
    if draw(st.booleans()):
        blob["lastUserAt"] = draw(st.sampled_from(["2026-09-20T08:00:00.000Z", "2026-09-20T09:10:00.000Z"]))
    return blob


@settings(max_examples=EXAMPLES, deadline=None, derandomize=IN_CI, database=None if IN_CI else settings().database,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(data=st.data())
def test_odd_but_well_formed_sessions_never_crash_a_turn(data):
    flow_dicts = data.draw(flows(), label="flows")
    provider = FuzzProvider(failure_rate=0.1)
    clock = fake_clock("2026-09-20T10:00:00Z")
    try:
        agent = build_agent(flow_dicts, provider, clock, idle=None, with_business_hours=False)
    except FlowConfigurationError:
        assume(False)
    session = Session.from_json(data.draw(odd_sessions(), label="session"), SID)
    state = {"n": 0, "message_ids": [], "event_keys": [], "start_keys": [], "scheduled": [], "ever_scheduled": set()}
    for n, op in enumerate(data.draw(inputs(data.draw(st.integers(1, 4))), label="inputs")):
        state["n"] = n
        kwargs = kwargs_for(op, state, session, agent)
        if kwargs is None:
            kwargs = {"wake": f"{session.runs[0].waiting.key}" if session.runs and session.runs[0].waiting
                      and session.runs[0].waiting.key else "x#y:z:1"}
        call = {"session_id": SID, "session": session, **kwargs}
        provider.reset(f"odd{n}")
        try:
            r = agent.turn(**call)
        except ProviderError:
            assert provider.log[-1] == "understand"
            continue
        blob = r.session.to_json()
        assert Session.from_json(blob, SID).to_json() == blob
        assert all(aware_utc(e.at) for e in r.schedule)
        if not r.changed:
            assert blob == session.to_json() and r.messages == [] and r.schedule == []
        provider.reset(f"odd{n}")
        assert keys_of(agent.turn(**call)) == keys_of(r)
        if r.changed:
            session = r.session
