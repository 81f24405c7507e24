"""Handing a conversation to a human and back, and the desk where people work.

- `silence`, `take_over`, `give_back` (which resumes what the handoff silenced): the handoff's
             one write path. It lives in `host.silencing`, so that the host's facade can name
             it (`host.silence`, `host.unsilence` is `give_back`) without importing this package;
             these are the same function objects
- `actions`  a person's other operations on a conversation: reply as a human, fire a wake now
             (rebuilding its wakes is `host.requeue_wakes(session_ids=[...])`)
- `desk`     the desk's queues and unread counts; claim, assign, notes, resolve, retry a send; its
             transcript

It imports `host/` (the inbox, the turn, the outbox, the handoff's write path and the desk's rows
in `host.desk_rows`) and `models/`; `host/` never imports it.
The operations are importable from here: `from falai_django import handoff; handoff.take_over(...)`.
"""

from falai_django.handoff.actions import (
    HUMAN_KIND,
    HumanReply,
    fire_wake_now,
    load_session,
    outbound_event,
    reply_as_human,
)
from falai_django.host.silencing import (
    HUMAN_REASON_PREFIX,
    HandoffError,
    give_back,
    human_reason,
    silence,
    take_over,
    understand_by_default,
)

__all__ = ["HUMAN_KIND", "HUMAN_REASON_PREFIX", "HandoffError", "HumanReply", "fire_wake_now", "give_back",
           "human_reason", "load_session", "outbound_event", "reply_as_human", "silence",
           "take_over", "understand_by_default"]
