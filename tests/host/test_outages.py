"""A database that cannot be reached: requests answer 503 with Retry-After (JSON, no driver text),
nothing is written, and the failures are classified from real driver errors, not stand-ins."""

from __future__ import annotations

import contextlib
import json
import logging

import pytest
from django.db import connection
from django.test import Client

from falai_django.host import outages
from falai_django.models import Session, TurnRecord
from falai_django.testing.postgres import free_port

from .helpers import redis_broker, signed_post, url, whatsapp_configured

pytestmark = pytest.mark.django_db(transaction=True)


class Lines(logging.Handler):
    """Collects the formatted lines of one logger (tests/host runs without pytest's logging plugin)."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger(name)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> Lines:
        self.logger.addHandler(self)
        self.previous = self.logger.level
        self.logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.previous)


@contextlib.contextmanager
def database_away(tmp_path):
    """The default database points at nothing for the duration: a closed port on PostgreSQL, a
    file in a folder that does not exist on SQLite. Real connection failures, from the driver."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))  # nothing listens there
    else:
        connection.settings_dict["NAME"] = str(tmp_path / "missing" / "db.sqlite3")
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def test_an_api_message_while_the_database_is_away_is_a_503_with_retry_after(tmp_path):
    with Lines("falai_django.host") as log, database_away(tmp_path):
        response = signed_post(url("c-away", "messages"), {"text": "oi", "id": "wamid.1"})
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == str(outages.RETRY_AFTER_S)
    body = response.json()
    assert body == {"detail": outages.UNAVAILABLE_DETAIL, "unavailable": "database"}
    assert "Error" not in response.content.decode() and "psycopg" not in response.content.decode()
    assert any("c-away" in line and "503" in line for line in log.lines), log.lines
    # back: nothing was half written, and the same delivery now goes through
    assert not TurnRecord.objects.filter(conversation_id="c-away").exists()
    again = signed_post(url("c-away", "messages"), {"text": "oi", "id": "wamid.1"})
    assert again.status_code == 200 and Session.objects.filter(pk="c-away").exists()


def test_the_stream_endpoint_answers_503_before_its_first_byte(tmp_path):
    with database_away(tmp_path):
        response = signed_post(url("c-away", "messages/stream"), {"text": "oi", "id": "wamid.1"})
    assert response.status_code == 503 and not response.streaming
    assert response["Retry-After"] == str(outages.RETRY_AFTER_S)
    assert response.json()["detail"] == outages.UNAVAILABLE_DETAIL


def test_a_session_read_and_the_list_answer_503_too(tmp_path):
    with database_away(tmp_path):
        state = signed_get(url("c-away"))
        listing = Client().get("/falai/sessions", HTTP_AUTHORIZATION="Token checked-against-the-database")
    assert state.status_code == 503 and state["Retry-After"] == str(outages.RETRY_AFTER_S)
    assert listing.status_code == 503 and listing.json()["unavailable"] == "database"


@pytest.mark.parametrize("path", ["/falai/flows/triagem", "/falai/flows/triagem/funnel", "/falai/schema",
                                  "/falai/docs/"])
def test_the_flows_api_the_schema_and_the_docs_page_answer_503_too(tmp_path, path):
    with database_away(tmp_path):  # the token is looked up in the database
        response = Client().get(path, HTTP_AUTHORIZATION="Token checked-against-the-database")
    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"] == str(outages.RETRY_AFTER_S)
    assert response.json() == {"detail": outages.UNAVAILABLE_DETAIL, "unavailable": "database"}


def signed_get(path: str):
    import time

    from falai_django.api.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

    ts = str(int(time.time()))
    return Client().get(path, headers={TIMESTAMP_HEADER: ts,
                                       SIGNATURE_HEADER: sign("s3cret", ts, b"", method="GET", path=path)})


def whatsapp_delivery(settings, wa_id: str, wamid: str):
    """WhatsApp configured, then one signed text message from `wa_id` posted to the webhook."""
    from whatsapp import payloads

    whatsapp_configured(settings)
    message = payloads.text("oi", wamid, "2023-11-14T22:13:20Z", wa_id=wa_id)
    return payloads.deliver(Client(), payloads.envelope([message], wa_id=wa_id))


