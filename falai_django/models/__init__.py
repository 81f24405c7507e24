"""The app's models, one module per domain (all in the `falai_django` app: same label, same
tables, one migration history):

- `host`     `Session` (and its admin proxy `Conversation`), `History` (the transcript and the
             outbox), `Wake`, `TurnRecord` (the durable inbox and run log), `TurnLock`,
             `EarlyStatus` (a channel's delivery status waiting for its row)
- `handoff`  `Assignment`, `DeskEntry`, `SavedReply`, `ReadMarker` (the desk)
- `flows`    `Flow`, `FlowVersion` (flows stored as data), `ReplayRun` and `ReplayResult`
             (the admin's replays of a version)
- `privacy`  `Erasure` (the proof that a conversation was erased, without its id)
- `observe`  `MetricTotal` (counters summed across processes) and `DailyTotal` (by day),
             `Heartbeat` (the dispatcher's), `Operations` (the admin page's entry)
- `sql`      the session row's statements, shared by the ORM store and the host's writer

Models import the engine (the blob is an engine session) and nothing above them: no domain, not
`conf`, not even inside a function. A `Flow`'s spec check and the running agent's reset belong to
the flows domain (`flows.saving`), which answers the model's signals (`Flow.clean` sends
`models.flows.checking_spec`).
"""

from falai_django.models.flows import Flow, FlowVersion, ReplayResult, ReplayRun
from falai_django.models.handoff import Assignment, DeskEntry, ReadMarker, SavedReply
from falai_django.models.host import (
    Conversation,
    EarlyStatus,
    History,
    HistoryItem,
    Session,
    TurnLock,
    TurnRecord,
    Wake,
)
from falai_django.models.observe import DailyTotal, Heartbeat, MetricTotal, Operations
from falai_django.models.privacy import Erasure

__all__ = ["Assignment", "Conversation", "DailyTotal", "DeskEntry", "EarlyStatus", "Erasure", "Flow", "FlowVersion", "Heartbeat",
           "History", "HistoryItem", "MetricTotal", "Operations", "ReadMarker", "ReplayResult", "ReplayRun", "SavedReply", "Session", "TurnLock", "TurnRecord",
           "Wake"]
