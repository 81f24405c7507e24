"""migrate_session: the three fixture blobs, the legacy rules and the error cases (persistence note §2)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from falai_django.engine import keys
from falai_django.engine.errors import InvalidSessionError
from falai_django.engine.migrate import migrate_session
from falai_django.stores.memory import MemoryStore

NOW = "2026-09-21T12:00:00.000Z"


def identity(old: str) -> str:
    return old


def load(legacy_blobs_dir, name: str) -> dict:
    return json.loads((legacy_blobs_dir / f"{name}.json").read_text())


def test_prospectar_midflow_becomes_one_asking_run_and_two_claims(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "prospectar-midflow")
    sid = "session_1756731890123_k3j9x2"
    session = migrate_session(blob, session_id=sid, flow_id_of=identity, now=NOW)
    assert session.to_json() == {
        "id": sid, "v": 4, "version": 0,
        "data": blob["data"],
        "runs": [{
            "id": "qualificacao#legacy", "flowId": "qualificacao", "anchor": sid,
            "dedupeKey": f"qualificacao:{sid}:", "stepId": "ask_budget", "status": "asking",
            "trigger": {"kind": "message", "key": "legacy"}, "hop": 0,
            "startedAt": "2026-09-01T13:05:12.000Z", "asked": {}, "visits": {}, "outcomes": [],
        }],
        "claims": {
            f"boas_vindas:{sid}:": {"at": "2026-09-01T13:05:12.000Z"},
            f"qualificacao:{sid}:": {"at": "2026-09-01T13:05:12.000Z"},
        },
        "inputs": [],
        "metadata": blob["metadata"],
    }
    assert list(session.claims) == [f"boas_vindas:{sid}:", f"qualificacao:{sid}:"]
    assert session.data is blob["data"]  # neither copied nor coerced
    assert "history" not in session.to_json()


def test_a_migrated_session_saves_as_an_insert_and_loads_at_version_1(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "prospectar-midflow")
    sid = blob["id"]
    migrated = migrate_session(blob, session_id=sid, flow_id_of=identity, now=NOW)
    store = MemoryStore()
    store.save(migrated, migrated.version)
    assert store.load(sid).to_json() == dict(migrated.to_json(), version=1)


def test_ilojista_signals_become_claims_at_their_last_firing(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "ilojista-signals")
    sid = "session_1756900011000_p8q1zz"
    session = migrate_session(blob, session_id=sid, flow_id_of=identity, now=NOW)
    assert session.to_json() == {
        "id": sid, "v": 4, "version": 0,
        "data": blob["data"],
        "runs": [{
            "id": "atendimento_pedido#legacy", "flowId": "atendimento_pedido", "anchor": sid,
            "dedupeKey": f"atendimento_pedido:{sid}:", "stepId": "confirmar_endereco", "status": "asking",
            "trigger": {"kind": "message", "key": "legacy"}, "hop": 0,
            "startedAt": "2026-09-03T15:20:05.000Z", "asked": {}, "visits": {}, "outcomes": [],
        }],
        "claims": {
            f"not_interested_detection:{sid}:": {"at": "2026-09-03T15:21:10.000Z"},
            f"pediu_preco:{sid}:": {"at": "2026-09-03T15:22:02.000Z"},
            f"bot_detected:{sid}:": {"at": "2026-09-03T15:23:15.000Z"},
            f"lembrete_carrinho:{sid}:": {"at": "2026-09-03T15:24:00.000Z"},
            f"atendimento_pedido:{sid}:": {"at": "2026-09-03T15:20:05.000Z"},
        },
        "inputs": [],
        "metadata": blob["metadata"],
    }
    assert session.data["endereco"] is None
    text = session.to_json_text()
    assert "pendingDirective" not in text and "pagamento" not in text


def test_a_renaming_flow_id_of_renames_runs_and_claims(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "ilojista-signals")
    sid = blob["id"]
    renames = {"pediu_preco": "preco", "atendimento_pedido": "pedido"}
    session = migrate_session(blob, session_id=sid, flow_id_of=lambda old: renames.get(old, old), now=NOW)
    (run,) = session.runs
    assert (run.id, run.flow_id, run.dedupe_key) == ("pedido#legacy", "pedido", f"pedido:{sid}:")
    assert sorted(session.claims) == [f"{name}:{sid}:" for name in
                                      ("bot_detected", "lembrete_carrinho", "not_interested_detection", "pedido",
                                       "preco")]


def test_migrated_claims_are_the_keys_a_once_flow_start_checks(legacy_blobs_dir):
    # a 3.x signal that fired must block its v4 flow: the claim is the flow's `once` dedupe key
    blob = load(legacy_blobs_dir, "ilojista-signals")
    sid = blob["id"]
    session = migrate_session(blob, session_id=sid, flow_id_of=identity, now=NOW)
    for flow in ("not_interested_detection", "pediu_preco", "bot_detected", "lembrete_carrinho"):
        assert keys.dedupe_key(flow, sid, "") in session.claims
    assert session.runs[0].dedupe_key in session.claims  # invariant I5: no run without its claim


def test_the_v4_fixture_passes_through_checked(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "v4")
    calls = []
    session = migrate_session(blob, session_id="conv_v4", flow_id_of=lambda old: calls.append(old) or "never-called")
    assert session.to_json() == blob
    assert calls == []
    assert session.version == 3


def test_v4_bookkeeping_keys_are_dropped(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "v4")
    blob["createdAt"] = "2026-09-20T10:00:00.000Z"
    blob["updatedAt"] = "2026-09-20T10:00:00.000Z"
    session = migrate_session(blob, session_id="conv_v4", flow_id_of=identity)
    assert sorted(session.to_json()) == ["claims", "data", "id", "inputs", "lastAssistantAt", "lastUserAt",
                                         "metadata", "runs", "v", "version"]


def test_datetime_instances_become_iso_text():
    local = timezone(timedelta(hours=-3))
    state = {
        "data": {},
        "currentFlow": {"id": "f", "enteredAt": datetime(2026, 9, 1, 10, 0, 0, 250000, tzinfo=local)},
        "flowHistory": [{"flowId": "g", "completed": True, "exitedAt": datetime(2026, 9, 1, 9, 0, tzinfo=UTC)}],
        "signals": {"triggers": {"sig": {"firstTriggeredAt": datetime(2026, 8, 1, tzinfo=UTC)}}},
        "metadata": {"createdAt": datetime(2026, 9, 1, tzinfo=UTC),
                     "nested": {"list": [datetime(2026, 9, 2, 1, 2, 3, tzinfo=UTC), "keep", 7]}},
    }
    session = migrate_session(state, session_id="s1", flow_id_of=identity, now=NOW)
    assert session.runs[0].started_at == "2026-09-01T13:00:00.250Z"
    assert session.claims == {"g:s1:": {"at": "2026-09-01T09:00:00.000Z"},
                              "sig:s1:": {"at": "2026-08-01T00:00:00.000Z"},
                              "f:s1:": {"at": "2026-09-01T13:00:00.250Z"}}
    assert session.metadata == {"createdAt": "2026-09-01T00:00:00.000Z",
                                "nested": {"list": ["2026-09-02T01:02:03.000Z", "keep", 7]}}
    text = session.to_json_text()
    assert json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) == text


def test_epoch_ms_and_unparsable_dates_fall_back():
    state = {"data": {}, "flowHistory": [
        {"flowId": "a", "completed": True, "exitedAt": 1790244000000},
        {"flowId": "b", "completed": True, "exitedAt": "2026-13-45T99:00:00Z", "enteredAt": "2026-09-01T10:00:00Z"},
        {"flowId": "c", "completed": True, "exitedAt": "yesterday"},
        {"flowId": "d", "completed": False, "exitedAt": "2026-09-01T10:00:00Z"},
    ]}
    session = migrate_session(state, session_id="s1", flow_id_of=identity, now=NOW)
    assert session.claims == {"a:s1:": {"at": "2026-09-24T10:00:00.000Z"},
                              "b:s1:": {"at": "2026-09-01T10:00:00.000Z"},
                              "c:s1:": {"at": NOW}}


def test_signals_without_triggers_and_null_cursors_are_empty():
    session = migrate_session({"data": {}, "signals": {"triggers": None}, "currentFlow": None, "currentStep": None},
                              session_id="s1", flow_id_of=identity, now=NOW)
    assert (session.runs, session.claims) == ([], {})


def test_id_and_data_alone_give_the_empty_v4_session():
    session = migrate_session({"id": "old", "data": {}}, session_id="s1", flow_id_of=identity, now=NOW)
    assert session.to_json() == {"id": "s1", "v": 4, "version": 0, "data": {}, "runs": [], "claims": {},
                                 "inputs": [], "metadata": {}}


def test_a_flow_without_a_step_is_a_running_run_stamped_now():
    session = migrate_session({"data": {}, "currentFlow": {"id": "f", "title": "F"}}, session_id="s1",
                              flow_id_of=identity, now=NOW)
    (run,) = session.runs
    assert (run.status, run.step_id, run.started_at) == ("running", None, NOW)
    assert run.to_json()["stepId"] is None
    assert session.claims == {"f:s1:": {"at": NOW}}


def test_bare_text_cursors_are_ids():
    session = migrate_session({"data": {}, "currentFlow": "f", "currentStep": "s"}, session_id="s1",
                              flow_id_of=identity, now=NOW)
    assert (session.runs[0].flow_id, session.runs[0].step_id, session.runs[0].status) == ("f", "s", "asking")
    assert migrate_session({"data": {}, "currentFlow": ""}, session_id="s1", flow_id_of=identity).runs == []


def test_now_defaults_to_the_wall_clock():
    before = datetime.now(UTC) - timedelta(seconds=1)
    session = migrate_session({"data": {}, "currentFlow": "f"}, session_id="s1", flow_id_of=identity)
    started = datetime.fromisoformat(session.runs[0].started_at)
    assert before <= started <= datetime.now(UTC) + timedelta(seconds=1)


def test_history_is_kept_only_when_present():
    with_history = migrate_session({"data": {}, "history": [{"role": "user", "content": "oi"}]},
                                   session_id="s1", flow_id_of=identity)
    assert with_history.to_json()["history"] == [{"role": "user", "content": "oi"}]
    assert "history" not in migrate_session({"data": {}}, session_id="s1", flow_id_of=identity).to_json()


def test_the_legacy_version_is_not_carried(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "ilojista-signals")
    assert blob["version"] == 41
    assert migrate_session(blob, session_id=blob["id"], flow_id_of=identity).version == 0


def test_the_input_blob_is_not_mutated(legacy_blobs_dir):
    blob = load(legacy_blobs_dir, "ilojista-signals")
    before = copy.deepcopy(blob)
    migrate_session(blob, session_id=blob["id"], flow_id_of=identity, now=NOW)
    assert blob == before


# ---------------------------------------------------------------------------------------------
# §2.3: everything that must raise InvalidSessionError
# ---------------------------------------------------------------------------------------------


def v4_with(legacy_blobs_dir, mutate) -> dict:
    blob = load(legacy_blobs_dir, "v4")
    blob["id"] = "s1"
    mutate(blob)
    return blob


LEGACY_CASES = [
    (None, "expected an object, got null"),
    ("a string", 'expected an object, got "a string"'),
    ([], "expected an object, got a list"),
    ({}, "data is missing, expected an object; not a 3.x session either"),
    ({"data": "nope"}, 'data is "nope", expected an object; not a 3.x session either'),
    ({"data": []}, "data is a list, expected an object; not a 3.x session either"),
    ({"data": {}, "currentFlow": 7}, "currentFlow is 7, expected { id } or text"),
    ({"data": {}, "currentFlow": {"title": "F"}}, "currentFlow is an object, expected { id } or text"),
    ({"data": {}, "currentStep": 7}, "currentStep is 7, expected { id } or text"),
    ({"data": {}, "flowHistory": [{"completed": True}]}, "flowHistory[0] is not a flow entry"),
    ({"data": {}, "signals": {"triggers": []}}, "signals.triggers is a list, expected an object"),
    ({"data": {}, "signals": {"triggers": {"x": 1}}}, "signals.triggers.x is not a trigger state"),
    ({"data": {}, "metadata": "x"}, 'metadata is "x", expected an object'),
    ({"data": {}, "history": {}}, "history is an object, expected a list"),
    ({"data": {}, "history": None}, "history is null, expected a list"),
    ({"data": {}, "metadata": None}, "metadata is null, expected an object"),
    ({"data": {}, "flowHistory": {}}, "flowHistory is an object, expected a list"),
    ({"data": {}, "signals": []}, "signals is a list, expected an object"),
    ({"data": {}, "v": 3}, "v is 3, expected 4"),
]


@pytest.mark.parametrize(("blob", "reason"), LEGACY_CASES)
def test_unreadable_blobs_raise(blob, reason):
    with pytest.raises(InvalidSessionError) as caught:
        migrate_session(blob, session_id="s1", flow_id_of=identity)
    assert caught.value.session_id == "s1"
    assert caught.value.reason == reason
    assert "Repair or delete the row" in str(caught.value)


V4_CASES = [
    (lambda b: b.update(id="other"), 'id is "other", expected "s1"'),
    (lambda b: b.update(version="3"), 'version is "3", expected a whole number'),
    (lambda b: b.update(runs={}), "runs is an object, expected a list"),
    (lambda b: b["claims"].update({"x": {}}), "claims is not a map of { at }"),
    (lambda b: b["inputs"].append(5), "inputs is not a list of ids"),
    (lambda b: b.pop("metadata"), "metadata is missing, expected an object"),
    (lambda b: b.update(history={}), "history is an object, expected a list"),
    (lambda b: b["runs"][0].update(status="sleeping"), 'runs[0].status is "sleeping"'),
    (lambda b: b["runs"][0].pop("trigger"), "runs[0].trigger needs kind and key"),
    (lambda b: b["runs"][0]["trigger"].pop("key"), "runs[0].trigger needs kind and key"),
    (lambda b: b["runs"][0].update(hop="0"), 'runs[0].hop is "0", expected a whole number'),
]


@pytest.mark.parametrize(("mutate", "reason"), V4_CASES)
def test_malformed_v4_blobs_raise(legacy_blobs_dir, mutate, reason):
    with pytest.raises(InvalidSessionError) as caught:
        migrate_session(v4_with(legacy_blobs_dir, mutate), session_id="s1", flow_id_of=identity)
    assert caught.value.session_id == "s1"
    assert caught.value.reason == reason


def test_the_error_message_format():
    with pytest.raises(InvalidSessionError) as caught:
        migrate_session({"data": "nope"}, session_id="s1", flow_id_of=identity)
    assert str(caught.value).startswith('[InvalidSessionError] stored session "s1" is unreadable: data is "nope"')
    assert type(caught.value).__name__ == "InvalidSessionError"
