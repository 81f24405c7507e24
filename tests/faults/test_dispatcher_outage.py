"""The operator's drill (issue 42): a web server (`runserver`), `qcluster` and
`falai_dispatch_wakes` on a private PostgreSQL with the default NOTIFY hand-off (the dispatcher
sends), the cluster restarted twice (`-m immediate`) and stopped for 2 s once while 8
conversations send 25 webhooks each: four customers through the signed API (the turn runs in
the request), four through the WhatsApp webhook (stored, the turn runs on a django-q2 worker).

While the database is away the API and the webhook answer 503 with `Retry-After` (never a 500);
the channel (this test) delivers again after it. The three processes stay up. After each return
every reply written so far is sent within 15 s; at the end every message is recorded once and
every reply reached the channel (per idempotency key, once).
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from whatsapp import payloads

from falai_django.api.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from falai_django.channels.whatsapp.webhook import signature

from .conftest import TEMPLATE, base_env, new_name, read_log, wait_until
from .pgcluster import free_port

pytestmark = [pytest.mark.faults]

CONVERSATIONS = 8
MESSAGES = 25
SECRET = "outage-secret"
APP_SECRET = "outage-app-secret"
SETTLE_S = 15.0


def session_id(c: int) -> str:
    """Even customers write through the API (`o0`…), odd ones on WhatsApp (their `wa_id`)."""
    return f"o{c}" if c % 2 == 0 else f"55119000000{c}"


def whatsapp_body(wa_id: str, wamid: str, text: str) -> bytes:
    """A text message as Meta's webhook carries it (tests/whatsapp/payloads.py), sent now."""
    at = datetime.now(UTC).isoformat()
    return json.dumps(payloads.envelope([payloads.text(text, wamid, at, wa_id=wa_id)], wa_id=wa_id)).encode()


class Channel:
    """Eight customers, each sending its messages in order; a delivery that is not accepted is
    delivered again (after a 503, sooner than its Retry-After: a test has no time to wait)."""

    def __init__(self, port: int, pace: float) -> None:
        self.port, self.pace = port, pace
        self.statuses: Counter[int] = Counter()
        self.retry_after: set[str] = set()
        self.bodies_503: set[str] = set()
        self.refused = 0  # the web server itself did not answer (it must stay up)
        self.accepted = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.customer, args=(c,), daemon=True) for c in range(CONVERSATIONS)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def post(self, sid: str, body: bytes, *, whatsapp: bool = False) -> tuple[int, dict[str, str], bytes]:
        if whatsapp:
            path = "/falai/whatsapp/webhook"
            headers = {"Content-Type": "application/json", "X-Hub-Signature-256": signature(APP_SECRET, body)}
        else:
            path = f"/falai/sessions/{sid}/messages"
            ts = str(int(time.time()))
            headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: ts,
                       SIGNATURE_HEADER: sign(SECRET, ts, body, path=path)}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def customer(self, c: int) -> None:
        sid, whatsapp = session_id(c), c % 2 == 1
        for m in range(MESSAGES):
            if whatsapp:
                body = whatsapp_body(sid, f"{sid}.{m}", f"mensagem #{m}")
            else:
                body = json.dumps({"text": f"mensagem #{m}", "id": f"{sid}.{m}"}).encode()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    status, headers, content = self.post(sid, body, whatsapp=whatsapp)
                except OSError:
                    with self.lock:
                        self.refused += 1
                    time.sleep(0.2)
                    continue
                with self.lock:
                    self.statuses[status] += 1
                    if status == 503:
                        self.retry_after.add(headers.get("retry-after", ""))
                        self.bodies_503.add(content.decode(errors="replace"))
                if status in (200, 202):
                    with self.lock:
                        self.accepted += 1
                    break
                time.sleep(0.2)
            time.sleep(self.pace)


def _sent(private_pg, database: str) -> int:
    with private_pg.connect(database) as conn:
        return conn.execute("SELECT count(*) FROM falai_history WHERE role = 'assistant' AND send_status = 'sent' "
                            "AND conversation_id NOT IN ('probe', '5511900000099')").fetchone()[0]


def _open_inputs(private_pg, database: str) -> dict[str, int]:
    """Stored inputs whose turn has not finished yet, by status."""
    with private_pg.connect(database) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM falai_turn WHERE status NOT IN ('done', 'unchanged') "
                                 "GROUP BY status").fetchall())


