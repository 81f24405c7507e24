"""An unknown `event` or `flow` is a 400 naming the known ones (it used to be a 200 doing nothing)."""

from __future__ import annotations

import pytest

from falai_django.models import Session, TurnRecord

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_unknown_event_is_a_400_naming_the_agents_events(api):
    response = api.post("/falai/sessions/s1/events", {"event": "demo_agendad", "key": "e1"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"event": [
        "Unknown event 'demo_agendad'. Known events: demo_agendada, humano_respondeu."]}
    assert not Session.objects.exists() and not TurnRecord.objects.exists()  # nothing written


def test_a_known_event_still_runs(api):
    response = api.post("/falai/sessions/s1/events",
                        {"event": "demo_agendada", "key": "e1", "payload": {"quando": "amanhã"}}, format="json")
    assert response.status_code == 200
    assert response.json()["messages"][0]["text"].startswith("Prontinho!")


def test_an_unknown_flow_is_a_400_naming_the_agents_flows(api):
    response = api.post("/falai/sessions/s1/starts", {"flow": "triage", "key": "k1"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"flow": ["Unknown flow 'triage'. Known flows: agenda, lembrete, triagem."]}
    assert not TurnRecord.objects.exists()


def test_a_known_flow_still_starts(api):
    response = api.post("/falai/sessions/s1/starts", {"flow": "triagem", "key": "k1"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "done"


def test_an_agent_without_events_says_so():
    from falai_django.api.serializers import _known

    assert _known("event", []) == "This agent declares no events."
