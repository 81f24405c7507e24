"""Malformed session rows behind the Django host: the API answers a clear 4xx, the admin shows
the row as invalid, and the row is byte-identical afterwards. Never a fresh conversation.
"""

from __future__ import annotations

import pytest
from security import kit

from falai_django import InvalidSessionError, Session, SessionConflictError

from .rows import JSON_ONLY, SID

pytestmark = pytest.mark.django_db(transaction=True)

# Enough variety for the host (every family), without running the whole catalogue through HTTP.
HOST_ROWS = [(n, t) for n, t in JSON_ONLY if n in {
    "json-list", "empty-object", "v-3", "v-5", "v-text", "id-mismatch",
    "data-list", "run-status-bad", "run-status-missing", "claims-list", "run-trigger-keyless",
    "3x-ilojista", "3x-prospectar"}]
IDS = [n for n, _ in HOST_ROWS]

INPUTS = [
    ("messages", {"text": "oi, tudo bem?", "id": "wamid.1"}),
    ("events", {"event": "pago", "key": "pay:1"}),
    ("starts", {"flow": "campanha", "key": "camp:1"}),
]


def operator():
    return kit.token_client("operator", "change_conversation", "view_conversation")


def _no_fresh_conversation(before) -> None:
    from falai_django.models import HistoryItem

    assert kit.raw_row(SID) == before, "the malformed row was rewritten"
    assert not HistoryItem.objects.filter(conversation_id=SID).exists()
    assert kit.sent == []


@pytest.mark.parametrize(("name", "text"), HOST_ROWS, ids=IDS)
def test_an_inbound_message_to_a_malformed_row_is_a_clear_409_and_the_row_is_untouched(name, text):
    kit.put_raw_row(SID, text)
    before = kit.raw_row(SID)
    response = kit.post_json(operator(), kit.api_url(SID, "messages"), {"text": "oi", "id": "wamid.1"})
    assert response.status_code == 409, response.content
    detail = response.json()["detail"]
    assert "[InvalidSessionError]" in detail and SID in detail
    _no_fresh_conversation(before)


@pytest.mark.parametrize(("what", "body"), INPUTS, ids=[w for w, _ in INPUTS])
@pytest.mark.parametrize(("name", "text"), [r for r in HOST_ROWS if r[0] in ("v-3", "3x-ilojista")],
                         ids=["v-3", "3x"])
def test_every_input_kind_and_a_signed_webhook_get_the_same_answer(name, text, what, body):
    from django.test import Client

    kit.put_raw_row(SID, text)
    before = kit.raw_row(SID)
    for response in (kit.post_json(operator(), kit.api_url(SID, what), body),
                     kit.signed_post(Client(), kit.api_url(SID, what), body)):
        assert response.status_code == 409, response.content
        assert "InvalidSessionError" in response.json()["detail"]
    _no_fresh_conversation(before)


def test_a_wake_for_a_malformed_row_changes_nothing():
    from falai_django.models import Wake

    kit.put_raw_row(SID, dict(JSON_ONLY)["v-3"])
    Wake.objects.create(conversation_id=SID, key="triagem#m1:espera:1758448800000",
                        at="2026-09-20T11:00:00Z")
    before = kit.raw_row(SID)
    response = kit.post_json(operator(), kit.api_url(SID, "wakes"), {"key": "triagem#m1:espera:1758448800000"})
    assert response.status_code == 409, response.content
    _no_fresh_conversation(before)


def test_a_row_whose_blob_is_json_null_is_invalid_not_missing():
    """BUG (stores/django.py DjangoStore.load): `values_list("blob").first()` returns None both for
    "no row" and for a row whose blob is JSON null, so the row loads as a missing session, the
    turn starts a fresh one, and every save conflicts (202 "retry", replays until it gives up)
    instead of a clear InvalidSessionError. Fix: select ("version", "blob") and test the row."""
    from falai_django.stores.django import DjangoStore

    kit.put_raw_row(SID, "null")
    before = kit.raw_row(SID)
    with pytest.raises(InvalidSessionError):
        DjangoStore().load(SID)
    response = kit.post_json(operator(), kit.api_url(SID, "messages"), {"text": "oi", "id": "wamid.1"})
    assert response.status_code == 409, response.content
    _no_fresh_conversation(before)


