"""The playground: chat with the configured agent in the browser, and watch its state.

`/falai/playground/` (staff only; others go to the admin login). Replies stream in through the
host's SSE endpoint (`falai:message-stream`); after each turn the page reads `state/`: the
collected data, the runs, the last turn's outcomes and the pending wakes. "Fast-forward"
(`fast-forward/`) fires the conversation's next wake now, through the host, exactly as the
dispatcher would when its time comes.

The helpers (`snapshot`, `next_wake`, `fast_forward`, `send_event`) are plain functions over
`host`; `manage.py falai_chat` uses them too.

Playground conversations are sandboxed (`falai_django.host.sandbox`): their ids start with
`playground-`, and what they "send" never reaches `FALAI["SENDER"]`; each reply is marked as
recorded by the sandbox. The page shows the handoff in force (taken over, by whom, which mode)
and labels a human's replies as the human's.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from falai_django import conf, host, jsondepth
from falai_django.api.failures import answer_json_errors
from falai_django.host import sandbox
from falai_django.playground.drive import fast_forward, provider_label, send_event, snapshot

SESSION_KEY = "falai_playground_session"
DRIVE_PERMISSION = "falai_django.change_conversation"


def _turn_payload(result: host.HostResult | None) -> dict[str, Any]:
    if result is None:
        return {"fired": False, "messages": []}
    messages = [m.to_json() for m in result.result.messages] if result.result is not None else []
    return {"fired": True, "status": result.status, "changed": result.changed, "messages": messages,
            "error": result.error}


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


@answer_json_errors
@staff_member_required
@require_GET
def state(request: HttpRequest) -> JsonResponse:
    return JsonResponse(snapshot(_session_id(request)), json_dumps_params={"ensure_ascii": False})


def _refused(request: HttpRequest) -> JsonResponse | None:
    """Driving a conversation takes the same permission as the API."""
    if request.user.has_perm(DRIVE_PERMISSION):
        return None
    return JsonResponse({"error": "You need the 'change conversation' permission."}, status=403)


@answer_json_errors
@staff_member_required
@require_POST
def fast_forward_view(request: HttpRequest) -> JsonResponse:
    if refused := _refused(request):
        return refused
    sid = _session_id(request)
    payload = _turn_payload(fast_forward(sid))
    return JsonResponse({**payload, "state": snapshot(sid)}, json_dumps_params={"ensure_ascii": False})


@answer_json_errors
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
        payload = jsondepth.loads(raw, "the payload") if raw else None
    except jsondepth.JSONDepthError as exc:  # too deep to even parse safely: the limit, named
        return JsonResponse({"error": str(exc)}, status=400)
    except ValueError as exc:
        return JsonResponse({"error": f"The payload is not JSON: {exc}"}, status=400)
    try:
        result = send_event(sid, name, payload)
    except host.InputError as exc:  # checked before anything is written
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({**_turn_payload(result), "state": snapshot(sid)}, json_dumps_params={"ensure_ascii": False})


@staff_member_required
@require_POST
def reset_view(request: HttpRequest) -> HttpResponse:
    """Start a new conversation (the old one stays in the admin)."""
    request.session.pop(SESSION_KEY, None)
    return redirect("falai:playground")
