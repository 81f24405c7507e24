"""A burst of inputs, one webhook each, at several workers: the body test_pg_turn_order.py runs
on PostgreSQL and test_turn_order.py on SQLite (not a test module itself).

Each conversation's messages are received in send order (one `TurnRecord` each, as a webhook
stores them), while the workers already run; the broker hands the tasks out in any order
(shuffled in small windows), and `WORKERS` threads call `tasks.process_turn` on them. Afterwards
every input was processed, and in every conversation in the order it was received: the user
rows of the transcript, in id order, and the session's processed inputs are the send order.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from typing import Any

from django.db import connections

from falai_django import host, tasks
from falai_django.models import HistoryItem, TurnRecord
from falai_django.stores.django import DjangoStore

from . import agents

STOP = object()


def _slow(reply):
    """The scripted provider, a little slower: two workers on one conversation overlap."""

    def call(request: Any) -> dict[str, Any]:
        time.sleep(0.002)
        return reply(request)

    return call


def _worker(work: queue.Queue, errors: list[str]) -> None:
    try:
        while (record_id := work.get(timeout=120)) is not STOP:
            tasks.process_turn(record_id)
    except Exception as exc:  # noqa: BLE001 - collected and asserted on
        errors.append(repr(exc))
    finally:
        connections.close_all()


def _producer(sids: list[str], messages: int, work: queue.Queue, errors: list[str], seed: int,
              in_line_every: int = 0) -> None:
    """The webhooks: each message stored as it arrives, its task queued; the broker's order is
    not the arrival order (each window of ids is shuffled before it is handed out). With
    `in_line_every` = n, every n-th message goes through the API instead (`host.handle`, which
    answers with the turn), while the tasks of the ones before it may still be in the window."""
    rng = random.Random(seed)
    window: list[int] = []
    try:
        for i in range(messages):
            for sid in sids:
                text, key = f"mensagem {i:02d} de {sid}", f"{sid}.{i:02d}"
                if in_line_every and i % in_line_every == in_line_every - 1:
                    result = host.handle_message(sid, text, id=key)
                    if result.status != "done":
                        errors.append(f"{key}: {result.status} {result.error}")
                    continue
                record = host.receive(sid, {"message": text, "id": key})
                window.append(record.pk)
            if len(window) >= 2 * len(sids) or i == messages - 1:
                rng.shuffle(window)
                for record_id in window:
                    work.put(record_id)
                window = []
    except Exception as exc:  # noqa: BLE001
        errors.append(repr(exc))
    finally:
        connections.close_all()


def burst(*, conversations: int, messages: int, workers: int, seed: int = 28, in_line_every: int = 0) -> None:
    """`in_line_every`: see `_producer`; then each conversation has a producer of its own (an API
    call waits for its answer, as a customer's next message waits for the last one's webhook)."""
    agents.reset(provider=agents.scripted_provider(
        understand=[_slow(agents.understand_reply)] * agents.ENDLESS,
        speak=[_slow(agents.speak_reply)] * agents.ENDLESS,
    ))
    sids = [f"order-{seed}-{c}" for c in range(conversations)]
    work: queue.Queue = queue.Queue()
    errors: list[str] = []
    threads = [threading.Thread(target=_worker, args=(work, errors)) for _ in range(workers)]
    for t in threads:
        t.start()
    groups = [[sid] for sid in sids] if in_line_every else [sids]
    producers = [threading.Thread(target=_producer, args=(group, messages, work, errors, seed + n, in_line_every))
                 for n, group in enumerate(groups)]
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.join(timeout=300)
    for _ in threads:
        work.put(STOP)
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a worker is stuck"
    assert errors == []

    # Every input processed: nothing left received or parked, none failed.
    statuses = dict(TurnRecord.objects.filter(conversation_id__in=sids).values_list("input_key", "status"))
    assert len(statuses) == conversations * messages
    assert {key: status for key, status in statuses.items() if status != "done"} == {}

    assert_in_order({sid: [f"{sid}.{i:02d}" for i in range(messages)] for sid in sids})


def assert_in_order(sent: dict[str, list[str]]) -> None:
    """Each conversation's inputs (`sent`: conversation id -> its input keys in send order, which
    sort in that order) were received in that order and processed in it: no order violation, a
    message understood right after one sent later than it (the count the issue's "81 order
    violations" was), in the transcript, the session's inputs or the saved versions."""
    store = DjangoStore()
    violations: dict[str, int] = {}
    for sid, keys in sent.items():
        turns = list(TurnRecord.objects.filter(conversation_id=sid).order_by("id").values_list("input_key", "version"))
        assert [key for key, _ in turns] == keys, f"{sid}: the inputs were not received in send order"
        transcript = list(HistoryItem.objects.filter(conversation_id=sid, role="user").order_by("id")
                          .values_list("message_key", flat=True))
        by_version = [key for key, _ in sorted(turns, key=lambda kv: kv[1])]
        for what, seen in (("transcript", transcript), ("inputs", store.load(sid).inputs[-len(keys):]),
                           ("saved versions", by_version)):
            assert sorted(seen) == keys, f"{sid}: the {what} lack messages: {seen}"
            late = sum(1 for a, b in zip(seen, seen[1:], strict=False) if a > b)
            if late:
                violations[f"{sid} ({what})"] = late
    assert violations == {}, f"{sum(violations.values())} order violations: {violations}"
