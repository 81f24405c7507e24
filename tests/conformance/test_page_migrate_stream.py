"""The page's "Sessions from before v4" and "Streaming" sections. From the page, README and
engine-persistence-llm.md §2 and §4.1.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from falai_django import InvalidSessionError, MemoryStore, PostgresStore, Session, migrate_session
from falai_django.testing import fake_clock, mock_provider

from .page_support import Host, build_ana

SID = "5511999990000"
T0 = "2026-09-21T10:00:00.000Z"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-blobs"


def read_row(session_id: str, blob) -> Session:
    """The page's readRow()."""
    return migrate_session(blob, session_id=session_id, flow_id_of=lambda id: id)


LEGACY_ANA = {
    "id": "session_old_1",
    "currentFlow": {"id": "triagem", "title": "Triagem", "enteredAt": "2026-09-01T13:05:12.000Z"},
    "currentStep": {"id": "porte", "enteredAt": "2026-09-01T13:07:40.000Z"},
    "data": {"nome": "Mariana", "empresa": "Padaria Estrela"},
    "flowHistory": [
        {"flowId": "boas_vindas", "enteredAt": "2026-09-01T13:04:50.000Z", "exitedAt": "2026-09-01T13:05:12.000Z",
         "completed": True},
        {"flowId": "triagem", "enteredAt": "2026-09-01T13:05:12.000Z", "completed": False},
    ],
    "signals": {"triggers": {"pediu_preco": {"firstTriggeredAt": "2026-09-01T13:06:00.000Z",
                                             "lastTriggeredAt": "2026-09-01T13:06:30.000Z", "count": 2}}},
    "metadata": {"channel": "whatsapp"},
    "version": 7,
}


def test_a_3x_blob_becomes_one_run_at_the_same_step_plus_claims_version_0():
    session = read_row(SID, copy.deepcopy(LEGACY_ANA))
    assert isinstance(session, Session)
    assert session.id == SID and session.version == 0 and session.v == 4
    assert len(session.runs) == 1
    run = session.runs[0]
    assert (run.id, run.flow_id, run.step_id, run.status) == ("triagem#legacy", "triagem", "porte", "asking")
    assert run.anchor == SID and run.dedupe_key == f"triagem:{SID}:"
    assert run.started_at == "2026-09-01T13:05:12.000Z"
    blob = session.to_json()
    assert blob["claims"] == {
        f"boas_vindas:{SID}:": {"at": "2026-09-01T13:05:12.000Z"},
        f"pediu_preco:{SID}:": {"at": "2026-09-01T13:06:30.000Z"},
        f"triagem:{SID}:": {"at": "2026-09-01T13:05:12.000Z"},
    }
    assert list(blob["claims"]) == [f"boas_vindas:{SID}:", f"pediu_preco:{SID}:", f"triagem:{SID}:"]
    assert blob["inputs"] == [] and blob["data"] == LEGACY_ANA["data"]
    assert "currentFlow" not in blob and "signals" not in blob


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_the_migrated_session_is_inserted_with_save_zero_and_ana_continues(backend, request):
    if backend == "memory":
        store = MemoryStore()
    else:
        store = PostgresStore(client=request.getfixturevalue("pg_conn"),
                              tables={"sessions": request.getfixturevalue("pg_table")})
        store.initialize()
    session = read_row(SID, copy.deepcopy(LEGACY_ANA))
    saved = store.save(session, 0)
    assert saved.version == 1
    loaded = store.load(SID)
    assert loaded.version == 1 and loaded.runs[0].step_id == "porte"
    provider = mock_provider(understand=[lambda _r: {"fields": {"tamanho": "1-10"}}],
                             speak=[lambda _r: {"message": "Anotado! Tudo certo?"}])
    host = Host(build_ana(provider, fake_clock(T0)), store)
    r = host.handle(SID, message="somos 8 pessoas", id="wamid.new")
    assert r.changed is True
    assert store.load(SID).data["tamanho"] == "1-10"
    assert store.load(SID).version == 2
    # the once-claim keeps triagem from starting over
    assert [run.id for run in store.load(SID).runs] == ["triagem#legacy"]


