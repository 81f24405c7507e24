"""PostgreSQL restarted (crash-like, `pg_ctl restart -m immediate`) twice during a load of
inbound turns, on a private cluster. The load plays a channel that re-delivers a message the
host could not accept. Once the database is back: no input is lost, every reply is sent, and
no reply reaches the customer twice.
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from .conftest import TEMPLATE, base_env, new_name, read_log, wait_until

pytestmark = [pytest.mark.faults]

CONVERSATIONS = 8
MESSAGES = 8


def test_postgres_restarted_during_inbound_load_loses_nothing_and_sends_once(private_pg, procs, tmp_path):
    database = new_name("restart")
    dsn = private_pg.create_database(database, template=TEMPLATE)
    sent_log = tmp_path / "sent.jsonl"
    env = base_env(dsn, FAULT_FLOW="chat", FAULT_SENT_LOG=str(sent_log), FAULT_CLOCK_SPEED="1")
    load = procs.start([sys.executable, "-m", "faults.load", "--conversations", str(CONVERSATIONS),
                        "--messages", str(MESSAGES), "--pace", "0.08", "--inline", "--seconds", "60",
                        "--settle", "40"], env, "load")

    total = CONVERSATIONS * MESSAGES
    restarts = 0
    for threshold in (total // 4, total // 2):
        wait_until(lambda t=threshold: load.count("accepted") >= t or not load.alive(), 60,
                   what=f"{threshold} accepted inputs\n{load.tail()}")
        if not load.alive():
            break
        private_pg.restart(mode="immediate")
        restarts += 1
    assert load.wait(timeout=120) == 0, load.tail()
    assert restarts == 2, "the load finished before both restarts: slow it down"
    assert any("error" in line for line in load.lines), "no delivery failed: the restart missed the load"
    assert [line for line in load.lines if "settled" in line] == [{"settled": True}], load.tail()

    with private_pg.connect(database) as conn:
        users = Counter(conn.execute(
            "SELECT message_key FROM falai_history WHERE role = 'user'").fetchall())
        expected = {(f"c{c}.{m}",) for c in range(CONVERSATIONS) for m in range(MESSAGES)}
        assert set(users) == expected, f"lost inputs: {sorted(expected - set(users))[:10]}"
        assert all(n == 1 for n in users.values()), [k for k, n in users.items() if n > 1]
        outbox = conn.execute("SELECT idempotency_key, send_status FROM falai_history "
                              "WHERE role = 'assistant'").fetchall()
        assert len(outbox) == total, "one reply per message"
        assert {status for _, status in outbox} == {"sent"}
        leftover = conn.execute("SELECT status, count(*) FROM falai_turn WHERE status NOT IN "
                                "('done', 'unchanged') GROUP BY status").fetchall()
        assert leftover == []
        inputs = conn.execute("SELECT id, blob->'inputs' FROM agent_sessions").fetchall()
        assert all(len(ids) == MESSAGES for _, ids in inputs)

    delivered = [r["key"] for r in read_log(sent_log) if r["event"] == "delivered"]
    keys = {key for key, _ in outbox}
    assert set(delivered) == keys, "a reply never reached the channel"
    repeats = len(delivered) - len(set(delivered))
    # A send cut by the restart between the channel call and its "sent" mark goes out again under
    # the same idempotency key (the channel drops it): at most one per conversation per restart.
    assert repeats <= restarts * CONVERSATIONS, repeats
    print(f"\nPostgreSQL restarted {restarts}x: {load.count('error')} failed deliveries re-sent by the channel, "
          f"{len(delivered)} channel calls for {len(keys)} replies ({repeats} repeated an idempotency key)")
