"""A django-q2 worker killed with SIGKILL mid-send and mid-wake, and the Redis broker flushed
while tasks sat in it (a private Redis database, never db 0), on a private PostgreSQL cluster.

1. A cluster whose channel takes 0.5 s per send is killed while sends are in flight; the broker
   is flushed, losing the queued sends.
2. A second cluster picks the lost sends up (the dispatcher's sweep re-enqueues them); when the
   durable wakes come due, it is killed while a wake's turn runs its (slow) action; the broker is
   flushed again, losing the queued wake tasks.
3. A third cluster runs. Every emitted message is delivered (a send cut between the channel
   call and its "sent" mark goes out again under the same idempotency key, which the channel
   drops), every wake is honoured, no input is lost.
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from .conftest import TEMPLATE, base_env, new_name, read_log, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.redis]

CONVERSATIONS = 6
GOODBYE = "Obrigado, Ana! Até logo."


def _events(log, event):
    return [r for r in read_log(log) if r["event"] == event]


def test_sigkill_mid_send_and_mid_wake_and_a_flushed_broker_lose_nothing(private_pg, private_redis, procs,
                                                                          tmp_path):
    redis_url, redis_client = private_redis
    database = new_name("kill")
    dsn = private_pg.create_database(database, template=TEMPLATE)
    log = tmp_path / "sent.jsonl"
    env = base_env(dsn, FAULT_FLOW="wake", FAULT_SENT_LOG=str(log), FAULT_CLOCK_SPEED="60",
                   FAULT_Q_REDIS=redis_url, FAULT_Q_NAME=new_name("faults-q"), FAULT_Q_WORKERS="2")
    slow = {**env, "FAULT_SEND_DELAY": "0.5", "FAULT_ACTION_DELAY": "2.0"}
    qcluster = [sys.executable, "manage.py", "qcluster"]
    dispatcher = procs.start([sys.executable, "manage.py", "falai_dispatch_wakes", "--poll", "0.05",
                              "--max-seconds", "120"], env, "dispatcher")

    with private_pg.connect(database) as db:
        def count(sql: str) -> int:
            return db.execute(sql).fetchone()[0]

        # -- 1. killed mid-send, broker flushed -------------------------------------------------
        first = procs.start(qcluster, slow, "cluster-1")
        load = procs.start([sys.executable, "-m", "faults.load", "--flow", "wake", "--conversations",
                            str(CONVERSATIONS), "--messages", "2", "--pace", "0", "--seconds", "60"], env, "load")
        assert load.wait(timeout=90) == 0, load.tail()
        wait_until(lambda: len(_events(log, "begin")) >= 3, 30, what="sends in flight")
        first.kill()
        cut_sends = {(r["pid"], r["key"]) for r in _events(log, "begin")} - {
            (r["pid"], r["key"]) for r in _events(log, "delivered")}
        queued_before_flush = redis_client.dbsize()
        redis_client.flushdb()

        # -- 2. killed mid-wake, broker flushed --------------------------------------------------
        second = procs.start(qcluster, slow, "cluster-2")
        wait_until(lambda: len(_events(log, "action")) >= 1, 60, what="a wake's turn running its action")
        second.kill()
        cut_wakes = {r["key"] for r in _events(log, "action")}
        redis_client.flushdb()

        # -- 3. a healthy cluster; the dispatcher's sweep recovers what was lost ------------------
        procs.start(qcluster, env, "cluster-3")
        settled = (
            "SELECT (SELECT count(*) FROM falai_history WHERE role = 'assistant' AND send_status <> 'sent')"
            " + (SELECT count(*) FROM falai_wake WHERE state <> 'done')"
            " + (SELECT count(*) FROM agent_sessions WHERE jsonb_array_length(blob->'runs') > 0)"
            " + (SELECT count(*) FROM falai_turn WHERE status IN ('received', 'retry'))")
        wait_until(lambda: count(settled) == 0, 90, interval=0.25,
                   what=f"everything sent and every wake honoured\n{dispatcher.tail()}")

        users = Counter(r[0] for r in db.execute("SELECT message_key FROM falai_history WHERE role = 'user'"))
        assert set(users) == {f"c{c}.{m}" for c in range(CONVERSATIONS) for m in range(2)}
        assert set(users.values()) == {1}
        outbox = dict(db.execute("SELECT idempotency_key, content FROM falai_history WHERE role = 'assistant'"))
        wakes = db.execute("SELECT count(*), count(*) FILTER (WHERE state = 'done') FROM falai_wake").fetchone()
        wake_keys = {r[0] for r in db.execute("SELECT key FROM falai_wake")}
        honoured = {r[0] for r in db.execute("SELECT input_key FROM falai_turn WHERE kind = 'wake' AND status = 'done'")}

    delivered = [r["key"] for r in _events(log, "delivered")]
    assert set(delivered) == set(outbox), "an emitted message never reached the channel"
    assert sorted(outbox.values()).count(GOODBYE) == CONVERSATIONS, "a wake was never honoured"
    assert wakes[0] >= CONVERSATIONS and wakes[0] == wakes[1]
    assert wake_keys <= honoured, f"wakes never honoured: {sorted(wake_keys - honoured)[:5]}"
    repeats = len(delivered) - len(set(delivered))
    assert repeats <= 4, f"{repeats} sends repeated (at most one per killed worker)"
    assert cut_sends, "the first kill landed while no send was in flight"
    assert cut_wakes, "the second kill landed while no wake was running"
    print(f"\nSIGKILL mid-send cut {len(cut_sends)} send(s); broker held {queued_before_flush} key(s) when flushed; "
          f"SIGKILL mid-wake cut {len(cut_wakes)} action(s); {len(delivered)} channel calls for "
          f"{len(outbox)} emissions ({repeats} repeated an idempotency key); {wakes[1]} wakes done")
