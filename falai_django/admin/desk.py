"""The desk: the human team's view of the conversations, inside the admin (its look, its login,
its permissions). `ConversationAdmin` mixes `DeskAdminMixin` in; the URLs live under the
conversation admin:

- `desk/` — the queues (waiting for a human, mine, all open) with unread counts; the list and
  the tab title refresh every two seconds (`desk/poll/`).
- `desk/<id>/` — one conversation: the transcript (opens at the newest message; markers for
  take-over, give-back, silence, assignments and notes; failed sends with their error and
  "Retry send"), a reply box with saved replies, internal notes, claim / assign / resolve.
  `desk/<id>/poll/` (every second) redraws the transcript when it changed and marks it read
  while the tab is visible.
- `desk/<id>/<operation>/` — POST: claim, assign, reply, note, resolve, take-over, give-back,
  retry-send.

Permissions are the conversation page's: `view_conversation` (or `change_conversation`) to see
the desk; `handoff_conversation` to claim, assign, take over, give back and resolve;
`reply_conversation` to reply and retry a failed send; either of the two to write a note. Staff
with neither see the desk read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    JsonResponse,
)
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from falai_django import handoff
from falai_django.engine.errors import InvalidSessionError
from falai_django.handoff import desk
from falai_django.host import conversations, desk_rows
from falai_django.host.inputs import UnknownConversationError
from falai_django.models import SavedReply

if TYPE_CHECKING:
    from django.contrib import admin

    from falai_django.models import Conversation

    class _DeskBase(admin.ModelAdmin[Conversation]):
        """What the mixin uses of the admin it is mixed into (`ConversationAdmin`)."""

        def has_handoff_permission(self, request: HttpRequest, obj: Any = None) -> bool: ...
        def has_reply_permission(self, request: HttpRequest, obj: Any = None) -> bool: ...
else:
    _DeskBase = object

QUEUE_LABELS = {
    desk.WAITING: _("Waiting for a human"),
    desk.MINE: _("Mine"),
    desk.OPEN: _("All open"),
}


class DeskAdminMixin(_DeskBase):
    """The desk's views, for the conversation `ModelAdmin`."""

    desk_template = "admin/falai_django/desk/index.html"
    desk_conversation_template = "admin/falai_django/desk/conversation.html"

    # -- URLs ----------------------------------------------------------------------------------
    def desk_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        name = f"{self.opts.app_label}_{self.opts.model_name}_desk"
        return [
            path("desk/", wrap(self.desk_view), name=name),
            path("desk/poll/", wrap(self.desk_poll_view), name=f"{name}_poll"),
            path("desk/<path:object_id>/poll/", wrap(self.desk_conversation_poll), name=f"{name}_conversation_poll"),
            path("desk/<path:object_id>/do/<slug:operation>/", wrap(self.desk_operation_view),
                 name=f"{name}_operation"),
            path("desk/<path:object_id>/", wrap(self.desk_conversation_view), name=f"{name}_conversation"),
        ]

    def desk_url(self, suffix: str = "", *args: Any) -> str:
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}_desk{suffix}"
        return reverse(name, args=[quote(a) if i == 0 else a for i, a in enumerate(args)],
                       current_app=self.admin_site.name)

    # -- permissions -----------------------------------------------------------------------------
    def _desk_allowed(self, request: HttpRequest) -> None:
        if not self.has_view_permission(request):
            raise PermissionDenied

    def desk_permissions(self, request: HttpRequest) -> dict[str, bool]:
        can_handoff = self.has_handoff_permission(request)
        can_reply = self.has_reply_permission(request)
        return {"can_handoff": can_handoff, "can_reply": can_reply, "can_note": can_handoff or can_reply,
                "read_only": not (can_handoff or can_reply)}

    # -- the queues ------------------------------------------------------------------------------
    def _queue_name(self, request: HttpRequest) -> str:
        name = request.GET.get("q") or desk.WAITING
        if name not in desk.QUEUES:
            raise Http404(gettext("unknown queue %(name)s") % {"name": name})
        return name

    def _rows(self, request: HttpRequest, name: str) -> list[dict[str, Any]]:
        """The queue's rows as plain values (no model instances: the poll reads them every second)."""
        from django.contrib.auth import get_user_model

        assignee = f"assignment__assignee__{get_user_model().USERNAME_FIELD}"
        sentinel = "FALAI-ID"  # one reverse() for the page, not one per row
        link = self.desk_url("_conversation", sentinel)
        rows = []
        values = desk.queue(name, request.user).values("pk", "human_owner", "silenced_reason", "last_user_at",
                                                       "unread", assignee)
        for row in values[:desk.QUEUE_LIMIT]:
            rows.append({
                "id": row["pk"],
                "url": link.replace(sentinel, quote(row["pk"])),
                "owner": row[assignee] or row["human_owner"] or "",
                "reason": row["silenced_reason"] or "",
                "last_user_at": row["last_user_at"],
                "unread": row["unread"],
            })
        return rows

    def _queues(self, request: HttpRequest, current: str, rows: list[dict[str, Any]] | None = None,
                ) -> list[dict[str, Any]]:
        """The tabs; the current queue's count comes from its rows when the caller has them."""
        known = {current: [row["unread"] for row in rows]} if rows is not None else None
        counts = desk.queue_counts(request.user, known=known)
        return [{"name": name, "label": QUEUE_LABELS[name], "count": counts[name]["count"],
                 "unread": counts[name]["unread"], "current": name == current,
                 "url": f"{self.desk_url()}?q={name}"} for name in desk.QUEUES]

    def desk_view(self, request: HttpRequest) -> HttpResponse:
        self._desk_allowed(request)
        name = self._queue_name(request)
        rows = self._rows(request, name)
        queues = self._queues(request, name, rows)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": gettext("Desk"),
            "queues": queues,
            "queue": name,
            "rows": rows,
            "since": desk.queue_signature(rows, queues),
            "unread_total": next(q["unread"] for q in queues if q["name"] == desk.OPEN),
            "poll_url": f"{self.desk_url('_poll')}?q={name}",
            **self.desk_permissions(request),
        }
        return TemplateResponse(request, self.desk_template, context)

    def desk_poll_view(self, request: HttpRequest) -> JsonResponse:
        """The queue page's refresh. `since` is the signature of what the page shows (the last
        answer's `signature`): when the rows and tabs are still that, the answer says so and
        renders nothing (most polls of an open tab), which keeps twenty open tabs cheap."""
        self._desk_allowed(request)
        name = self._queue_name(request)
        rows = self._rows(request, name)
        queues = self._queues(request, name, rows)
        unread = next(q["unread"] for q in queues if q["name"] == desk.OPEN)
        signature = desk.queue_signature(rows, queues)
        if request.GET.get("since") == signature:
            return JsonResponse({"unchanged": True, "signature": signature, "unread": unread})
        html = render_to_string("admin/falai_django/desk/_rows.html", {"rows": rows}, request=request)
        tabs = render_to_string("admin/falai_django/desk/_tabs.html", {"queues": queues}, request=request)
        return JsonResponse({"rows": html, "tabs": tabs, "unread": unread, "signature": signature})

    # -- one conversation ------------------------------------------------------------------------
    def _conversation(self, request: HttpRequest, object_id: str) -> Any:
        self._desk_allowed(request)
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404(gettext("No conversation with this id."))
        return obj

    def _state(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        read = conversations.read_conversation(obj.pk, wakes=False)
        assignee = desk_rows.assignee_of(obj.pk)
        return {"handoff": read.handoff, "invalid": read.invalid, "assignee": assignee,
                "assignee_name": assignee.get_username() if assignee else "",
                "mine": assignee is not None and assignee.pk == request.user.pk}

    def _transcript_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        items, total = desk.transcript(obj.pk)
        return {"items": items, "total": total, "shown": sum(1 for i in items if i["type"] == "message"),
                "can_retry": self.has_reply_permission(request),
                "retry_url": self.desk_url("_operation", obj.pk, "retry-send")}

    def desk_conversation_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self._conversation(request, object_id)
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        transcript = self._transcript_context(request, obj)
        state = self._state(request, obj)
        desk.mark_read(request.user, obj.pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": gettext("Conversation %(id)s") % {"id": obj.pk},
            "conversation": obj,
            "transcript": transcript,
            "signature": desk.signature(transcript["items"]),
            "state": state,
            "saved_replies": list(SavedReply.objects.all()),
            "agents": list(desk.agents()),
            "understand_default": handoff.understand_by_default(),
            "desk_url": self.desk_url(),
            "page_url": reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[quote(obj.pk)],
                                current_app=self.admin_site.name),
            "poll_url": self.desk_url("_conversation_poll", obj.pk),
            "ops": {op.replace("-", "_"): self.desk_url("_operation", obj.pk, op) for op in DESK_OPERATIONS},
            "unread_total": desk.unread_total(request.user),
            **self.desk_permissions(request),
        }
        return TemplateResponse(request, self.desk_conversation_template, context)

    def desk_conversation_poll(self, request: HttpRequest, object_id: str) -> JsonResponse:
        obj = self._conversation(request, object_id)
        if request.GET.get("read") == "1":
            desk.mark_read(request.user, obj.pk)
        transcript = self._transcript_context(request, obj)
        state = self._state(request, obj)
        signature = desk.signature(transcript["items"], (state["handoff"] or {}).get("at", ""))
        body: dict[str, Any] = {"signature": signature, "unread": desk.unread_total(request.user)}
        if signature != request.GET.get("since"):
            body["transcript"] = render_to_string("admin/falai_django/desk/_transcript.html", transcript,
                                                  request=request)
            body["state"] = render_to_string("admin/falai_django/desk/_state.html", {"state": state},
                                             request=request)
        return JsonResponse(body)

    # -- operations (POST) -----------------------------------------------------------------------
    def desk_operation_view(self, request: HttpRequest, object_id: str, operation: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        spec = DESK_OPERATIONS.get(operation)
        if spec is None:
            raise Http404(operation)
        obj = self._conversation(request, object_id)
        allowed, run = spec
        if not allowed(self.desk_permissions(request)):
            raise PermissionDenied
        self.run_operation(request, obj, run)
        return HttpResponseRedirect(self.desk_url("_conversation", obj.pk))

    def run_operation(self, request: HttpRequest, obj: Any, run: Callable[..., str]) -> None:
        """Run one conversation operation: its note goes to the admin log and the user; a refusal
        (a broken blob, an unknown conversation, a desk or handoff error) changes nothing and says why."""
        try:
            note = run(self, request, obj)
        except InvalidSessionError as exc:
            self.message_user(request, gettext("Nothing was changed: this conversation's session blob is invalid "
                                               "(%(error)s).") % {"error": exc}, messages.ERROR)
        except (ValueError, UnknownConversationError) as exc:  # DeskError and HandoffError are ValueErrors
            self.message_user(request, gettext("Nothing was changed: %(error)s.") % {"error": exc}, messages.ERROR)
        else:
            self.log_change(request, obj, note)
            self.message_user(request, note, messages.SUCCESS)

    def _desk_claim(self, request: HttpRequest, obj: Any) -> str:
        desk.claim(obj.pk, request.user, understand=_understand(request))
        return gettext("You own this conversation now.")

    def _desk_assign(self, request: HttpRequest, obj: Any) -> str:
        assignee = desk.agents().filter(pk=request.POST.get("assignee") or 0).first()
        if assignee is None:
            raise desk.DeskError(gettext("pick a person with the handoff permission"))
        desk.assign(obj.pk, assignee, by=request.user, understand=_understand(request))
        return gettext("Assigned to %(user)s.") % {"user": assignee.get_username()}

    def _desk_reply(self, request: HttpRequest, obj: Any) -> str:
        text = request.POST.get("text", "").strip()
        if not text:
            raise desk.DeskError(gettext("a reply needs text"))
        reply = handoff.reply_as_human(obj.pk, text, author=request.user.get_username())
        desk.mark_read(request.user, obj.pk)
        if reply.event is None:
            self.message_user(request, gettext("The agent registers no outbound event, so the engine was not told "
                                               "of this reply: silence timers were not re-armed."), messages.WARNING)
        return gettext("Replied as %(author)s.") % {"author": request.user.get_username()}

    def _desk_note(self, request: HttpRequest, obj: Any) -> str:
        desk.add_note(obj.pk, request.user, request.POST.get("text", ""))
        return gettext("Note added (the customer does not see it).")

    def _desk_resolve(self, request: HttpRequest, obj: Any) -> str:
        desk.resolve(obj.pk, request.user, request.POST.get("note", ""))
        return gettext("Resolved: the conversation is back with the assistant.")

    def _desk_take_over(self, request: HttpRequest, obj: Any) -> str:
        handoff.take_over(obj.pk, request.user.get_username(), understand=_understand(request), by=request.user)
        return gettext("Took over as %(owner)s.") % {"owner": request.user.get_username()}

    def _desk_give_back(self, request: HttpRequest, obj: Any) -> str:
        handoff.give_back(obj.pk, by=request.user)
        return gettext("Gave the conversation back to the assistant.")

    def _desk_retry_send(self, request: HttpRequest, obj: Any) -> str:
        return retry_send_note(obj.pk, request.POST.get("item", ""))


def _understand(request: HttpRequest) -> bool | None:
    if "understand" not in request.POST and "understand_shown" not in request.POST:
        return None  # the form had no choice: the conversation's form, or the default
    return request.POST.get("understand") == "on"


def retry_send_note(session_id: str, item: str) -> str:
    """Re-queue a failed send (the desk and the conversation page share it)."""
    try:
        item_id = int(item)
    except (TypeError, ValueError):
        raise desk.DeskError(gettext("which message to retry is missing")) from None
    desk.retry_send(session_id, item_id)
    return gettext("Message %(item)s is queued to be sent again.") % {"item": item_id}


# operation slug -> (who may, runner)
DESK_OPERATIONS: dict[str, tuple[Callable[[dict[str, bool]], bool], Callable[..., str]]] = {
    "claim": (lambda p: p["can_handoff"], DeskAdminMixin._desk_claim),
    "assign": (lambda p: p["can_handoff"], DeskAdminMixin._desk_assign),
    "take-over": (lambda p: p["can_handoff"], DeskAdminMixin._desk_take_over),
    "give-back": (lambda p: p["can_handoff"], DeskAdminMixin._desk_give_back),
    "resolve": (lambda p: p["can_handoff"], DeskAdminMixin._desk_resolve),
    "reply": (lambda p: p["can_reply"], DeskAdminMixin._desk_reply),
    "note": (lambda p: p["can_note"], DeskAdminMixin._desk_note),
    "retry-send": (lambda p: p["can_reply"], DeskAdminMixin._desk_retry_send),
}
