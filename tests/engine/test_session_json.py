"""Session JSON: the v4 blob read and written back unchanged, camelCase, optional keys omitted."""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from falai_django.engine.jstime import to_iso
from falai_django.engine.session import (
    OUTCOME_CODES,
    Run,
    Session,
    StepOutcome,
    Trigger,
    Waiting,
    assistant_message,
    user_message,
)


def v4_blob(legacy_blobs_dir) -> dict:
    return json.loads((legacy_blobs_dir / "v4.json").read_text())


def test_the_v4_fixture_round_trips_unchanged(legacy_blobs_dir):
    blob = v4_blob(legacy_blobs_dir)
    session = Session.from_json(blob, "conv_v4")
    assert session.to_json() == blob
    assert json.loads(session.to_json_text()) == blob
    assert Session.from_json_text(session.to_json_text(), "conv_v4").to_json() == blob


def test_snake_case_attributes_read_the_camel_case_blob(legacy_blobs_dir):
    session = Session.from_json(v4_blob(legacy_blobs_dir), "conv_v4")
    assert session.last_user_at == "2026-09-20T10:02:00.000Z"
    assert session.last_assistant_at == "2026-09-20T10:02:05.000Z"
    triagem, retomar = session.runs
    assert (triagem.flow_id, triagem.dedupe_key, triagem.step_id, triagem.status) == (
        "triagem", "triagem:conv_v4:", "porte", "asking")
    assert triagem.outcomes[0].llm_calls == 1 and triagem.outcomes[0].run_id == "triagem#m1"
    assert retomar.waiting.set_at == "2026-09-20T11:00:00.000Z"
    assert retomar.waiting.key == "retomar#1758362400000:w1:1758448800000"
    assert retomar.trigger.kind == "silence" and retomar.input is None


def test_text_is_compact_like_json_stringify(legacy_blobs_dir):
    text = Session.from_json(v4_blob(legacy_blobs_dir)).to_json_text()
    assert text.startswith('{"id":"conv_v4","v":4,"version":3,"data":{"nome":"João"')
    assert ", " not in text and ": " not in text


def test_the_blob_keys_are_written_in_upstream_order():
    session = Session.fresh("s1")
    session.last_user_at = "2026-09-20T10:00:00.000Z"
    session.history = [user_message("oi")]
    assert list(session.to_json()) == ["id", "v", "version", "data", "runs", "claims", "inputs", "metadata",
                                       "lastUserAt", "history"]


def test_a_fresh_session_has_exactly_the_eight_keys():
    assert Session.fresh("5511").to_json() == {
        "id": "5511", "v": 4, "version": 0, "data": {}, "runs": [], "claims": {}, "inputs": [], "metadata": {}}
    assert Session(id="5511").to_json() == Session.fresh("5511").to_json()


def test_unset_optional_keys_are_omitted_not_null_and_step_id_null_is_written():
    run = Run(id="f#k", flow_id="f", anchor="s1", dedupe_key="f:s1:", status="waiting",
              trigger=Trigger(kind="event", key="k"), started_at="2026-09-20T10:00:00.000Z")
    assert run.to_json() == {
        "id": "f#k", "flowId": "f", "anchor": "s1", "dedupeKey": "f:s1:", "stepId": None, "status": "waiting",
        "trigger": {"kind": "event", "key": "k"}, "hop": 0, "startedAt": "2026-09-20T10:00:00.000Z",
        "asked": {}, "visits": {}, "outcomes": []}
    run.suspended_at = "2026-09-20T10:00:00.000Z"
    run.staying = True
    run.input = {"a": None}
    run.waiting = Waiting(kind="timer", key="w", until="2026-09-21T10:00:00.000Z", set_at="2026-09-20T10:00:00.000Z")
    out = run.to_json()
    assert out["suspendedAt"] == "2026-09-20T10:00:00.000Z" and out["staying"] is True
    assert out["input"] == {"a": None}  # nulls inside values are kept
    assert out["waiting"] == {"kind": "timer", "key": "w", "until": "2026-09-21T10:00:00.000Z",
                              "setAt": "2026-09-20T10:00:00.000Z"}
    run.suspended_at = None  # None removes the key
    assert "suspendedAt" not in run.to_json()


def test_an_outcome_line_omits_what_it_does_not_carry():
    line = StepOutcome(kind="wait", status="skipped", code="stale-wake", message="m", key="k",
                       at="2026-09-20T10:00:00.000Z")
    assert line.to_json() == {"key": "k", "kind": "wait", "status": "skipped", "code": "stale-wake",
                              "message": "m", "at": "2026-09-20T10:00:00.000Z"}
    fast = StepOutcome.model_construct(kind="say", status="ok", at="x", run_id="r")
    assert fast.to_json() == {"runId": "r", "kind": "say", "status": "ok", "at": "x"}


def test_session_data_keeps_nulls():
    session = Session.fresh("s1")
    session.data["endereco"] = None
    assert Session.from_json(session.to_json()).data == {"endereco": None}