def test_a_double_encoded_blob_is_invalid_not_repaired():
    """BUG (stores/django.py:59-63 read_blob, used by DjangoStore.load): the ORM has already decoded
    the JSON column, yet a `str` value is json-decoded once more, so a row whose blob is a JSON
    *string* holding a session (double-encoded) loads as valid and the next turn rewrites it.
    Every other store refuses that row ("expected an object"). Fix: DjangoStore.load passes the
    decoded value straight to Session.from_json (keep the text branch for raw-SQL callers only)."""
    from falai_django.stores.django import DjangoStore

    kit.put_raw_row(SID, dict(JSON_ONLY)["json-string"])
    before = kit.raw_row(SID)
    with pytest.raises(InvalidSessionError):
        DjangoStore().load(SID)
    response = kit.post_json(operator(), kit.api_url(SID, "messages"), {"text": "oi", "id": "wamid.1"})
    assert response.status_code == 409, response.content
    assert kit.raw_row(SID) == before


def test_the_streaming_endpoint_answers_an_invalid_row_with_a_409_like_every_other_endpoint():
    """The row is read before the first byte, so the refusal is a status, not an in-band event."""
    from falai_django.models import TurnRecord

    kit.put_raw_row(SID, dict(JSON_ONLY)["run-status-bad"])
    before = kit.raw_row(SID)
    response = kit.post_json(operator(), kit.api_url(SID, "messages/stream"), {"text": "oi", "id": "wamid.9"})
    assert response.status_code == 409, response.content
    assert not response.streaming and "InvalidSessionError" in response.json()["detail"]
    assert TurnRecord.objects.get(input_key="wamid.9").status == "failed"  # recorded, as on /messages
    _no_fresh_conversation(before)


@pytest.mark.parametrize("what", ["", "silence", "unsilence"])
def test_state_and_handoff_endpoints_refuse_a_malformed_row(what):
    kit.put_raw_row(SID, dict(JSON_ONLY)["id-mismatch"])
    before = kit.raw_row(SID)
    client = operator()
    if what:
        response = kit.post_json(client, kit.api_url(SID, what), {"reason": "humano"} if what == "silence" else {})
    else:
        response = client.get(kit.api_url(SID))
    assert response.status_code == 409, response.content
    assert "InvalidSessionError" in response.json()["detail"]
    _no_fresh_conversation(before)


@pytest.mark.parametrize(("name", "text"), HOST_ROWS, ids=IDS)
def test_the_django_store_refuses_and_cannot_overwrite_a_malformed_row(name, text):
    from falai_django.stores.django import DjangoStore

    kit.put_raw_row(SID, text)
    before = kit.raw_row(SID)
    store = DjangoStore()
    with pytest.raises(InvalidSessionError) as caught:
        store.load(SID)
    assert caught.value.session_id == SID
    with pytest.raises(SessionConflictError):
        store.save(Session.fresh(SID), 0)
    assert kit.raw_row(SID) == before


def _admin(*perms: str, superuser: bool = False):
    from django.contrib.auth.models import Permission, User

    if superuser:
        user = User.objects.create_superuser("root", "root@example.com", "pw")
    else:
        user = User.objects.create_user("staff", "staff@example.com", "pw", is_staff=True)
        for codename in perms:
            user.user_permissions.add(Permission.objects.get(content_type__app_label="falai_django",
                                                             codename=codename))
    return kit.login_client(user)


@pytest.mark.parametrize(("name", "text"), [r for r in HOST_ROWS if r[0] in ("v-3", "run-status-bad", "json-list")],
                         ids=["v-3", "run-status-bad", "json-list"])
