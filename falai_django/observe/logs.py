"""Every log line of a turn names its conversation and its turn.

A log record factory, installed once when the app is ready (`install`), puts the current
scope's (`observe.context`) `conversation_id` and `turn_id` on every record made meanwhile, by
any logger (the app's, Django's, an SDK's), so every handler and formatter sees them with no
LOGGING change; outside a conversation both are "-". One grep for a conversation id follows it
through the web server, the workers and the dispatcher with a format such as

    "%(asctime)s %(conversation_id)s %(turn_id)s %(name)s %(levelname)s %(message)s"

and `Formatter` (`"()": "falai_django.observe.logs.Formatter"` in LOGGING) fills the two fields
in on records made before the app was ready. Leave the two names out of a logging call's
`extra`: Python refuses an `extra` key the record already has.
"""

from __future__ import annotations

import logging
from typing import Any

from falai_django.observe.context import CURRENT

NONE = "-"  # the fields' value on a record made outside any conversation
FIELDS = ("conversation_id", "turn_id")

_replaced: list[Any] = []  # the factory `install` wrapped (installed once per process)


def install() -> None:
    """Make every log record carry `conversation_id` and `turn_id` (idempotent). Wraps whatever
    record factory is installed now, so a project's own factory keeps working."""
    if _replaced:
        return
    base = logging.getLogRecordFactory()
    _replaced.append(base)

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        scope = CURRENT.get()
        if scope is None:
            record.conversation_id = record.turn_id = NONE
        else:
            record.conversation_id = scope.conversation_id
            turn_id = scope.turn_id
            record.turn_id = NONE if turn_id is None else turn_id
        return record

    logging.setLogRecordFactory(factory)


class Formatter(logging.Formatter):
    """A `logging.Formatter` whose format may name `%(conversation_id)s` and `%(turn_id)s`
    whatever made the record."""

    def format(self, record: logging.LogRecord) -> str:
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, NONE)
        return super().format(record)