def test_a_signed_whatsapp_delivery_while_the_database_is_away_is_a_503(settings, tmp_path):
    with database_away(tmp_path):
        response = whatsapp_delivery(settings, "5511999990000", "wamid.A")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(outages.RETRY_AFTER_S)
    assert not TurnRecord.objects.exists()  # nothing half written: Meta delivers it again


def test_real_driver_failures_are_told_apart_from_bugs(tmp_path):
    from django.db import OperationalError

    with database_away(tmp_path), pytest.raises(OperationalError) as caught:
        connection.ensure_connection()
    assert outages.dependency_down(caught.value) == "database"
    try:
        raise RuntimeError("while handling") from caught.value
    except RuntimeError as chained:
        assert outages.dependency_down(chained) == "database"  # what it was raised from counts
    assert outages.dependency_down(ValueError("bad data")) is None
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1)  # nothing listens
    with pytest.raises(redis.exceptions.ConnectionError) as broker:
        client.ping()
    assert outages.dependency_down(broker.value) == "broker"


def test_the_backoff_doubles_up_to_five_seconds_and_starts_over_after_a_success():
    backoff = outages.Backoff()
    waits = [backoff.next() for _ in range(8)]
    assert waits[:4] == [0.25, 0.5, 1.0, 2.0]
    assert max(waits) == 5.0 and waits[-1] == 5.0
    backoff.reset()
    assert backoff.next() == 0.25


def test_an_outage_is_logged_once_when_lost_and_once_when_back():
    with Lines("falai_django.wakes") as log:
        outage = outages.Outage("falai dispatcher", logging.getLogger("falai_django.wakes"))
        error = ConnectionError("server closed the connection unexpectedly")
        assert outage.lost("database", error) is True
        assert outage.lost("database", error) is False  # the same outage: no second line
        assert outage.down == ["database"]
        assert outage.back() == ["database"]
        assert outage.back() == []
    assert len(log.lines) == 2, log.lines
    assert "lost the database" in log.lines[0] and "is back after" in log.lines[1]


@pytest.fixture
def broker_away(monkeypatch):
    """django-q2 queues on a Redis broker that nothing answers (a real redis-py ConnectionError)."""
    redis = pytest.importorskip("redis")
    import django_q.tasks
    from django_q.conf import Conf

    broker = redis_broker(redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1))
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(django_q.tasks, "get_broker", lambda *args, **kwargs: broker)
    return broker


def test_a_turn_whose_send_cannot_be_queued_is_still_a_200_and_the_sweep_hands_the_send_over(broker_away,
                                                                                              monkeypatch):
    """The turn is committed before the hand-off: a broker away then must not turn a recorded turn
    into an error (the channel would be told nothing was recorded). The reply waits in the outbox,
    a log line names the conversation, and the sweep queues it once the broker is back."""
    from django_q.conf import Conf

    from falai_django.host import delivery

    from . import senders
    from .helpers import post, staff_client

    with Lines("falai_django") as log:
        response = post(staff_client(), url("br1", "messages"), {"text": "oi", "id": "m1"})
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["status"] == "done"
    from falai_django.models import HistoryItem

    pending = list(HistoryItem.objects.filter(conversation_id="br1", role="assistant").values_list("send_status",
                                                                                                      flat=True))
    assert pending == ["pending"] and senders.sent == []
    assert any("br1" in line and "could not queue" in line and "sweep" in line for line in log.lines), log.lines

    monkeypatch.setattr(Conf, "SYNC", True)  # the broker is back (in-line here)
    import django_q.tasks
    from django_q.brokers import get_broker

    monkeypatch.setattr(django_q.tasks, "get_broker", get_broker)
    assert delivery.sweep_unsent(older_than_s=0) == 1
    assert [message.session_id for message in senders.sent] == ["br1"]


