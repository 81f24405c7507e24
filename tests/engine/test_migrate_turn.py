"""A migrated session through a real turn: 3.x signals and completed flows never fire twice."""

from __future__ import annotations

import json

import pytest

from falai_django import Session, falai, migrate_session
from falai_django.testing import fake_clock, mock_provider

NOW = "2026-09-21T12:00:00.000Z"


def agent_with(flow_id: str):
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome."}})
    flow = f.flow({"id": flow_id, "name": flow_id, "description": "o cliente pede isso",
                   "on": [{"message": []}], "steps": [{"id": "a", "say": f"fluxo {flow_id}"}]})
    return f.agent(name="Ana", flows=[flow], clock=fake_clock(NOW), idle="silent",
                   provider=mock_provider(understand=[{"flows": {flow_id: 95}}], speak=[]))


def without_cursor(blob: dict) -> dict:
    """The fixture with no flow in progress, so nothing holds the floor."""
    return {k: v for k, v in blob.items() if k not in ("currentFlow", "currentStep", "pendingDirective")}


@pytest.mark.parametrize(("fixture", "flow_id"), [
    ("ilojista-signals", "pediu_preco"),          # a 3.x signal that fired
    ("ilojista-signals", "lembrete_carrinho"),    # a cooldown signal, claimed at its last firing
    ("prospectar-midflow", "boas_vindas"),         # a 3.x flow that completed
])
def test_a_migrated_claim_stops_the_flow_starting_again(legacy_blobs_dir, fixture, flow_id):
    blob = without_cursor(json.loads((legacy_blobs_dir / f"{fixture}.json").read_text()))
    sid = blob["id"]
    migrated = migrate_session(blob, session_id=sid, flow_id_of=lambda old: old, now=NOW)

    again = agent_with(flow_id).turn(session_id=sid, message="de novo", id="m9", session=migrated, history=[])
    assert again.started == []
    assert [m.text for m in again.messages] == []

    # the same message on a session without the claim does start it
    fresh = agent_with(flow_id).turn(session_id=sid, message="de novo", id="m9", session=Session.fresh(sid),
                                     history=[])
    assert [s.flow_id for s in fresh.started] == [flow_id]
    assert [m.text for m in fresh.messages] == [f"fluxo {flow_id}"]