def test_replies_are_sent_within_15s_of_each_return_and_the_api_says_503_meanwhile(private_pg, procs, tmp_path):
    database = new_name("outage")
    dsn = private_pg.create_database(database, template=TEMPLATE)
    sent_log = tmp_path / "sent.jsonl"
    env = base_env(dsn, FAULT_FLOW="chat", FAULT_SENT_LOG=str(sent_log), FAULT_CLOCK_SPEED="1",
                   FAULT_SEND_HANDOFF="notify", FAULT_WEBHOOK_SECRET=SECRET, FAULT_WHATSAPP_SECRET=APP_SECRET,
                   FAULT_FALAI_LOG_LEVEL="WARNING", FAULT_Q_NAME=new_name("outage-q"))
    port = free_port()
    web = procs.start([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload",
                       "--skip-checks"], env, "web")
    dispatcher = procs.start([sys.executable, "manage.py", "falai_dispatch_wakes", "--skip-checks"], env,
                             "dispatcher")
    cluster = procs.start([sys.executable, "manage.py", "qcluster", "--skip-checks"], env, "qcluster")
    channel = Channel(port, pace=0.35)
    wait_until(lambda: _answers(port) or not web.alive(), 60, what=f"the web server\n{web.tail()}")
    assert web.alive(), web.tail()
    channel.start()

    total = CONVERSATIONS * MESSAGES
    outages: list[dict] = []
    during: list[tuple[int, dict[str, str]]] = []
    for n, (threshold, kind) in enumerate(((total // 6, "restart"), (total // 3, "stop"),
                                          (total // 2, "restart"))):
        wait_until(lambda t=threshold: channel.accepted >= t or not channel.alive(), 90,
                   what=f"{threshold} accepted messages")
        assert channel.alive(), f"the load ended before outage {n + 1}: slow it down"
        if kind == "stop":
            private_pg.stop(mode="immediate")
            for probe in (channel.post("probe", json.dumps({"text": "oi", "id": "probe.1"}).encode()),
                          channel.post("", whatsapp_body("5511900000099", "probe.2", "oi"), whatsapp=True)):
                during.append((probe[0], probe[1]))
            time.sleep(2)
            private_pg.start()
        else:
            private_pg.restart(mode="immediate")
        # Every message accepted before the return has run and its reply reached the channel.
        accepted = channel.accepted
        settled = wait_until(lambda n=accepted: _sent(private_pg, database) >= n, SETTLE_S,
                             what=f"the replies to {accepted} accepted messages after outage {n + 1}: "
                                  f"{_open_inputs(private_pg, database)}\n{dispatcher.tail()}\n{cluster.tail()}")
        outages.append({"kind": kind, "accepted": accepted, "settle_s": round(settled, 2)})

    wait_until(lambda: not channel.alive(), 180, what="the load to finish")
    for thread in channel.threads:
        thread.join(1)
    assert channel.accepted == total
    final = wait_until(lambda: _sent(private_pg, database) >= total, SETTLE_S,
                       what=f"every reply sent: {_open_inputs(private_pg, database)}\n{dispatcher.tail()}")
    assert not _open_inputs(private_pg, database)

    assert web.alive(), web.tail()
    assert dispatcher.alive(), dispatcher.tail()
    assert cluster.alive(), cluster.tail()
    assert channel.statuses[500] == 0 and not any(s >= 500 and s != 503 for s in channel.statuses), channel.statuses
    assert channel.refused == 0, "the web server stopped answering"
    assert channel.statuses[503] > 0, "no request met the outage: the faults missed the load"
    assert [(status, headers.get("retry-after")) for status, headers in during] == [(503, "5")] * 2, during
    assert channel.retry_after == {"5"}
    assert all("psycopg" not in body and "Error" not in body for body in channel.bodies_503), channel.bodies_503

    with private_pg.connect(database) as conn:
        users = Counter(row[0] for row in conn.execute(
            "SELECT message_key FROM falai_history WHERE role = 'user' AND conversation_id NOT IN ('probe', '5511900000099')"))
        expected = {f"{session_id(c)}.{m}" for c in range(CONVERSATIONS) for m in range(MESSAGES)}
        assert set(users) == expected, f"lost inputs: {sorted(expected - set(users))[:10]}"
        assert all(n == 1 for n in users.values()), [k for k, n in users.items() if n > 1]
        outbox = conn.execute("SELECT idempotency_key, send_status FROM falai_history WHERE role = 'assistant' "
                              "AND conversation_id NOT IN ('probe', '5511900000099')").fetchall()
    assert len(outbox) == total and {status for _, status in outbox} == {"sent"}
    delivered = [r["key"] for r in read_log(sent_log) if r["event"] == "delivered"]
    keys = {key for key, _ in outbox}
    assert keys <= set(delivered), "a reply never reached the channel"
    repeats = len([k for k in delivered if k in keys]) - len(keys)
    # Cut between the channel call and its "sent" mark: sent again under the same idempotency key
    # (the channel drops it). At most one per conversation per outage.
    assert repeats <= len(outages) * CONVERSATIONS, repeats

    lines = "\n".join(dispatcher.raw)
    assert lines.count("lost the database") >= 1 and lines.count("is back after") >= 1, lines[-3000:]
    assert "Traceback" not in lines, lines[-3000:]
    print(f"\n{total} replies sent, {channel.statuses[503]} answers 503 and {channel.statuses[500]} 500; "
          f"after each outage: {outages}; the rest settled in {final:.2f}s; {repeats} repeated keys")


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/falai/schema")
        conn.getresponse().read()
        conn.close()
        return True
    except OSError:
        return False
