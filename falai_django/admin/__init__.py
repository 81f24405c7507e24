"""The Django admin of the app, one module per area (Django's `autodiscover` imports this package,
and each module registers its own `ModelAdmin` classes):

- `conversations`  the conversation list and page: runs, outcomes, transcript, handoff actions;
                   the desk's read-only records (saved replies, desk entries, assignments, reads)
- `desk`           the human desk inside the conversation admin: queues, one conversation, the live
                   poll, claim / assign / notes / resolve / retry send
- `flows`          flows stored as data: the form with its live check, the picture, versions, funnel
- `operations`     the "Operations" page: backlog, heartbeat, turns, model latency, tokens and money

It imports the domains (`host/`, `handoff/`, `flows/`) and `models/`; nothing imports the admin.
"""

from falai_django.admin import conversations, desk, flows, operations  # noqa: F401 - each registers its admin classes
