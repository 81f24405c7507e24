"""The playground's views through Django's test client (the browser test drives the page)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escapejs

from falai_django.providers.offline import MARK

from .support import THANKS, TRIAGE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client


def sse_events(response) -> list[tuple[str, dict]]:
    text = b"".join(response.streaming_content).decode()
    events = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_staff_only(client, django_user_model, demo_settings):
    url = reverse("falai:playground")
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith(reverse("admin:login"))
    client.force_login(django_user_model.objects.create_user("pat", password="pw"))
    assert client.get(url).status_code == 302
    assert client.get(reverse("falai:playground-state")).status_code == 302
    assert client.post(reverse("falai:playground-fast-forward")).status_code == 302


def test_staff_without_the_permission_cannot_drive(client, django_user_model, demo_settings):
    client.force_login(django_user_model.objects.create_user("staff", password="pw", is_staff=True))
    page = client.get(reverse("falai:playground"))
    assert page.status_code == 200 and "change conversation" in page.content.decode()
    assert client.post(reverse("falai:playground-fast-forward")).status_code == 403
    assert client.post(reverse("falai:playground-event"), {"event": "demo_agendada"}).status_code == 403


def test_the_page_names_the_provider_and_the_session(admin_client, demo_settings):
    response = admin_client.get(reverse("falai:playground"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Provider: offline" in html
    sid = admin_client.session["falai_playground_session"]
    assert sid in html and escapejs(reverse("falai:message-stream", args=[sid])) in html


def test_stream_a_whole_triage_then_fast_forward(admin_client, demo_settings):
    admin_client.get(reverse("falai:playground"))
    sid = admin_client.session["falai_playground_session"]
    url = reverse("falai:message-stream", args=[sid])
    for i, text in enumerate(TRIAGE):
        events = sse_events(admin_client.post(url, {"text": text, "id": f"m{i}"}, content_type="application/json"))
        kinds = [kind for kind, _ in events]
        assert kinds[-1] == "done" and kinds.count("delta") > 1  # it streams
        done = events[-1][1]
        assert done["status"] == "done"
        assert "".join(e["delta"] for k, e in events if k == "delta") == done["messages"][0]["text"]
    assert done["messages"][0]["text"] == f"{MARK} {THANKS}"
    state = admin_client.get(reverse("falai:playground-state")).json()
    assert state["data"] == {"nome": "João", "empresa": "Acme", "tamanho": "11-50", "confirmado": True}
    assert state["runs"] == []
    assert state["last_turn"]["ended"][0]["reason"] == "end"
    assert [w["key"].split(":")[1] for w in state["wakes"]] == ["lembrete"]

    forwarded = admin_client.post(reverse("falai:playground-fast-forward")).json()
    assert forwarded["fired"] is True
    assert [m["text"] for m in forwarded["messages"]] == [
        "Oi de novo! Um vendedor já está com o seu contato. Ficou alguma dúvida?"]
    assert forwarded["state"]["wakes"] == []
    again = admin_client.post(reverse("falai:playground-fast-forward")).json()
    assert again == {"fired": False, "messages": [], "state": again["state"]}


def test_events_and_a_new_conversation(admin_client, demo_settings):
    admin_client.get(reverse("falai:playground"))
    sid = admin_client.session["falai_playground_session"]
    response = admin_client.post(reverse("falai:playground-event"),
                                 {"event": "demo_agendada", "payload": '{"quando": "amanhã"}'})
    body = response.json()
    assert [m["text"] for m in body["messages"]] == [
        "Prontinho! Sua demonstração ficou marcada para amanhã. Amanhã, neste mesmo horário, te mando um lembrete."]
    assert [r["step"] for r in body["state"]["runs"]] == ["vespera"]
    assert any(w["key"].startswith("agenda#") for w in body["state"]["wakes"])
    assert admin_client.post(reverse("falai:playground-event"), {"event": "x", "payload": "{"}).status_code == 400
    admin_client.post(reverse("falai:playground-reset"))
    admin_client.get(reverse("falai:playground"))
    assert admin_client.session["falai_playground_session"] != sid