def test_the_admin_shows_the_row_as_invalid_and_leaves_it_alone(name, text):
    from django.contrib.admin.utils import quote

    kit.put_raw_row(SID, text)
    before = kit.raw_row(SID)
    client = _admin(superuser=True)
    page = client.get(f"/admin/falai_django/conversation/{quote(SID)}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="invalid-blob"' in html
    assert "InvalidSessionError" in html
    listing = client.get("/admin/falai_django/conversation/")
    assert listing.status_code == 200 and SID in listing.content.decode()

    for operation, data in (("take-over", {}), ("silence", {"reason": "humano"}), ("give-back", {}),
                            ("reply", {"text": "Olá, aqui é a Maria."}), ("requeue-wakes", {}), ("fire-wake", {"key": "x"})):
        response = client.post(f"/admin/falai_django/conversation/{quote(SID)}/handoff/{operation}/", data)
        assert response.status_code in (302, 404), (operation, response.status_code)
    for action in ("silence_selected", "give_back_selected"):
        response = client.post("/admin/falai_django/conversation/",
                               {"action": action, "_selected_action": [SID], "reason": "humano", "confirm": "yes", "mode": "stop"})
        assert response.status_code in (200, 302)
    _no_fresh_conversation(before)


def test_requeue_wakes_skips_a_malformed_row_and_keeps_going():
    from falai_django import host
    from falai_django.models import Wake

    kit.put_raw_row(SID, dict(JSON_ONLY)["v-5"])
    before = kit.raw_row(SID)
    host.handle("5511000000001", {"message": "oi", "id": "w1"})  # a healthy neighbour
    report = host.requeue_wakes()
    assert report["failed"] == 1 and report["sessions"] == 2
    assert not Wake.objects.filter(conversation_id=SID).exists()
    assert kit.raw_row(SID) == before


def test_a_non_finite_number_in_session_data_saves_as_null_like_every_other_store():
    """BUG (stores/django.py DjangoStore.save: `blob = saved.to_json()` handed to the JSONField):
    an action's `ctx.set({"valor": float("inf")})` (a division by zero upstream of it) puts a
    non-finite float in `data`. Memory/SQLite/PostgreSQL/Redis stores write it as `null`, as
    JavaScript's JSON.stringify does; the Django store hands `Infinity` to the database, which
    refuses it (SQLite: IntegrityError, which the host mistakes for a conflict and replays, re-running
    the actions, until it parks the input; PostgreSQL: DataError, a 500). Fix: save
    `json.loads(saved.to_json_text())`, the same JSON the other stores write."""
    from falai_django import falai, host
    from falai_django.stores.django import DjangoStore
    from falai_django.stores.memory import MemoryStore
    from falai_django.testing import mock_provider

    session = Session.fresh(SID)
    session.data["valor"] = float("inf")
    memory = MemoryStore()
    memory.save(session, 0)
    assert memory.load(SID).data == {"valor": None}
    assert DjangoStore().save(session, 0).version == 1
    assert DjangoStore().load(SID).data == {"valor": None}

    runs = []
    f = falai().fields({"valor": {"type": "number"}})
    kit.reset(f.agent(name="Ana", provider=mock_provider(), flows=[f.flow({
        "id": "conta", "name": "Conta", "on": [{"message": []}],
        "steps": [{"id": "calcula", "do": "calcula"}, {"id": "fim", "say": "Pronto."}]})],
        actions={"calcula": {"parameters": {}, "run": lambda p, ctx: runs.append(ctx.key) or ctx.set(
            {"valor": float("inf")}) or {"ok": True}}}))
    result = host.handle("5511000000002", {"message": "oi", "id": "n1"})
    assert result.status == "done" and result.replays == 0, (result.status, result.replays, result.error)
    assert len(runs) == 1, f"the action ran {len(runs)} times"
