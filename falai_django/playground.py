"""The playground: chat with the configured agent in the browser, and watch its state.

`/falai/playground/` (staff only; others go to the admin login). Replies stream in through the
host's SSE endpoint (`falai:message-stream`); after each turn the page reads `state/`: the
collected data, the runs, the last turn's outcomes and the pending wakes. "Fast-forward"
(`fast-forward/`) fires the conversation's next wake now, through the host, exactly as the
dispatcher would when its time comes.

The helpers (`snapshot`, `next_wake`, `fast_forward`, `send_event`) are plain functions over
`host`; `manage.py falai_chat` uses them too.

Playground conversations are sandboxed (`falai_django.sandbox`): their ids start with
`playground-`, and what they "send" never reaches `FALAI["SENDER"]`; each reply is marked as
recorded by the sandbox. The page shows the handoff in force (taken over, by whom, which mode)
and labels a human's replies as the human's.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from . import conf, display, host, sandbox
from .handoff import HUMAN_KIND, HUMAN_REASON_PREFIX

SESSION_KEY = "falai_playground_session"
DRIVE_PERMISSION = "falai_django.change_conversation"


# ---------------------------------------------------------------------------------------------
# Helpers (no request objects)
# ---------------------------------------------------------------------------------------------


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


def pending_wakes(session_id: str, agent: Any = None) -> list[dict[str, Any]]:
    """The conversation's wakes not fired yet, soonest first: what the session waits on
    (`agent.pending_wakes`), with the queue's state when a row is queued. A queued row the session
    no longer waits on is stale (firing it changes nothing), so it is not listed."""
    from .models import Wake
    from .stores.django import DjangoStore

    rows = {
        w.key: {"key": w.key, "at": w.at, "state": w.state}
        for w in Wake.objects.filter(conversation_id=session_id).exclude(state=Wake.State.DONE)
    }
    session = DjangoStore().load(session_id)
    if session is not None:
        agent = agent or conf.get_agent()
        context = host.context_for(session_id, session, {})
        live = {entry.key: entry for entry in agent.pending_wakes(session=session, context=context)}
        rows = {key: rows.get(key) or {"key": key, "at": entry.at, "state": "computed"}
                for key, entry in live.items()}
    return sorted(rows.values(), key=lambda w: w["at"])


def next_wake(session_id: str, agent: Any = None) -> dict[str, Any] | None:
    wakes = pending_wakes(session_id, agent)
    return wakes[0] if wakes else None


def fast_forward(session_id: str, key: str | None = None, agent: Any = None) -> host.HostResult | None:
    """Fire the next wake (or the one named) now, through the host. None when nothing waits."""
    if key is None:
        wake = next_wake(session_id, agent)
        if wake is None:
            return None
        key = wake["key"]
    return host.handle(session_id, {"wake": key}, agent=agent)


def send_event(session_id: str, event: str, payload: Any = None, key: str | None = None,
               agent: Any = None) -> host.HostResult:
    """An event from "your system", with a fresh idempotency key unless one is given."""
    key = key or f"playground:{event}:{timezone.now().strftime('%Y%m%dT%H%M%S')}:{secrets.token_hex(3)}"
    return host.handle(session_id, {"event": event, "key": key, "payload": payload}, agent=agent)


def snapshot(session_id: str, agent: Any = None) -> dict[str, Any]:
    """Everything the side panel shows, JSON-ready."""
    from .models import History, TurnRecord
    from .stores.django import DjangoStore

    agent = agent or conf.get_agent()
    session = DjangoStore().load(session_id)
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
        "exists": session is not None,
        "version": session.version if session is not None else None,
        "data": dict(session.data) if session is not None else {},
        "runs": runs,
        "handoff": handoff_view(host.handoff_of(session)),
        "last_turn": None if last is None else {
            "id": last.pk, "kind": last.kind, "input_key": last.input_key, "status": last.status,
            "llm_calls": last.llm_calls, "outcomes": last.outcomes, "started": last.started,
            "ended": last.ended, "skipped": last.skipped, "error": last.error,
        },
        "wakes": [{**w, "at": _iso(w["at"]), "at_display": display.when(w["at"])}
                  for w in pending_wakes(session_id, agent)],
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


def _turn_payload(result: host.HostResult | None) -> dict[str, Any]:
    if result is None:
        return {"fired": False, "messages": []}
    messages = [m.to_json() for m in result.result.messages] if result.result is not None else []
    return {"fired": True, "status": result.status, "changed": result.changed, "messages": messages,
            "error": result.error}


# ---------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------


def _session_id(request: HttpRequest) -> str:
    sid = request.session.get(SESSION_KEY)
    if not sid:
        sid = f"{sandbox.PREFIX}{request.user.pk}-{secrets.token_hex(4)}"
        request.session[SESSION_KEY] = sid
    return sid


@staff_member_required
@require_GET
def page(request: HttpRequest) -> HttpResponse:
    sid = _session_id(request)
    can_drive = request.user.has_perm(DRIVE_PERMISSION)
    return render(request, "falai_django/playground.html", {
        "session_id": sid,
        "provider": provider_label(),
        "agent_name": getattr(conf.get_agent(), "name", "Agent"),
        "can_drive": can_drive,
        "stream_url": reverse("falai:message-stream", args=[sid]),
        "state_url": reverse("falai:playground-state"),
        "fast_forward_url": reverse("falai:playground-fast-forward"),
        "event_url": reverse("falai:playground-event"),
        "reset_url": reverse("falai:playground-reset"),
        "events": sorted(getattr(conf.get_agent(), "events", None) or {}),
        "snapshot": snapshot(sid),
    })


@staff_member_required
@require_GET
def state(request: HttpRequest) -> JsonResponse:
    return JsonResponse(snapshot(_session_id(request)), json_dumps_params={"ensure_ascii": False})


def _refused(request: HttpRequest) -> JsonResponse | None:
    """Driving a conversation takes the same permission as the API."""
    if request.user.has_perm(DRIVE_PERMISSION):
        return None
    return JsonResponse({"error": "You need the 'change conversation' permission."}, status=403)


@staff_member_required
@require_POST
def fast_forward_view(request: HttpRequest) -> JsonResponse:
    if refused := _refused(request):
        return refused
    sid = _session_id(request)
    payload = _turn_payload(fast_forward(sid))
    return JsonResponse({**payload, "state": snapshot(sid)}, json_dumps_params={"ensure_ascii": False})


@staff_member_required
@require_POST
def event_view(request: HttpRequest) -> JsonResponse:
    if refused := _refused(request):
        return refused
    sid = _session_id(request)
    name = (request.POST.get("event") or "").strip()
    raw = (request.POST.get("payload") or "").strip()
    if not name:
        return JsonResponse({"error": "Name the event."}, status=400)
    try:
        payload = json.loads(raw) if raw else None
    except ValueError as exc:
        return JsonResponse({"error": f"The payload is not JSON: {exc}"}, status=400)
    result = send_event(sid, name, payload)
    return JsonResponse({**_turn_payload(result), "state": snapshot(sid)}, json_dumps_params={"ensure_ascii": False})


@staff_member_required
@require_POST
def reset_view(request: HttpRequest) -> HttpResponse:
    """Start a new conversation (the old one stays in the admin)."""
    request.session.pop(SESSION_KEY, None)
    return redirect("falai:playground")


urlpatterns = [
    path("", page, name="playground"),
    path("state/", state, name="playground-state"),
    path("fast-forward/", fast_forward_view, name="playground-fast-forward"),
    path("event/", event_view, name="playground-event"),
    path("new/", reset_view, name="playground-reset"),
]
