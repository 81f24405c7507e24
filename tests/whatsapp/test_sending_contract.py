"""The sending contract any sender may use: `PermanentSendError` fails the row at once (the rest
go on), `RetryLater` retries no sooner than the channel asked; anything else keeps its backoff."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from falai_django.host.delivery import send_pending
from falai_django.host.outbox import outbox_row, write_outbox
from falai_django.models import History
from falai_django.models import Session as SessionRow
from falai_django.sending import PermanentSendError, RetryLater

pytestmark = pytest.mark.django_db(transaction=True)

SID = "5511000000042"


def queue(*texts: str) -> None:
    SessionRow.objects.create(id=SID, version=1, blob={})
    now = timezone.now()
    write_outbox([outbox_row(SID, text=t, emission=f"m{i}#0@message:in", now=now, kind="verbatim", message_key=f"m{i}")
                  for i, t in enumerate(texts)])


def rows() -> list[tuple[str, str, int]]:
    return list(History.objects.order_by("id").values_list("content", "send_status", "send_attempts"))


def test_a_permanent_error_fails_the_row_at_once_and_the_rest_go_on():
    queue("one", "two")
    sent = []

    def sender(message):
        if message.text == "one":
            raise PermanentSendError("131026 Message undeliverable")
        sent.append(message.text)
        return "id-2"

    assert send_pending(SID, sender=sender) == 1
    assert rows() == [("one", "failed", 1), ("two", "sent", 1)]
    assert History.objects.get(content="one").send_error == "131026 Message undeliverable"
    assert sent == ["two"]


def test_retry_later_waits_at_least_as_long_as_the_channel_asked():
    queue("one", "two")

    def sender(message):
        raise RetryLater("130429 Rate limit hit", retry_after_s=300)

    before = timezone.now()
    assert send_pending(SID, sender=sender) == 0
    assert rows() == [("one", "pending", 1), ("two", "pending", 0)]  # order holds: two waits behind one
    first = History.objects.get(content="one")
    assert first.next_attempt_at >= before + timedelta(seconds=299)
    assert first.send_error == "130429 Rate limit hit"


def test_any_other_error_keeps_the_usual_backoff(settings):
    queue("one")

    def sender(message):
        raise ConnectionError("reset by peer")

    assert send_pending(SID, sender=sender) == 0
    first = History.objects.get()
    assert first.send_status == "pending" and first.send_error == "ConnectionError: reset by peer"
