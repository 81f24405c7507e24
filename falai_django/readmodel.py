"""What the API and the admin show of a conversation (reads only)."""

from __future__ import annotations

from typing import Any

from . import conf
from .loop import context_for
from .models import History, TurnRecord, Wake
from .silence import handoff_of
from .stores.django import DjangoStore


def session_state(session_id: str, *, history_limit: int = 50, agent: Any = None) -> dict[str, Any] | None:
    """The conversation as the API shows it: session, handoff, pending wakes, recent transcript."""
    session = DjangoStore().load(session_id)
    if session is None:
        return None
    agent = agent or conf.get_agent()
    computed = agent.pending_wakes(session=session, context=context_for(session_id, session, {}))
    stored_wakes = Wake.objects.filter(conversation_id=session_id).open().order_by("at")
    items = list(History.objects.filter(conversation_id=session_id).order_by("-id")[:history_limit])
    items.reverse()
    turns = TurnRecord.objects.filter(conversation_id=session_id).order_by("-id")[:20]
    return {
        "session": session.to_json(),
        "handoff": handoff_of(session),
        "pending_wakes": [w.to_json() for w in computed],
        "queued_wakes": [{"key": w.key, "at": w.at, "state": w.state} for w in stored_wakes],
        "history": [
            {"role": i.role, "content": i.content, "message_key": i.message_key, "at": i.at, "kind": i.kind,
             "send_status": i.send_status}
            for i in items
        ],
        "turns": [
            {"id": t.pk, "kind": t.kind, "input_key": t.input_key, "status": t.status, "replays": t.replays,
             "received_at": t.received_at, "error": t.error}
            for t in turns
        ],
    }