def test_a_webhook_whose_turn_cannot_be_queued_is_kept_and_swept_at_once_not_after_ten_minutes(broker_away,
                                                                                                 settings,
                                                                                                 monkeypatch):
    from django_q.conf import Conf

    from falai_django.host import inbox

    with Lines("falai_django") as log:
        response = whatsapp_delivery(settings, "5511999990001", "wamid.B")
    assert response.status_code == 200, response.content  # stored: Meta must not deliver it again
    [record] = TurnRecord.objects.filter(conversation_id="5511999990001")
    assert record.status == TurnRecord.Status.RECEIVED and record.next_attempt_at is not None
    assert any("5511999990001" in line and "could not queue" in line for line in log.lines), log.lines

    monkeypatch.setattr(Conf, "SYNC", True)  # the broker is back (in-line here)
    import django_q.tasks
    from django_q.brokers import get_broker

    monkeypatch.setattr(django_q.tasks, "get_broker", get_broker)
    assert inbox.retry_parked() == 1  # the default ten-minute staleness does not apply to it
    record.refresh_from_db()
    assert record.status == TurnRecord.Status.DONE
    assert inbox.retry_parked() == 0


def test_an_input_cut_off_by_a_lost_database_does_not_hold_its_conversation_when_it_is_delivered_again(
        tmp_path, settings):
    """The database goes away mid-turn, after the in-line input's row (claimed for its caller) was
    written: the claim cannot be released, nor the input marked failed. When the channel delivers
    the message again, and the customer writes the next one, neither waits behind that claim
    (TURN_LEASE_S, five minutes by default): the process that lost it releases it first."""
    import contextlib as _contextlib
    import time

    from falai_django import conf, host

    from . import agents

    settings.FALAI = {**settings.FALAI, "TURN_WAIT_S": 2.0}
    conf.clear_cache()
    away = _contextlib.ExitStack()
    lost: list[bool] = []

    def speak_then_lose_the_database(request):
        if not lost:  # the first attempt only
            lost.append(True)
            away.enter_context(database_away(tmp_path))
        return agents.speak_reply(request)

    agents.use(agents.ana(provider=agents.scripted_provider(speak=[speak_then_lose_the_database] * 10)))
    with Lines("falai_django.host") as log:
        with pytest.raises(Exception) as cut:
            host.handle("cut1", {"message": "oi", "id": "m1"})
        assert outages.dependency_down(cut.value) == "database"
        away.close()  # the database is back
        [orphan] = TurnRecord.objects.filter(conversation_id="cut1")
        assert orphan.status == TurnRecord.Status.RECEIVED and orphan.claimed_until is not None

        started = time.monotonic()
        again = host.handle("cut1", {"message": "oi", "id": "m1"})  # the channel delivers it again
        following = host.handle("cut1", {"message": "meu nome é Ana", "id": "m2"})
        took = time.monotonic() - started
    assert again.status in ("done", "unchanged") and following.status == "done", (again, following)
    assert took < 2.0, took  # no wait behind the cut-off claim
    assert any("cut1" in line and "cut off" in line for line in log.lines), log.lines
    keys = list(TurnRecord.objects.filter(conversation_id="cut1").order_by("id").values_list("input_key", "status"))
    assert [k for k, _ in keys] == ["m1", "m1", "m2"] and all(s in ("done", "unchanged") for _, s in keys), keys
    texts = [row.content for row in __import__("falai_django.models", fromlist=["HistoryItem"]).HistoryItem.objects
             .filter(conversation_id="cut1", role="user").order_by("id")]
    assert texts == ["oi", "meu nome é Ana"]  # the first message once, then the second: in order


def test_after_an_outage_the_dispatcher_hands_over_at_once_the_stored_inputs_no_one_runs():
    """A worker's turn cut off by a lost database fails its task and leaves the input `received`.
    The dispatcher's first sweep after the outage hands it over with no grace period (the usual
    sweep waits ten minutes, for tasks still queued), leaving alone an input its caller runs."""
    from falai_django.host import inbox, ordering
    from falai_django.host.wakes import Dispatcher

    cut = inbox.receive("swept1", {"message": "oi", "id": "m1"})  # stored, its task lost with the worker
    running = inbox.receive("swept2", {"message": "oi", "id": "m1"})
    ordering.claim(running)  # an in-line caller runs this one
    dispatcher = Dispatcher(poll_s=0.01)
    dispatcher.sweep()
    assert TurnRecord.objects.get(pk=cut.pk).status == TurnRecord.Status.RECEIVED  # too fresh for the usual sweep
    dispatcher.sweep(everything=True)
    assert TurnRecord.objects.get(pk=cut.pk).status == TurnRecord.Status.DONE  # run (django-q2 in-line here)
    assert TurnRecord.objects.get(pk=running.pk).status == TurnRecord.Status.RECEIVED
