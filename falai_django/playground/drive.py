"""Driving a playground conversation by hand (no request objects): what the side panel shows
(`snapshot`), the next wake and firing it now (`fast_forward`), an event from "your system"
(`send_event`). The page's views and `manage.py falai_chat` both call these."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.utils import timezone

from falai_django import conf, host
from falai_django.handoff import HUMAN_KIND, HUMAN_REASON_PREFIX
from falai_django.host import conversations, sandbox
from falai_django.host.conversations import PendingWake
from falai_django.host.inbox import public_turn_error
from falai_django.playground import display


def provider_label(agent: Any = None) -> str:
    """Which provider answers, in words a newcomer understands."""
    agent = agent or conf.get_agent()
    provider = agent.provider
    name = getattr(provider, "name", type(provider).__name__)
    if name == "offline":
        return "offline (no GEMINI_API_KEY or other model key: deterministic replies marked [offline], no network)"
    model = getattr(provider, "model", None)
    base_url = getattr(provider, "base_url", None) if name == "local" else None
    if model and base_url:
        return f"{name} ({model} at {base_url})"
    return f"{name} ({model})" if model else str(name)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def next_wake(session_id: str, agent: Any = None) -> PendingWake | None:
    """The soonest wake the conversation waits on (the read model's rule), or None."""
    wakes = conversations.read_conversation(session_id, agent=agent).wakes
    return wakes[0] if wakes else None


def fast_forward(session_id: str, key: str | None = None, agent: Any = None) -> host.HostResult | None:
    """Fire the next wake (or the one named) now, through the host. None when nothing waits."""
    if key is None:
        wake = next_wake(session_id, agent)
        if wake is None:
            return None
        key = wake.key
    return host.handle(session_id, {"wake": key}, agent=agent)


def send_event(session_id: str, event: str, payload: Any = None, key: str | None = None,
               agent: Any = None) -> host.HostResult:
    """An event from "your system", with a fresh idempotency key unless one is given."""
    key = key or f"playground:{event}:{timezone.now().strftime('%Y%m%dT%H%M%S')}:{secrets.token_hex(3)}"
    return host.handle(session_id, {"event": event, "key": key, "payload": payload}, agent=agent)


def snapshot(session_id: str, agent: Any = None) -> dict[str, Any]:
    """Everything the side panel shows, JSON-ready."""
    from falai_django.models import History, TurnRecord

    agent = agent or conf.get_agent()
    read = conversations.read_conversation(session_id, agent=agent)
    session = read.session
    last = TurnRecord.objects.filter(conversation_id=session_id).exclude(
        status=TurnRecord.Status.RECEIVED).order_by("-id").first()
    history = [_history_item(row) for row in History.objects.filter(conversation_id=session_id).order_by("id")]
    runs = []
    if session is not None:
        for run in session.runs:
            runs.append({
                "id": run.id, "flow": run.flow_id, "step": run.step_id, "status": run.status,
                "waiting": run.waiting.to_json() if run.waiting is not None else None,
                "asked": dict(run.asked or {}),
            })
    return {
        "session_id": session_id,
        "provider": provider_label(agent),
        "exists": read.exists,
        "invalid": read.invalid,
        "version": session.version if session is not None else None,
        "data": dict(session.data) if session is not None else {},
        "runs": runs,
        "handoff": handoff_view(read.handoff),
        "last_turn": None if last is None else {
            "id": last.pk, "kind": last.kind, "input_key": last.input_key, "status": last.status,
            "llm_calls": last.llm_calls, "outcomes": last.outcomes, "started": last.started,
            "ended": last.ended, "skipped": last.skipped, "error": public_turn_error(last.error),
        },
        "wakes": [{"key": w.key, "at": _iso(w.at), "state": w.state, "at_display": display.when(w.at)}
                  for w in read.wakes],
        "history": history,
    }


def _history_item(row: Any) -> dict[str, Any]:
    """One transcript row as the page shows it: who wrote it, when, and what became of the send."""
    item: dict[str, Any] = {"role": row.role, "content": row.content, "kind": row.kind,
                            "at": display.when(row.at), "send_status": row.send_status}
    if row.kind == HUMAN_KIND:
        item["author"] = (row.message_key or "").removeprefix("human:") or "a human"
    if row.channel_message_id and row.channel_message_id.startswith(sandbox.CHANNEL_ID_PREFIX):
        item["sandbox"] = True  # recorded by the sandbox sender: what would have been sent
    return item


def handoff_view(handoff: dict[str, Any] | None) -> dict[str, Any] | None:
    """The handoff in force, in words for the page: who holds the conversation, how, since when."""
    if not handoff:
        return None
    reason = str(handoff.get("reason") or "")
    owner = handoff.get("owner") or (reason.removeprefix(HUMAN_REASON_PREFIX)
                                     if reason.startswith(HUMAN_REASON_PREFIX) else None)
    mode = handoff.get("mode") or "stop"
    what = f"Taken over by {owner}" if owner else f"Silenced ({reason})"
    meaning = {"stop": "the assistant says nothing",
               "skip": "talk and say steps are skipped; do steps still run",
               "understand": "the assistant is silent but fields keep landing"}.get(mode, mode)
    return {**handoff, "owner": owner, "mode": mode, "at_display": display.when(handoff.get("at")),
            "summary": f"{what} · mode {mode}: {meaning} · since {display.when(handoff.get('at'))}"}
