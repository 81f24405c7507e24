"""The terminal chat and the wake lists: no `None`, no raw ISO, no stale wake offered, no django-q
line glued to a reply, and `/wake nokey` says there is no such wake."""

from __future__ import annotations

import io
import logging
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse

from falai_django.host import conversations
from falai_django.models import Wake
from falai_django.playground import display, drive

pytestmark = pytest.mark.django_db(transaction=True)
READABLE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def chat(monkeypatch, lines, *args):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    out, err = io.StringIO(), io.StringIO()
    call_command("falai_chat", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_wake_with_an_unknown_key_says_no_such_wake(demo_settings, monkeypatch):
    out, err = chat(monkeypatch, ["oi", "/wake nokey", "/quit"], "--session", "cli-nokey")
    assert "no such wake: nokey (pending: silence:lembrete:cli-nokey:" in err
    assert "stale" not in out + err


def test_an_unknown_event_is_named_with_the_known_ones(demo_settings, monkeypatch):
    out, err = chat(monkeypatch, ["oi", "/event demo_agendad {}", "/quit"], "--session", "cli-ev")
    assert "no such event: demo_agendad (known: demo_agendada, humano_respondeu)" in err


def test_state_shows_no_none_and_one_time_format(demo_settings, monkeypatch):
    # "oi" then the wake: the nudge's turn has outcome lines without a step; the catch-all none at all
    out, err = chat(monkeypatch, ["oi", "/wake", "/state", "/silence humano", "/state", "/quit"],
                    "--session", "cli-none")
    assert err == ""
    assert "None" not in out
    assert "T10:" not in out and "+00:00" not in out  # no raw ISO for people
    scheduled = re.search(r"\(wake scheduled: \S+ at (.+)\)", out)
    assert scheduled and READABLE.match(scheduled.group(1)), out
    assert "handoff: Silenced (humano) · mode stop" in out


def test_django_q_info_lines_stay_out_of_the_chat(demo_settings, monkeypatch):
    """django-q2 logs every task hand-off at INFO on its console handler: mid-reply, glued to Ana's text."""
    from django_q.conf import Conf

    seen: list[logging.LogRecord] = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record)

    logger = logging.getLogger("django-q")
    handler = Catch()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)  # django-q2's default (Q_CLUSTER["log_level"])
    monkeypatch.setattr(Conf, "SYNC", False)  # the real hand-off: a task row on the ORM broker
    try:
        logger.info("before the chat")  # the console logger speaks at INFO outside the chat
        out, err = chat(monkeypatch, ["oi", "/quit"], "--session", "cli-q")
        logger.warning("a warning still shows")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert "Ana> " in out
    assert [r.getMessage() for r in seen] == ["before the chat", "a warning still shows"]
    assert logger.level == logging.INFO  # given back after the chat


def _stale_wake(sid: str) -> Wake:
    wake = Wake.objects.filter(conversation_id=sid).exclude(state=Wake.State.DONE).first()
    return Wake.objects.create(conversation_id=sid, key=f"silence:lembrete:{sid}:1700000000000", at=wake.at - timedelta(hours=1))


def test_a_stale_wake_is_not_listed_as_pending(demo_settings, admin_client):
    from falai_django import host

    host.handle("5511", {"message": "oi", "id": "m1"})
    stale = _stale_wake("5511")
    live = [w.key for w in conversations.read_conversation("5511").wakes]
    assert stale.key not in live and len(live) == 1
    page = admin_client.get(reverse("admin:falai_django_conversation_change", args=["5511"])).content.decode()
    assert stale.key not in page  # no "Fire now" for it
    assert live[0] in page


def test_one_readable_time_format_in_the_playground_the_admin_and_the_terminal(demo_settings, admin_client,
                                                                               monkeypatch):
    from falai_django import host

    host.handle("5511", {"message": "oi", "id": "m1"})
    [wake] = drive.snapshot("5511")["wakes"]
    assert READABLE.match(wake["at_display"])
    page = admin_client.get(reverse("admin:falai_django_conversation_change", args=["5511"])).content.decode()
    assert wake["at_display"] in page  # the admin's `|date:"DATETIME_FORMAT"` (the demo's: Y-m-d H:i:s)
    out, _ = chat(monkeypatch, ["/state", "/quit"], "--session", "5511")
    assert f"at {wake['at_display']}" in out
    listed = admin_client.get("/falai/sessions").json()["results"][0]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", listed["last_user_at"])  # the API keeps ISO 8601
    assert display.when(None) == "—" and display.when("2026-09-20T10:00:00Z") == "2026-09-20 10:00:00"


def test_the_admin_list_shows_times_in_the_same_format(demo_settings, admin_client):
    from falai_django import host
    from falai_django.models import Session

    host.handle("5511", {"message": "oi", "id": "m1"})
    last_user_at = display.when(Session.objects.get(pk="5511").last_user_at)
    assert READABLE.match(last_user_at)
    for language in ("en", "pt-br"):
        page = admin_client.get(reverse("admin:falai_django_conversation_changelist"),
                                headers={"accept-language": language}).content.decode()
        # the text a person reads (a list cell marks the words a date may wrap between)
        assert last_user_at in re.sub(r"<[^>]+>", "", page), language
