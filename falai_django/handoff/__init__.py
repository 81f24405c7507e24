"""Handing a conversation to a human and back, and the desk where people work.

- `state`    the handoff and its one write path: `silence`, `take_over`, `give_back` (which resumes
             what the handoff silenced; `host.unsilence` is this function)
- `actions`  a person's other operations on a conversation: reply as a human, fire a wake now,
             rebuild its wakes
- `desk`     the desk's queues and unread counts; claim, assign, notes, resolve, retry a send; its
             transcript
- `records`  the desk's rows beside the session: handoff markers, notes and assignments

It imports `host/` (the inbox, the turn, the outbox) and `models/`; `host/` never imports it.
The operations are importable from here: `from falai_django import handoff; handoff.take_over(...)`.
"""

from falai_django.handoff.actions import (
    HUMAN_KIND,
    HumanReply,
    fire_wake_now,
    load_session,
    outbound_event,
    reply_as_human,
    requeue_wakes,
)
from falai_django.handoff.state import (
    HUMAN_REASON_PREFIX,
    HandoffError,
    give_back,
    human_reason,
    silence,
    take_over,
    understand_by_default,
)

__all__ = ["HUMAN_KIND", "HUMAN_REASON_PREFIX", "HandoffError", "HumanReply", "fire_wake_now", "give_back",
           "human_reason", "load_session", "outbound_event", "reply_as_human", "requeue_wakes", "silence",
           "take_over", "understand_by_default"]