def test_the_spec_fixture_blobs_migrate():
    mid = json.loads((FIXTURES / "prospectar-midflow.json").read_text())
    s = migrate_session(mid, session_id="sid", flow_id_of=lambda id: id, now="2026-09-21T12:00:00.000Z")
    assert s.version == 0 and [r.id for r in s.runs] == ["qualificacao#legacy"]
    v4 = json.loads((FIXTURES / "v4.json").read_text())
    called = []
    same = migrate_session(v4, session_id="conv_v4", flow_id_of=lambda id: called.append(id) or "never-called")
    assert same.to_json() == v4 and called == []


def test_a_v4_blob_passes_through_checked():
    blob = {"id": SID, "v": 4, "version": 3, "data": {}, "runs": [], "claims": {}, "inputs": [], "metadata": {}}
    assert read_row(SID, blob).version == 3
    with pytest.raises(InvalidSessionError):
        read_row("someone-else", blob)


@pytest.mark.parametrize(
    "blob",
    [None, "texto", [], {}, 42, {"data": "nope"}, {"v": 3, "id": SID}, {"currentFlow": 5, "data": {}}],
    ids=["null", "string", "list", "empty", "number", "data-string", "v3", "flow-number"],
)
def test_anything_else_raises_invalid_session_error(blob):
    with pytest.raises(InvalidSessionError) as info:
        read_row(SID, blob)
    assert str(info.value).startswith(f'[InvalidSessionError] stored session "{SID}" is unreadable: ')
    assert "Repair or delete the row" in str(info.value)


def test_migrated_sessions_waiting_on_wakes_can_be_rebuilt_with_pending_wakes():
    clock = fake_clock(T0)
    agent = build_ana(mock_provider(), clock)
    session = read_row(SID, copy.deepcopy(LEGACY_ANA))
    assert agent.pending_wakes(session=session, context=None) == []


# --------------------------------------------------------------------------- streaming


def test_turn_stream_yields_deltas_then_one_done_with_the_same_result():
    reply = {"message": "Oi! Com quem eu falo, e de qual empresa?", "nome": None, "empresa": None}
    provider = mock_provider(understand=[{}], speak=[reply])
    agent = build_ana(provider, fake_clock(T0))
    chunks = list(agent.turn_stream(session_id=SID, message="oi, quero saber como funciona", id="wamid.HBgL",
                                    session=None, history=[]))
    assert chunks, "the stream yielded nothing"
    *deltas, last = chunks
    assert last.get("done") is True and "result" in last
    assert set(last) == {"done", "result"}
    assert all(set(c) == {"delta"} and isinstance(c["delta"], str) and c["delta"] for c in deltas)
    assert len(deltas) >= 2  # the mock streams in small chunks
    assert "".join(c["delta"] for c in deltas) == reply["message"]
    result = last["result"]
    assert [m.text for m in result.messages] == [reply["message"]]
    assert result.changed is True and result.session.version == 0
    # the same loop applies: save with the loaded version
    store = MemoryStore()
    assert store.save(result.session, 0).version == 1


def test_turn_stream_matches_turn():
    def make():
        return build_ana(mock_provider(understand=[{}], speak=[{"message": "Oi! Com quem eu falo?"}]), fake_clock(T0))

    r = make().turn(session_id=SID, message="oi", id="m1", session=None, history=[])
    streamed = list(make().turn_stream(session_id=SID, message="oi", id="m1", session=None, history=[]))[-1]["result"]
    assert streamed.session.to_json() == r.session.to_json()
    assert [(m.text, m.key) for m in streamed.messages] == [(m.text, m.key) for m in r.messages]
    assert streamed.llm_calls == r.llm_calls


def test_turn_stream_with_nobody_speaking_yields_only_done():
    agent = build_ana(mock_provider(), fake_clock(T0))
    store = MemoryStore()
    host = Host(agent, store)
    host.agent = build_ana(mock_provider(understand=[{}], speak=[{"message": "Oi!"}]), fake_clock(T0))
    host.handle(SID, message="oi", id="m1")
    chunks = list(agent.turn_stream(session_id=SID, message="oi", id="m1", session=store.load(SID), history=[]))
    assert len(chunks) == 1 and chunks[0]["done"] is True
    assert chunks[0]["result"].changed is False


def test_turn_stream_of_a_silenced_input_yields_only_done():
    agent = build_ana(mock_provider(), fake_clock(T0))
    chunks = list(agent.turn_stream(session_id=SID, message="oi", id="m1", session=None, history=[],
                                    silenced="humano"))
    assert len(chunks) == 1 and chunks[0]["done"] is True
