"""`GET /falai/sessions`: the admin's filters, DRF pagination, a 400 naming what is allowed."""

from __future__ import annotations

import pytest
from demo import support
from rest_framework.test import APIClient

from falai_django import handoff, host

pytestmark = pytest.mark.django_db(transaction=True)


def _conversations():
    """a: asking (triagem, quem); b: asking then taken over by maria; c: done (idle)."""
    host.handle("a", {"message": "oi", "id": "a1"})
    support.clock().advance("1m")
    host.handle("b", {"message": "oi", "id": "b1"})
    host.handle("b", {"message": "Zefa", "id": "b2"})
    handoff.take_over("b", "maria")
    support.clock().advance("1m")
    for i, text in enumerate(support.TRIAGE):
        host.handle("c", {"message": text, "id": f"c{i}"})


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_lists_every_conversation_most_recent_customer_message_first(api):
    _conversations()
    body = api.get("/falai/sessions").json()
    assert body["count"] == 3 and body["next"] is None
    assert [r["id"] for r in body["results"]] == ["c", "b", "a"]
    rows = {r["id"]: r for r in body["results"]}
    assert rows["a"]["status"] == "asking" and rows["a"]["flow"] == "triagem" and rows["a"]["step"] == "quem"
    assert rows["b"]["status"] == "silenced" and rows["b"]["owner"] == "maria"
    assert rows["c"]["status"] == "idle" and rows["c"]["flow"] is None
    assert rows["a"]["last_user_at"].startswith("2026-09-20T10:00")  # the API keeps ISO 8601
    assert "blob" not in rows["a"]


def test_filters_as_in_the_admin(api):
    _conversations()
    assert ids(api.get("/falai/sessions", {"status": "asking"})) == ["a"]
    assert ids(api.get("/falai/sessions", {"status": "silenced"})) == ["b"]
    assert ids(api.get("/falai/sessions", {"status": "idle"})) == ["c"]
    assert ids(api.get("/falai/sessions", {"flow": "triagem"})) == ["b", "a"]
    assert ids(api.get("/falai/sessions", {"owner": "maria"})) == ["b"]
    assert ids(api.get("/falai/sessions", {"silenced": "true"})) == ["b"]
    assert ids(api.get("/falai/sessions", {"silenced": "false"})) == ["c", "a"]
    assert ids(api.get("/falai/sessions", {"q": "zefa"})) == ["b"]  # words of the transcript
    assert ids(api.get("/falai/sessions", {"q": "Acme"})) == ["c"]  # a collected value
    assert ids(api.get("/falai/sessions", {"q": "a"}))[-1] == "a"  # the id itself
    assert ids(api.get("/falai/sessions", {"status": "asking", "flow": "lembrete"})) == []


def test_pages(api):
    _conversations()
    first = api.get("/falai/sessions", {"page_size": 2}).json()
    assert first["count"] == 3 and [r["id"] for r in first["results"]] == ["c", "b"]
    assert "page=2" in first["next"] and first["previous"] is None
    second = api.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == ["a"] and second["next"] is None
    missing = api.get("/falai/sessions", {"page": 9})
    assert missing.status_code == 404 and missing.json()["detail"]


def test_a_bad_filter_is_a_400_naming_what_is_allowed(api):
    response = api.get("/falai/sessions", {"status": "sleeping"})
    assert response.status_code == 400
    assert response.json()["status"] == ["Unknown status 'sleeping'. Known statuses: asking, idle, silenced, waiting."]
    response = api.get("/falai/sessions", {"flow": "onboarding"})
    assert response.status_code == 400
    assert "Unknown flow 'onboarding'. Known flows: agenda, lembrete, triagem." in response.json()["flow"]


def test_anonymous_and_unpermitted_callers_are_refused(api, django_user_model):
    assert APIClient().get("/falai/sessions").status_code in (401, 403)
    nobody = APIClient()
    nobody.force_authenticate(django_user_model.objects.create_user("nobody", password="pw"))
    assert nobody.get("/falai/sessions").status_code == 403
