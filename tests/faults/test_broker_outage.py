"""The Redis broker goes away while wakes come due: the dispatcher and the django-q2 cluster stay
up, the dispatcher says so once and puts what it could not hand over back to `pending` (not stuck
`queued` until its claim lapses), and once a broker answers on the same address again the same
cluster fires every wake and every goodbye is sent.

The broker is a private `redis-server` on a free port, killed with SIGKILL and started again
empty (what a restarted, non-persistent Redis is).
"""

from __future__ import annotations

import shutil
import sys
import time

import pytest

from .conftest import TEMPLATE, _unavailable, base_env, new_name, read_log, wait_until
from .pgcluster import free_port

pytestmark = [pytest.mark.faults, pytest.mark.redis]

CONVERSATIONS = 4
GOODBYE = "Obrigado, Ana! Até logo."


def _redis(procs, port: int, tmp_path, name: str):
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("redis-server is not installed; the broker outage test needs its own Redis")
    server = procs.start([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", str(tmp_path)], {}, name)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    wait_until(lambda: _pings(client), 20, what=f"redis-server on {port}")
    return server


def _pings(client) -> bool:
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001 - not up yet
        return False


def test_a_lost_broker_does_not_stop_the_dispatcher_and_its_wakes_fire_when_it_returns(private_pg, procs, tmp_path):
    database = new_name("broker")
    dsn = private_pg.create_database(database, template=TEMPLATE)
    port = free_port()
    log = tmp_path / "sent.jsonl"
    env = base_env(dsn, FAULT_FLOW="wake", FAULT_SENT_LOG=str(log), FAULT_CLOCK_SPEED="60",
                   FAULT_Q_REDIS=f"redis://127.0.0.1:{port}/0", FAULT_Q_NAME=new_name("broker-q"),
                   FAULT_FALAI_LOG_LEVEL="WARNING")
    broker = _redis(procs, port, tmp_path, "redis-1")
    dispatcher = procs.start([sys.executable, "manage.py", "falai_dispatch_wakes", "--poll", "0.05"], env,
                             "dispatcher")
    load = procs.start([sys.executable, "-m", "faults.load", "--flow", "wake", "--conversations",
                        str(CONVERSATIONS), "--messages", "2", "--pace", "0", "--inline", "--seconds", "60"],
                       env, "load")
    assert load.wait(timeout=90) == 0, load.tail()
    cluster = procs.start([sys.executable, "manage.py", "qcluster"], env, "cluster")
    # Up, not starting: its sentinel reports to the broker (django-q2 exits when the broker goes
    # away during its start, before it runs; `make run` and a supervisor restart it then).
    import redis

    stats = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    wait_until(lambda: bool(stats.keys("django_q:*:cluster:*")) or not cluster.alive(), 30,
               what=f"the cluster to report to the broker\n{cluster.tail()}")
    assert cluster.alive(), cluster.tail()

    with private_pg.connect(database) as db:
        def count(sql: str) -> int:
            return db.execute(sql).fetchone()[0]

        assert count("SELECT count(*) FROM falai_wake WHERE state = 'pending'") == CONVERSATIONS
        broker.kill()  # before the 5-minute waits (5 s at 60x) come due
        wait_until(lambda: "lost the broker" in "\n".join(dispatcher.raw), 30,
                   what=f"the dispatcher noticing the broker is away\n{dispatcher.tail()}")
        time.sleep(1.0)  # several polls with due wakes and no broker
        assert dispatcher.alive(), dispatcher.tail()
        stuck = count("SELECT count(*) FROM falai_wake WHERE state = 'queued'")
        assert stuck == 0, "wakes the broker never took are stuck as queued"
        assert count("SELECT count(*) FROM falai_wake WHERE state = 'done'") == 0

        _redis(procs, port, tmp_path, "redis-2")  # the broker is back, empty
        back = time.monotonic()
        assert cluster.alive(), cluster.tail()
        wait_until(lambda: count("SELECT count(*) FROM falai_wake WHERE state <> 'done'") == 0
                   and count("SELECT count(*) FROM falai_history WHERE role = 'assistant' AND send_status <> 'sent'")
                   == 0, 60, interval=0.25, what=f"every wake fired and sent\n{dispatcher.tail()}")
        settled = time.monotonic() - back
        outbox = [r[0] for r in db.execute("SELECT content FROM falai_history WHERE role = 'assistant'")]

    assert outbox.count(GOODBYE) == CONVERSATIONS
    delivered = [r for r in read_log(log) if r["event"] == "delivered"]
    assert sum(r["text"] == GOODBYE for r in delivered) == CONVERSATIONS
    lines = "\n".join(dispatcher.raw)
    assert lines.count("lost the broker") == 1, lines[-3000:]  # one line for the outage, not one a poll
    assert "the broker is back after" in lines, lines[-3000:]
    assert "Traceback" not in lines, lines[-3000:]
    assert dispatcher.alive()
    assert cluster.alive(), cluster.tail()  # the same cluster, never restarted
    print(f"\nbroker away: {CONVERSATIONS} wakes kept pending; all fired and sent {settled:.1f}s after it returned")
