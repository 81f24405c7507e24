"""The conversation page: transcript, data, runs, outcomes, wakes, the raw blob; broken blobs."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry

from falai_django import handoff
from falai_django.models import Conversation, HistoryItem

from . import agents, senders
from .conftest import admin_client, operation_url, page_url, say

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(run_on_commit) -> str:
    """Asked, answered (fields land, the run waits an hour), then a human replied."""
    run_on_commit(say, "5511", "oi", "m1")
    run_on_commit(say, "5511", "meu nome é Maria da empresa Acme", "m2")
    run_on_commit(handoff.reply_as_human, "5511", "Oi Maria, aqui é a Alice.", author="alice")
    return "5511"


def section(html: str, section_id: str) -> str:
    start = html.index(f'id="{section_id}"')
    end = html.find("</section>", start)
    return html[start:end]


def test_transcript_is_a_chat_with_who_when_and_send_status(operator, conversation):
    response = admin_client(operator).get(page_url(conversation))
    transcript = response.context["falai"]["transcript"]

    said_by_ana = senders.texts(conversation)[1:-1]  # what the assistant said on the second turn
    assert [(m["who"], m["text"]) for m in transcript] == [
        ("customer", "oi"),
        ("assistant", agents.QUESTION),
        ("customer", "meu nome é Maria da empresa Acme"),
        *[("assistant", text) for text in said_by_ana],
        ("human", "Oi Maria, aqui é a Alice."),
    ]
    assert [m["send_status"] for m in transcript if m["who"] != "customer"] == ["sent"] * (2 + len(said_by_ana))
    assert transcript[-1]["author"] == "alice"
    html = section(response.content.decode(), "transcript")
    assert html.index("Customer") < html.index("Assistant") < html.index("Human agent")
    assert "falai-send-sent" in html and "<time datetime=" in html


def test_failed_send_is_shown(operator, conversation):
    HistoryItem.objects.filter(kind="human").update(send_status="failed", send_error="ConnectionError: down")

    html = section(admin_client(operator).get(page_url(conversation)).content.decode(), "transcript")

    assert 'falai-send-failed" title="ConnectionError: down">failed<' in html


def test_collected_data_and_live_runs(operator, conversation):
    response = admin_client(operator).get(page_url(conversation))
    falai = response.context["falai"]

    assert falai["data"] == [("nome", "Maria"), ("empresa", "Acme")]
    [run] = falai["runs"]
    assert (run["flow"], run["step"], run["status"]) == ("triagem", "espera", "waiting")
    assert run["waiting_until"].isoformat() == "2026-09-20T11:00:00+00:00"
    stored = Conversation.objects.get(pk=conversation).blob["runs"][0]
    assert run["asked"] == sorted(stored["asked"].items()) and stored["asked"]
    assert run["visits"] == [("espera", 1), ("quem", 1)]
    runs = section(response.content.decode(), "runs")
    assert "triagem" in runs and "espera" in runs and "2026-09-20 11:00:00" in runs
    assert "espera: 1, quem: 1" in runs and ", ".join(f"{k}: {v}" for k, v in run["asked"]) in runs


def test_outcomes_timeline_is_newest_first_from_the_run_log(operator, conversation):
    outcomes = admin_client(operator).get(page_url(conversation)).context["falai"]["outcomes"]

    assert [(o["step"], o["kind"], o["status"]) for o in outcomes] == [
        ("", "idle", "ok"),  # turn 2, last line: the idle reply
        ("espera", "wait", "waiting"),  # turn 2
        ("quem", "collect", "ok"),  # turn 2, first line
        ("quem", "collect", "ok"),  # turn 1
    ]
    assert outcomes[1]["until"].isoformat() == "2026-09-20T11:00:00+00:00"
    assert [o["source"] for o in outcomes] == ["message:m2"] * 3 + ["message:m1"]


def test_outcome_columns_code_message_detail_next(operator, run_on_commit):
    run_on_commit(say, "s1", "oi", "m1")
    handoff.take_over("s1", "alice", understand=True)  # fields land, so the run reaches its wait
    run_on_commit(say, "s1", "meu nome é Maria da empresa Acme", "m2")
    agents.clock().advance("1h")
    key = Conversation.objects.get(pk="s1").blob["runs"][0]["waiting"]["key"]
    handoff.fire_wake_now("s1", key)  # silenced: the fresh say step ends the run

    response = admin_client(operator).get(page_url("s1"))

    newest = response.context["falai"]["outcomes"][0]
    assert (newest["code"], newest["detail"]) == ("silenced", "human: alice")
    assert newest["message"]
    html = section(response.content.decode(), "outcomes")
    assert "<code>silenced</code>" in html and "human: alice" in html


def test_pending_wakes_are_listed_with_fire_buttons(operator, conversation):
    response = admin_client(operator).get(page_url(conversation))
    wakes = response.context["falai"]["wakes"]

    assert [w["key"] for w in wakes] == ["triagem#m1:espera:1789902000000", "silence:retoma:5511:1789898400000"]
    assert all(w["computed"] for w in wakes)
    html = section(response.content.decode(), "wakes")
    assert html.count('value="Fire now"') == 2
    assert 'id="requeue-form"' in html


def test_raw_blob_is_pretty_and_read_only(operator, conversation):
    response = admin_client(operator).get(page_url(conversation))
    html = response.content.decode()

    blob = Conversation.objects.get(pk=conversation).blob
    assert response.context["falai"]["raw"] == json.dumps(blob, indent=2, ensure_ascii=False)
    assert "&quot;lastAssistantAt&quot;" in section(html, "raw")
    assert 'name="blob"' not in html and "<textarea name=\"blob\"" not in html
    assert admin_client(operator).post(page_url(conversation), {"blob": "{}"}).status_code == 403
    assert Conversation.objects.get(pk=conversation).blob == blob


@pytest.mark.parametrize("bad", [
    {"id": "broken", "v": 4, "version": 1, "runs": "not a list"},
    {"currentFlow": None, "mystery": True},
    "{not json",
], ids=["bad-runs", "unrecognisable", "not-json"])
def test_invalid_blob_is_shown_as_invalid_and_never_fixed(operator, run_on_commit, bad):
    run_on_commit(say, "broken", "oi", "m1")
    Conversation.objects.filter(pk="broken").update(blob=bad)
    client = admin_client(operator)

    response = client.get(page_url("broken"))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="invalid-blob"' in html and "InvalidSessionError" in html
    stored = Conversation.objects.get(pk="broken").blob  # jsonb on PostgreSQL: its own key order
    assert stored == bad
    assert json.dumps(stored, indent=2).replace('"', "&quot;") in section(html, "raw")
    assert 'id="take-over-form"' not in html and 'id="reply-form"' not in html
    # Operations posted anyway are refused, nothing is written and nothing is logged.
    for operation, data in (("take-over", {}), ("reply", {"text": "oi"}), ("give-back", {}),
                            ("silence", {"reason": "x"}), ("requeue-wakes", {})):
        followed = client.post(operation_url("broken", operation), data, follow=True)
        assert "session blob is invalid" in followed.content.decode()
    row = Conversation.objects.get(pk="broken")
    assert (row.blob, row.version) == (bad, 1)
    assert not LogEntry.objects.filter(object_id="broken").exists()
    assert not HistoryItem.objects.filter(conversation_id="broken", kind="human").exists()
    assert senders.texts("broken") == [agents.QUESTION]


def test_invalid_blob_row_still_lists(operator, run_on_commit):
    run_on_commit(say, "broken", "oi", "m1")
    Conversation.objects.filter(pk="broken").update(blob=["not", "a", "session"])

    response = admin_client(operator).get("/admin/falai_django/conversation/")

    assert response.status_code == 200
    assert [row.pk for row in response.context["cl"].result_list] == ["broken"]
