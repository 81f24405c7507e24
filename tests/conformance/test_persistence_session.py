"""Session JSON (README "Sessions on the wire", persistence note §1.2, §1.7): camelCase keys,
toISOString times, omitted optional keys, Session.from_json checks. Written from the spec alone."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from falai_django import InvalidSessionError, Session

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-blobs"
V4_TEXT = (FIX / "v4.json").read_text(encoding="utf-8")
V4 = json.loads(V4_TEXT)


def full_blob():
    blob = copy.deepcopy(V4)
    blob["history"] = [{"role": "user", "content": "oi"}, {"role": "assistant", "content": "olá"}]
    run = blob["runs"][1]
    run["trigger"]["payload"] = {"deal": {"id": 456, "tags": ["a", "b"], "ok": True, "v": 1.5}}
    run["input"] = {"deal": {"id": 456}}
    run["suspendedAt"] = "2026-09-20T12:00:00.000Z"
    blob["runs"][0]["staying"] = True
    blob["runs"][0]["outcomes"].append({
        "runId": "triagem#m1", "flowId": "triagem", "stepId": "porte", "key": "triagem#m1:porte:1", "kind": "collect",
        "status": "skipped", "code": "max-asks", "message": "A field was skipped.", "detail": "tamanho",
        "next": "end", "until": "2026-09-21T10:00:00.000Z", "at": "2026-09-20T10:00:02.000Z", "llmCalls": 0})
    blob["runs"][0]["outcomes"].append({"kind": "collect", "status": "skipped", "code": "bad-value",
                                        "detail": "idade", "at": "2026-09-20T10:00:03.000Z"})
    blob["claims"]["sempre:full:wamid.HBgN.abc"] = {"at": "2026-09-20T10:00:00.000Z"}
    return blob


def test_v4_fixture_round_trips_exactly():
    s = Session.from_json(V4)
    assert s.to_json() == V4
    assert list(s.to_json()) == ["id", "v", "version", "data", "runs", "claims", "inputs", "metadata",
                                 "lastUserAt", "lastAssistantAt"]


def test_full_blob_round_trips_and_key_order():
    blob = full_blob()
    s = Session.from_json(blob, "conv_v4")
    out = s.to_json()
    assert out == blob
    assert json.loads(s.to_json_text()) == blob
    assert list(out["runs"][0])[:6] == ["id", "flowId", "anchor", "dedupeKey", "stepId", "status"]


def test_snake_case_attributes():
    s = Session.from_json(full_blob())
    assert (s.id, s.v, s.version) == ("conv_v4", 4, 3)
    assert s.last_user_at == "2026-09-20T10:02:00.000Z"
    assert s.last_assistant_at == "2026-09-20T10:02:05.000Z"
    assert s.history[0]["content"] == "oi"
    r0, r1 = s.runs
    assert (r0.id, r0.flow_id, r0.anchor, r0.dedupe_key, r0.step_id, r0.status, r0.hop) == (
        "triagem#m1", "triagem", "conv_v4", "triagem:conv_v4:", "porte", "asking", 0)
    assert r0.trigger.kind == "message" and r0.trigger.key == "m1"
    assert r0.started_at == "2026-09-20T10:00:00.000Z" and r0.staying is True
    assert r0.asked == {"orcamento": 1} and r0.visits == {"quem": 1, "porte": 1}
    assert r0.outcomes[0].llm_calls == 1 and r0.outcomes[0].run_id == "triagem#m1"
    assert r1.waiting.set_at == "2026-09-20T11:00:00.000Z" and r1.waiting.kind == "timer"
    assert r1.suspended_at == "2026-09-20T12:00:00.000Z" and r1.input == {"deal": {"id": 456}}
    for name in ("id", "v", "version", "data", "runs", "claims", "inputs", "last_user_at", "last_assistant_at",
                 "history", "metadata"):
        assert hasattr(s, name)
    for name in ("id", "flow_id", "anchor", "dedupe_key", "step_id", "status", "trigger", "input", "hop",
                 "started_at", "suspended_at", "staying", "waiting", "asked", "visits", "outcomes"):
        assert hasattr(r0, name)


def test_optional_keys_omitted_never_null():
    blob = {"id": "s", "v": 4, "version": 0, "data": {}, "runs": [{
        "id": "f#k", "flowId": "f", "anchor": "s", "dedupeKey": "f:s:", "stepId": None, "status": "running",
        "trigger": {"kind": "start", "key": "k"}, "hop": 0, "startedAt": "2026-09-20T10:00:00.000Z",
        "asked": {}, "visits": {}, "outcomes": []}], "claims": {}, "inputs": [], "metadata": {}}
    s = Session.from_json(blob)
    out = s.to_json()
    assert out == blob
    assert out["runs"][0]["stepId"] is None  # the one nullable key always written
    text = s.to_json_text()
    for key in ("lastUserAt", "lastAssistantAt", "history", "suspendedAt", "staying", "waiting", "input",
                "payload"):
        assert f'"{key}"' not in text


def test_text_is_compact_and_keeps_unicode():
    s = Session.from_json(V4)
    text = s.to_json_text()
    order = ["id", "v", "version", "data", "runs", "claims", "inputs", "metadata", "lastUserAt", "lastAssistantAt"]
    assert text == json.dumps({k: V4[k] for k in order}, separators=(",", ":"), ensure_ascii=False)
    assert "João" in text


def test_fresh_like_session_via_from_json_and_bare_keys():
    bare = {"id": "s", "v": 4, "version": 0, "data": {}, "runs": [], "claims": {}, "inputs": [], "metadata": {}}
    s = Session.from_json(bare)
    assert sorted(s.to_json()) == sorted(["claims", "data", "id", "inputs", "metadata", "runs", "v", "version"])


def test_times_are_to_iso_string_format():
    s = Session.from_json(V4)
    for iso in (s.last_user_at, s.last_assistant_at, s.runs[0].started_at):
        assert len(iso) == 24 and iso.endswith("Z") and iso[19] == "."


def test_from_json_normalises():
    blob = copy.deepcopy(V4)
    blob["runs"][0]["staying"] = False
    blob["runs"][0]["suspendedAt"] = 5
    blob["runs"][0]["extra"] = "x"
    blob["createdAt"] = "x"
    out = Session.from_json(blob, "conv_v4").to_json()
    assert "staying" not in out["runs"][0] and "suspendedAt" not in out["runs"][0] and "extra" not in out["runs"][0]
    assert "createdAt" not in out


@pytest.mark.parametrize(("mutate", "reason"), [
    (lambda b: b.update(v=3), "v is 3, expected 4"),
    (lambda b: b.pop("v"), "v is missing, expected 4"),
    (lambda b: b.update(version="3"), 'version is "3", expected a whole number'),
    (lambda b: b.update(data=[]), "data is a list, expected an object"),
    (lambda b: b.update(runs=None), "runs is null, expected a list"),
    (lambda b: b.update(claims={"k": {"at": 5}}), "claims is not a map of { at }"),
    (lambda b: b.update(inputs="m1"), "inputs is not a list of ids"),
    (lambda b: b.update(metadata=[]), "metadata is a list, expected an object"),
    (lambda b: b.update(history="x"), 'history is "x", expected a list'),
    (lambda b: b.update(lastUserAt=None), "lastUserAt is not text"),
    (lambda b: b["runs"].__setitem__(0, "x"), 'runs[0] is "x", expected an object'),
    (lambda b: b["runs"][1].update(status=None), "runs[1].status is null"),
    (lambda b: b["runs"][1].update(status="sleeping"), 'runs[1].status is "sleeping"'),
])
def test_from_json_errors(mutate, reason):
    blob = copy.deepcopy(V4)
    mutate(blob)
    with pytest.raises(InvalidSessionError) as exc:
        Session.from_json(blob, "conv_v4")
    assert str(exc.value).startswith(f'[InvalidSessionError] stored session "conv_v4" is unreadable: {reason}')
    assert exc.value.session_id == "conv_v4"


def test_from_json_not_an_object():
    for bad, what in ((None, "null"), ([], "a list"), ("x", '"x"'), (5, "5")):
        with pytest.raises(InvalidSessionError) as exc:
            Session.from_json(bad, "s1")
        assert f"is unreadable: expected an object, got {what}" in str(exc.value)


def test_from_json_id_mismatch():
    with pytest.raises(InvalidSessionError) as exc:
        Session.from_json(V4, "other")
    assert 'id is "conv_v4", expected "other"' in str(exc.value)


def test_legacy_blob_refused():
    legacy = json.loads((FIX / "prospectar-midflow.json").read_text(encoding="utf-8"))
    with pytest.raises(InvalidSessionError) as exc:
        Session.from_json(legacy, legacy["id"])
    assert "v is missing, expected 4" in str(exc.value)


def test_to_json_is_independent_of_input():
    blob = copy.deepcopy(V4)
    s = Session.from_json(blob)
    s.data["novo"] = 1
    assert "novo" not in V4["data"]


def test_numbers_written_as_javascript_writes_them():
    blob = {"id": "s", "v": 4, "version": 0, "runs": [], "claims": {}, "inputs": [], "metadata": {},
            "data": {"a": 1.0, "b": 1500.5, "c": 1e16, "d": 1e-6, "e": 1e-7, "f": 1e21, "g": -0.0, "h": "1.0,"}}
    text = Session.from_json(blob).to_json_text()
    assert text == ('{"id":"s","v":4,"version":0,"data":{"a":1,"b":1500.5,"c":10000000000000000,"d":0.000001,'
                    '"e":1e-7,"f":1e+21,"g":0,"h":"1.0,"},"runs":[],"claims":{},"inputs":[],"metadata":{}}')
