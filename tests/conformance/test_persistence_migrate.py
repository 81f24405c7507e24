"""migrate_session (persistence note §2): dispatch, legacy rules, every §2.3 error, and the
three fixtures per §2.4. Written from the spec alone."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from falai_django import InvalidSessionError, MemoryStore, Session, migrate_session

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-blobs"
NOW = datetime(2026, 9, 21, 12, tzinfo=UTC)
NOW_ISO = "2026-09-21T12:00:00.000Z"


def load(name):
    return json.loads((FIX / name).read_text(encoding="utf-8"))


def ident(x):
    return x


def j(session):
    return session.to_json()


# ----------------------------------------------------------------------------- prospectar

def test_prospectar_midflow():
    blob = load("prospectar-midflow.json")
    sid = blob["id"]
    s = migrate_session(blob, session_id=sid, flow_id_of=ident, now=NOW)
    out = j(s)
    assert out["version"] == 0 and s.version == 0
    assert out["v"] == 4 and out["id"] == sid
    assert out["runs"] == [{
        "id": "qualificacao#legacy", "flowId": "qualificacao", "anchor": sid, "dedupeKey": f"qualificacao:{sid}:",
        "stepId": "ask_budget", "status": "asking", "trigger": {"kind": "message", "key": "legacy"}, "hop": 0,
        "startedAt": "2026-09-01T13:05:12.000Z", "asked": {}, "visits": {}, "outcomes": [],
    }]
    assert list(out["claims"].items()) == [
        (f"boas_vindas:{sid}:", {"at": "2026-09-01T13:05:12.000Z"}),
        (f"qualificacao:{sid}:", {"at": "2026-09-01T13:05:12.000Z"}),
    ]
    assert out["inputs"] == []
    assert out["metadata"] == blob["metadata"]
    assert "history" not in out and "lastUserAt" not in out and "lastAssistantAt" not in out
    assert s.data is blob["data"]
    assert set(out) == {"id", "v", "version", "data", "runs", "claims", "inputs", "metadata"}


def test_prospectar_save_and_load_in_memory_store():
    blob = load("prospectar-midflow.json")
    sid = blob["id"]
    s = migrate_session(blob, session_id=sid, flow_id_of=ident, now=NOW)
    store = MemoryStore()
    saved = store.save(s, s.version)
    assert saved.version == 1
    loaded = store.load(sid)
    assert j(loaded) == {**j(s), "version": 1}


# ----------------------------------------------------------------------------- ilojista

def test_ilojista_signals():
    blob = load("ilojista-signals.json")
    sid = blob["id"]
    original = copy.deepcopy(blob)
    s = migrate_session(blob, session_id=sid, flow_id_of=ident, now=NOW)
    out = j(s)
    assert len(out["runs"]) == 1
    run = out["runs"][0]
    assert (run["id"], run["stepId"], run["status"], run["startedAt"]) == (
        "atendimento_pedido#legacy", "confirmar_endereco", "asking", "2026-09-03T15:20:05.000Z")
    assert list(out["claims"].items()) == [
        (f"not_interested_detection:{sid}:", {"at": "2026-09-03T15:21:10.000Z"}),
        (f"pediu_preco:{sid}:", {"at": "2026-09-03T15:22:02.000Z"}),
        (f"bot_detected:{sid}:", {"at": "2026-09-03T15:23:15.000Z"}),
        (f"lembrete_carrinho:{sid}:", {"at": "2026-09-03T15:24:00.000Z"}),
        (f"atendimento_pedido:{sid}:", {"at": "2026-09-03T15:20:05.000Z"}),
    ]
    assert out["version"] == 0
    assert out["data"] == original["data"]
    assert out["data"]["endereco"] is None
    text = s.to_json_text()
    assert "pendingDirective" not in text and "pagamento" not in text
    assert blob == original


def test_ilojista_renaming():
    blob = load("ilojista-signals.json")
    sid = blob["id"]
    calls = []

    def rename(x):
        calls.append(x)
        return {"pediu_preco": "preco", "atendimento_pedido": "pedido"}.get(x, x)

    out = j(migrate_session(blob, session_id=sid, flow_id_of=rename, now=NOW))
    run = out["runs"][0]
    assert (run["id"], run["flowId"], run["dedupeKey"]) == ("pedido#legacy", "pedido", f"pedido:{sid}:")
    assert sorted(out["claims"]) == sorted(f"{k}:{sid}:" for k in (
        "bot_detected", "lembrete_carrinho", "not_interested_detection", "pedido", "preco"))
    assert calls


def test_ilojista_round_trips_through_store_with_null_data():
    blob = load("ilojista-signals.json")
    sid = blob["id"]
    store = MemoryStore()
    store.save(migrate_session(blob, session_id=sid, flow_id_of=ident, now=NOW), 0)
    assert store.load(sid).data["endereco"] is None


# ----------------------------------------------------------------------------- v4

def test_v4_pass_through():
    blob = load("v4.json")

    def never(x):
        raise AssertionError("flow_id_of must not be called")

    s = migrate_session(blob, session_id="conv_v4", flow_id_of=never)
    assert j(s) == blob
    assert s.version == 3


def test_v4_bookkeeping_keys_dropped():
    blob = load("v4.json")
    blob["createdAt"] = "2026-09-20T10:00:00.000Z"
    blob["updatedAt"] = "2026-09-20T10:00:00.000Z"
    out = j(migrate_session(blob, session_id="conv_v4", flow_id_of=ident))
    assert sorted(out) == sorted(["claims", "data", "id", "inputs", "lastAssistantAt", "lastUserAt", "metadata",
                                  "runs", "v", "version"])


# ----------------------------------------------------------------------------- other legacy

def test_minimal_legacy():
    data = {"a": 1}
    out = j(migrate_session({"id": "whatever", "data": data}, session_id="s1", flow_id_of=ident, now=NOW))
    assert out == {"id": "s1", "v": 4, "version": 0, "data": {"a": 1}, "runs": [], "claims": {}, "inputs": [],
                   "metadata": {}}


def test_flow_without_step_or_date():
    out = j(migrate_session({"data": {}, "currentFlow": {"id": "f", "title": "F"}}, session_id="s1",
                            flow_id_of=ident, now=NOW))
    run = out["runs"][0]
    assert run["status"] == "running" and run["stepId"] is None and run["startedAt"] == NOW_ISO
    assert out["claims"] == {"f:s1:": {"at": NOW_ISO}}


def test_now_defaults_to_current_time():
    before = datetime.now(UTC)
    out = j(migrate_session({"data": {}, "currentFlow": "f"}, session_id="s1", flow_id_of=ident))
    at = datetime.fromisoformat(out["runs"][0]["startedAt"].replace("Z", "+00:00"))
    assert abs((at - before).total_seconds()) < 5
    assert out["runs"][0]["startedAt"].endswith("Z") and len(out["runs"][0]["startedAt"]) == 24


def test_bare_string_refs_and_empty_string():
    out = j(migrate_session({"data": {}, "currentFlow": "f", "currentStep": "s"}, session_id="s1",
                            flow_id_of=ident, now=NOW))
    assert out["runs"][0]["stepId"] == "s" and out["runs"][0]["status"] == "asking"
    out = j(migrate_session({"data": {}, "currentFlow": "", "currentStep": "s"}, session_id="s1",
                            flow_id_of=ident, now=NOW))
    assert out["runs"] == []
    out = j(migrate_session({"data": {}, "currentFlow": None}, session_id="s1", flow_id_of=ident, now=NOW))
    assert out["runs"] == []


def test_history_kept_only_when_present():
    out = j(migrate_session({"data": {}, "history": [{"role": "user", "content": "oi"}]}, session_id="s1",
                            flow_id_of=ident, now=NOW))
    assert out["history"] == [{"role": "user", "content": "oi"}]
    assert "history" not in j(migrate_session({"data": {}}, session_id="s1", flow_id_of=ident, now=NOW))


def test_run_claim_overwrites_earlier_same_key():
    blob = {"data": {}, "currentFlow": {"id": "f", "enteredAt": "2026-09-01T10:00:00.000Z"},
            "flowHistory": [{"flowId": "f", "completed": True, "exitedAt": "2026-08-01T10:00:00.000Z"}]}
    out = j(migrate_session(blob, session_id="s1", flow_id_of=ident, now=NOW))
    assert out["claims"] == {"f:s1:": {"at": "2026-09-01T10:00:00.000Z"}}


def test_claim_time_fallbacks():
    blob = {"data": {}, "flowHistory": [
        {"flowId": "a", "completed": True, "enteredAt": "2026-09-01T10:00:00.000Z"},
        {"flowId": "b", "completed": True},
        {"flowId": "c", "completed": True, "exitedAt": int(datetime(2026, 9, 1, 10, tzinfo=UTC).timestamp() * 1000)},
        {"flowId": "d", "completed": "yes"},
    ], "signals": {"triggers": {"x": {"firstTriggeredAt": "2026-09-02T00:00:00.000Z"}, "y": {"count": 2}}}}
    out = j(migrate_session(blob, session_id="s1", flow_id_of=ident, now=NOW))
    assert out["claims"] == {
        "a:s1:": {"at": "2026-09-01T10:00:00.000Z"},
        "b:s1:": {"at": NOW_ISO},
        "c:s1:": {"at": "2026-09-01T10:00:00.000Z"},
        "x:s1:": {"at": "2026-09-02T00:00:00.000Z"},
        "y:s1:": {"at": NOW_ISO},
    }


def test_datetime_instances_become_iso():
    d = datetime(2026, 9, 1, 13, 5, 12, tzinfo=UTC)
    blob = {"data": {}, "currentFlow": {"id": "f", "enteredAt": d},
            "flowHistory": [{"flowId": "g", "completed": True, "exitedAt": d}],
            "signals": {"triggers": {"t": {"lastTriggeredAt": d}}},
            "metadata": {"createdAt": d, "nested": {"list": [d, "text", 1]}}}
    s = migrate_session(blob, session_id="s1", flow_id_of=ident, now=NOW)
    out = j(s)
    iso = "2026-09-01T13:05:12.000Z"
    assert out["runs"][0]["startedAt"] == iso
    assert all(c["at"] == iso for c in out["claims"].values())
    assert out["metadata"] == {"createdAt": iso, "nested": {"list": [iso, "text", 1]}}
    text = s.to_json_text()
    assert json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) == text


# ----------------------------------------------------------------------------- §2.3 errors

V4 = load("v4.json")


def v4(**changes):
    blob = copy.deepcopy(V4)
    blob["id"] = "s1"
    for k, val in changes.items():
        if val is ...:
            del blob[k]
        else:
            blob[k] = val
    return blob


def v4_run(**changes):
    blob = v4()
    for k, val in changes.items():
        if val is ...:
            del blob["runs"][0][k]
        else:
            blob["runs"][0][k] = val
    return blob


ERRORS = [
    (None, "expected an object, got null"),
    ("nope", 'expected an object, got "nope"'),
    ([], "expected an object, got a list"),
    ({}, "data is missing, expected an object; not a 3.x session either"),
    ({"data": "nope"}, 'data is "nope"'),
    ({"data": []}, "data is a list"),
    ({"data": {}, "currentFlow": 5}, "currentFlow is 5, expected { id } or text"),
    ({"data": {}, "currentFlow": {"title": "F"}}, "currentFlow is an object, expected { id } or text"),
    ({"data": {}, "flowHistory": [{"completed": True}]}, "flowHistory[0] is not a flow entry"),
    ({"data": {}, "signals": {"triggers": []}}, "signals.triggers is a list, expected an object"),
    ({"data": {}, "metadata": "x"}, "metadata"),
    ({"data": {}, "signals": {"triggers": {"k": 5}}}, "signals.triggers.k is not a trigger state"),
    ({"data": {}, "history": {}}, "history"),
    ({"data": {}, "flowHistory": {}}, "flowHistory"),
    (v4(v=3), "v is 3, expected 4"),
    (v4(id="other"), 'id is "other", expected "s1"'),
    (v4(version="3"), 'version is "3", expected a whole number'),
    (v4(version=1.5), "version is 1.5, expected a whole number"),
    (v4(version=True), "version is true, expected a whole number"),
    (v4(version=-1), "version is -1, expected a whole number"),
    (v4(runs={}), "runs is an object, expected a list"),
    (v4(claims={"k": {}}), "claims is not a map of { at }"),
    (v4(inputs=["m1", 2]), "inputs is not a list of ids"),
    (v4(metadata=...), "metadata is missing, expected an object"),
    (v4(history={}), "history is an object, expected a list"),
    (v4(lastUserAt=5), "lastUserAt is not text"),
    (v4(lastAssistantAt=None), "lastAssistantAt is not text"),
    (v4(data=None), "data is null, expected an object"),
    (v4_run(status="done"), 'runs[0].status is "done"'),
    (v4_run(trigger=...), "runs[0].trigger needs kind and key"),
    (v4_run(trigger="x"), "runs[0].trigger needs kind and key"),
    (v4_run(trigger={"kind": "message"}), "runs[0].trigger needs kind and key"),
    (v4_run(hop="0"), "runs[0]"),
]


@pytest.mark.parametrize(("blob", "reason"), ERRORS)
def test_invalid(blob, reason):
    with pytest.raises(InvalidSessionError) as exc:
        migrate_session(blob, session_id="s1", flow_id_of=ident, now=NOW)
    e = exc.value
    assert e.session_id == "s1"
    assert type(e).__name__ == "InvalidSessionError"
    msg = str(e)
    assert msg.startswith(f'[InvalidSessionError] stored session "s1" is unreadable: {reason}'), msg
    assert "Repair or delete the row" in msg


def test_v4_missing_v_key_is_legacy_path():
    blob = v4(v=...)
    s = migrate_session(blob, session_id="s1", flow_id_of=ident, now=NOW)
    assert s.version == 0 and s.runs == []


def test_v4_accepts_whole_float_version():
    assert migrate_session(v4(version=3.0), session_id="s1", flow_id_of=ident).version == 3


def test_session_from_json_same_checks():
    with pytest.raises(InvalidSessionError):
        Session.from_json(v4(v=3), "s1")
    assert Session.from_json(v4(), "s1").version == 3