def test_copy_deep_is_independent(legacy_blobs_dir):
    blob = v4_blob(legacy_blobs_dir)
    blob["runs"][0]["input"] = {"x": [{"y": 1}]}
    session = Session.from_json(blob)
    copy = session.copy_deep()
    assert copy.to_json() == session.to_json() and copy is not session
    copy.data["nome"] = "outro"
    copy.runs[0].input["x"][0]["y"] = 2
    copy.runs[0].asked["n"] = 3
    copy.runs[0].outcomes[0].detail = "d"
    copy.runs[1].waiting.until = "z"
    copy.claims["triagem:conv_v4:"]["at"] = "z"
    copy.inputs.append("m4")
    assert session.to_json() == blob


def test_history_items():
    assert user_message("oi") == {"role": "user", "content": "oi"}
    assert assistant_message("Olá!") == {"role": "assistant", "content": "Olá!"}


def test_there_are_38_outcome_codes():
    assert len(OUTCOME_CODES) == len(set(OUTCOME_CODES)) == 38
    assert "asked-fixed" in OUTCOME_CODES and "provider-invalid" in OUTCOME_CODES


# ---------------------------------------------------------------------------------------------
# generated sessions
# ---------------------------------------------------------------------------------------------

_texts = st.text(alphabet=string.ascii_letters + string.digits + ":#._-çãéü中😊 ", max_size=12)
_ids = st.text(alphabet=string.ascii_letters + string.digits + ":#._-", min_size=1, max_size=12)
_isos = st.integers(min_value=0, max_value=10**8).map(
    lambda s: to_iso(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=s * 37)))
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _texts
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=12,
)


def _maybe(strategy):
    return st.one_of(st.just(None), strategy)


@st.composite
def outcomes(draw):
    line = {"kind": draw(st.sampled_from(["prompt", "collect", "say", "do", "wait", "if", "idle"])),
            "status": draw(st.sampled_from(["ok", "skipped", "failed", "waiting", "deferred"])),
            "at": draw(_isos)}
    for key, strategy in (("runId", _ids), ("flowId", _ids), ("stepId", _ids), ("key", _ids),
                          ("code", st.sampled_from(OUTCOME_CODES)), ("message", _texts), ("detail", _texts),
                          ("next", _ids), ("until", _isos), ("llmCalls", st.integers(0, 9))):
        value = draw(_maybe(strategy))
        if value is not None:
            line[key] = value
    return line


@st.composite
def runs(draw):
    run = {"id": draw(_ids), "flowId": draw(_ids), "anchor": draw(_ids), "dedupeKey": draw(_ids),
           "stepId": draw(_maybe(_ids)),
           "status": draw(st.sampled_from(["running", "asking", "waiting", "suspended"])),
           "trigger": {"kind": draw(st.sampled_from(["message", "mention", "silence", "event", "start", "flow"])),
                       "key": draw(_ids)},
           "hop": draw(st.integers(0, 4)), "startedAt": draw(_isos),
           "asked": draw(st.dictionaries(_ids, st.integers(0, 5), max_size=3)),
           "visits": draw(st.dictionaries(_ids, st.integers(0, 5), max_size=3)),
           "outcomes": draw(st.lists(outcomes(), max_size=4))}
    payload = draw(_maybe(_json.filter(lambda v: v is not None)))
    if payload is not None:
        run["trigger"]["payload"] = payload
        run["input"] = payload
    if draw(st.booleans()):
        run["suspendedAt"] = draw(_isos)
    if draw(st.booleans()):
        run["staying"] = True
    if draw(st.booleans()):
        waiting = {"kind": draw(st.sampled_from(["timer", "event"])), "key": draw(_ids),
                   "until": draw(_isos), "setAt": draw(_isos)}
        if waiting["kind"] == "event":
            waiting["event"] = draw(_ids)
        run["waiting"] = waiting
    return run


@st.composite
def sessions(draw):
    blob = {"id": draw(_ids), "v": 4, "version": draw(st.integers(0, 10**6)),
            "data": draw(st.dictionaries(_texts, _json, max_size=5)),
            "runs": draw(st.lists(runs(), max_size=3)),
            "claims": draw(st.dictionaries(_ids, _isos.map(lambda at: {"at": at}), max_size=4)),
            "inputs": draw(st.lists(_ids, max_size=4)),
            "metadata": draw(st.dictionaries(_texts, _json, max_size=3))}
    for key in ("lastUserAt", "lastAssistantAt"):
        if draw(st.booleans()):
            blob[key] = draw(_isos)
    if draw(st.booleans()):
        blob["history"] = draw(st.lists(st.builds(lambda r, c: {"role": r, "content": c},
                                                  st.sampled_from(["user", "assistant"]), _texts), max_size=3))
    return blob


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_generated_sessions_round_trip(blob):
    session = Session.from_json(blob, blob["id"])
    assert session.to_json() == blob
    assert json.loads(session.to_json_text()) == blob
    assert Session.from_json_text(session.to_json_text(), blob["id"]).to_json() == blob
    assert session.copy_deep().to_json() == blob
