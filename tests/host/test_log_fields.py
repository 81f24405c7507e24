"""Every log line of a turn names its conversation and its turn, whoever logs it, with no LOGGING
change: the app's record factory sets `conversation_id` and `turn_id` on every record."""

from __future__ import annotations

import io
import logging

import pytest

from falai_django import host
from falai_django.models import TurnRecord
from falai_django.observe import logs

from . import senders
from .helpers import listening

pytestmark = pytest.mark.django_db(transaction=True)

seen: list[logging.LogRecord] = []


class Keep(logging.Handler):
    """A handler of the kind a project adds: it knows nothing about falai."""

    def emit(self, record: logging.LogRecord) -> None:
        seen.append(record)


@pytest.fixture
def kept():
    seen.clear()
    with listening(Keep(level=logging.DEBUG)):
        yield seen


def noisy_context(session_id, session, turn_input):
    """A project's FALAI["CONTEXT"] that logs through its own logger, mid-turn."""
    logging.getLogger("shop.crm").info("looking the customer up")
    return {"plan": "gold"}


def test_a_turns_log_lines_from_any_logger_carry_its_conversation_and_turn(kept, settings):
    settings.FALAI = {**settings.FALAI, "CONTEXT": "host.test_log_fields.noisy_context"}
    logging.getLogger("shop.crm").info("before any turn")
    result = host.handle_message("5511988887777", "oi", id="wamid.1")
    logging.getLogger("shop.crm").info("after the turn")

    [before, during, after] = [r for r in kept if r.name == "shop.crm"]
    assert (during.conversation_id, during.turn_id) == ("5511988887777", result.turn_id)
    assert result.turn_id == TurnRecord.objects.get(input_key="wamid.1").pk
    assert (before.conversation_id, before.turn_id) == ("-", "-")
    assert (after.conversation_id, after.turn_id) == ("-", "-")


def test_the_sends_of_a_conversation_are_logged_under_its_id(kept, settings):
    from falai_django.host import delivery

    senders.fail_next(1)  # the send fails once: its warning is logged from the delivery code
    host.handle_message("5511988887777", "oi", id="wamid.1")
    warned = [r for r in kept if "send failed" in r.getMessage()]
    assert warned and all(r.conversation_id == "5511988887777" for r in warned)
    kept.clear()
    from falai_django.models import History

    History.objects.update(next_attempt_at=None)
    senders.fail_next(1)
    delivery.send_pending("5511988887777")  # outside any turn: the conversation, no turn
    warned = [r for r in kept if "send failed" in r.getMessage()]
    assert [(r.conversation_id, r.turn_id) for r in warned] == [("5511988887777", "-")]


def test_a_format_naming_the_fields_prints_them(kept, settings):
    settings.FALAI = {**settings.FALAI, "CONTEXT": "host.test_log_fields.noisy_context"}
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(conversation_id)s %(turn_id)s %(message)s"))
    logging.getLogger("shop").addHandler(handler)
    try:
        result = host.handle_message("c-42", "oi", id="wamid.1")
    finally:
        logging.getLogger("shop").removeHandler(handler)
    assert f"c-42 {result.turn_id} looking the customer up" in stream.getvalue().splitlines()


def test_the_formatter_fills_the_fields_in_on_a_record_made_without_them():
    record = logging.LogRecord("early", logging.INFO, __file__, 1, "starting up", None, None)
    assert not hasattr(record, "conversation_id")
    line = logs.Formatter("%(conversation_id)s %(turn_id)s %(message)s").format(record)
    assert line == "- - starting up"


def test_a_streams_reader_logs_outside_the_turn_and_an_abandoned_stream_leaves_no_scope(kept):
    from falai_django.observe.context import current

    chunks = host.stream("s-stream", {"message": "oi", "id": "wamid.1"})
    assert "delta" in next(chunks)
    logging.getLogger("shop.reader").info("between two chunks")  # the reader's code, not the turn's
    assert current() is None
    chunks.close()
    assert current() is None
    [line] = [r for r in kept if r.name == "shop.reader"]
    assert (line.conversation_id, line.turn_id) == ("-", "-")
    assert TurnRecord.objects.get(input_key="wamid.1").claimed_until is None  # given back to the workers
