"""Races on PostgreSQL: a message, a wake and two copies of a webhook at once on one conversation.

200 rounds, four threads per round released together by a barrier. Afterwards every emission was
sent exactly once, every input is reflected in the session and the transcript, and the replays
that the races caused were counted.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connections

from falai_django import host
from falai_django.models import HistoryItem, TurnRecord, Wake
from falai_django.stores.django import DjangoStore

from . import senders
from .helpers import signed_post, url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

ROUNDS = 200
BYE = "Obrigado, Ana! Até logo."


def _in_thread(barrier, errors, fn, *args):
    try:
        barrier.wait(timeout=60)
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - collected and asserted on
        errors.append(repr(exc))
    finally:
        connections.close_all()


def _webhook(session_id: str, message_id: str) -> None:
    response = signed_post(url(session_id, "messages"), {"text": "de novo", "id": message_id})
    assert response.status_code == 200, response.content


def test_a_message_a_wake_and_two_webhook_copies_at_once_200_rounds():
    keys = {}
    for r in range(ROUNDS):
        sid = f"race-{r}"
        host.handle_message(sid, "oi", id=f"{sid}.1")
        result = host.handle_message(sid, "meu nome é Ana", id=f"{sid}.2").result
        keys[sid] = result.schedule[0].key
    before = len(senders.sent)

    errors: list[str] = []
    for r in range(ROUNDS):
        sid = f"race-{r}"
        barrier = threading.Barrier(4)
        threads = [
            threading.Thread(target=_in_thread,
                             args=(barrier, errors, lambda s=sid: host.handle_message(s, "ainda aqui", id=f"{s}.3"))),
            threading.Thread(target=_in_thread, args=(barrier, errors, host.handle_wake, sid, keys[sid])),
            threading.Thread(target=_in_thread, args=(barrier, errors, _webhook, sid, f"{sid}.4")),
            threading.Thread(target=_in_thread, args=(barrier, errors, _webhook, sid, f"{sid}.4")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert errors == []

    # Every emission sent exactly once, and every outbox row was sent.
    sent_keys = Counter(m.idempotency_key for m in senders.sent)
    assert [k for k, n in sent_keys.items() if n > 1] == []
    outbox = set(HistoryItem.objects.filter(role="assistant").values_list("idempotency_key", flat=True))
    assert set(sent_keys) == outbox
    assert set(HistoryItem.objects.filter(role="assistant").values_list("send_status", flat=True)) == {"sent"}
    assert [m.text for m in senders.sent[before:]].count(BYE) == ROUNDS

    # Every input reflected: the wake honoured once, each message id in the session and transcript once.
    store = DjangoStore()
    for r in range(ROUNDS):
        sid = f"race-{r}"
        session = store.load(sid)
        assert {f"{sid}.3", f"{sid}.4"} <= set(session.inputs)
        users = Counter(HistoryItem.objects.filter(conversation_id=sid, role="user").values_list("message_key",
                                                                                                 flat=True))
        assert users == {f"{sid}.1": 1, f"{sid}.2": 1, f"{sid}.3": 1, f"{sid}.4": 1}
        assert Wake.objects.get(conversation_id=sid, key=keys[sid]).state == "done"
        assert session.runs == []
    # The two webhook copies: one changed the session, the other was a duplicate.
    copies = Counter(TurnRecord.objects.filter(input_key__endswith=".4").values_list("status", flat=True))
    assert copies == {"done": ROUNDS, "unchanged": ROUNDS}
    replays = sum(TurnRecord.objects.values_list("replays", flat=True))
    print(f"\nraces: {ROUNDS} rounds, {replays} replays after conflicts")
    assert replays > 0
