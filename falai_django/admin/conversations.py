"""The Django admin for conversations: runs, outcomes, transcript, and handing one to a human.

- The list reads only the `Conversation` row's indexed columns (the blob is deferred) plus one
  correlated subquery for the next wake, so a page costs the same few queries on 100,000 rows.
  Status is derived from those columns: silenced (a handoff reason) > asking (a run asks) >
  waiting (live runs at rest) > idle.
- The page shows the transcript as a chat, the collected data, the live runs, the outcomes
  timeline from the run log (`TurnRecord`), the pending wakes and the raw blob, read-only. A
  blob that fails `Session.from_json` is shown as invalid and left exactly as stored.
- Handoff operations are POST forms (no JavaScript needed) on custom URLs; each one is guarded
  by a permission and written to Django's admin log. The work is done by `falai_django.handoff`.

Permissions: `falai_django.handoff_conversation` (take over, silence, give back, fire a wake,
re-enqueue wakes; the bulk actions) and `falai_django.reply_conversation` (reply as a human),
declared in `Conversation.Meta.permissions` (created by `migrate` like any model permission).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from falai_django import handoff, host
from falai_django.admin.desk import DeskAdminMixin, retry_send_note
from falai_django.admin.filters import (
    ConversationChangeList,
    FlowFilter,
    OwnerFilter,
    SilencedFilter,
    StatusFilter,
)
from falai_django.admin.sections import as_time, compact_json, outcomes_timeline, pretty_json, runs_of
from falai_django.engine.errors import InvalidSessionError
from falai_django.handoff import desk
from falai_django.host import conversations
from falai_django.host.conversations import STATUS_LABELS, conversation_status
from falai_django.host.counting import EstimatingPaginator
from falai_django.models import Assignment, Conversation, DeskEntry, Erasure, ReadMarker, SavedReply, Wake

HANDOFF_CODENAME = "handoff_conversation"  # declared in Conversation.Meta.permissions
REPLY_CODENAME = "reply_conversation"
ERASE_CODENAME = "erase_conversation"


def _next_wake() -> Subquery:
    pending = Wake.objects.filter(conversation=OuterRef("pk")).exclude(state=Wake.State.DONE).order_by("at")
    return Subquery(pending.values("at")[:1])


# ---------------------------------------------------------------------------------------------
# The admin
# ---------------------------------------------------------------------------------------------


@admin.register(Conversation)
class ConversationAdmin(DeskAdminMixin, admin.ModelAdmin):
    change_form_template = "admin/falai_django/conversation/change_form.html"
    list_display = (
        "id",
        "status_badge",
        "flow_step",
        "handoff_state",  # the owner and the silence reason in one column: the list fits 1400 px
        "last_user",
        "last_assistant",
        "next_wake",
    )
    list_filter = (StatusFilter, FlowFilter, OwnerFilter, SilencedFilter)
    search_fields = ("id",)  # the search itself is `host.conversations.search` (get_search_results)
    search_help_text = _("Search by conversation id (a phone number), a collected value (a name) or words "
                         "from the transcript.")
    ordering = conversations.LIST_ORDER  # newest customer message first (PostgreSQL: falai_sess_recent)
    list_per_page = 50
    paginator = EstimatingPaginator  # "about 1,000,000 conversations": no COUNT over the table
    show_full_result_count = False
    actions = ("silence_selected", "give_back_selected", "erase_selected")
    fields = (
        ("id", "status_badge"),
        ("flow_step", "waiting_until"),
        ("human_owner", "silenced_reason"),
        ("last_user_at", "last_assistant_at"),
        ("version", "created_at", "updated_at"),
    )
    readonly_fields = tuple(name for line in fields for name in line)

    # -- permissions: the blob is never edited here; handoff has its own permissions ------
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_handoff_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.{HANDOFF_CODENAME}")

    def has_reply_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.{REPLY_CODENAME}")

    def has_erase_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.{ERASE_CODENAME}")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting the row would leave the run log, the desk's records and the replays behind,
        # with no audit: a conversation goes only by erasure (`erase_selected`).
        return False

    # -- the list ---------------------------------------------------------------------------
    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(next_wake_at=_next_wake())

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ConversationChangeList

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str,
                           ) -> tuple[QuerySet, bool]:
        return conversations.search(queryset, search_term), False

    @admin.display(description=_("status"))
    def status_badge(self, obj: Conversation) -> str:
        status = conversation_status(obj)
        return format_html('<span class="falai-status falai-status-{}">{}</span>', status, STATUS_LABELS[status])

    @admin.display(description=_("flow · step"), ordering="asking_flow")
    def flow_step(self, obj: Conversation) -> str:
        if not obj.asking_flow:
            return self.get_empty_value_display()  # a readonly field would print None
        return f"{obj.asking_flow} · {obj.asking_step}" if obj.asking_step else obj.asking_flow

    @admin.display(description=_("Handoff"), ordering="human_owner")
    def handoff_state(self, obj: Conversation) -> str:
        """Who owns it, over why it is silenced: the reason shows two lines, all of it in its title
        (and on the conversation page)."""
        if not obj.human_owner and not obj.silenced_reason:
            return self.get_empty_value_display()
        owner = format_html('<strong class="falai-owner">{}</strong>', obj.human_owner) if obj.human_owner else ""
        reason = (format_html('<span class="falai-clip" title="{}">{}</span>', obj.silenced_reason, obj.silenced_reason)
                  if obj.silenced_reason else "")
        return format_html("{}{}", owner, reason)

    @admin.display(description=_("last user message at"), ordering="last_user_at")
    def last_user(self, obj: Conversation) -> str:
        return self._when(obj.last_user_at)

    @admin.display(description=_("last assistant message at"), ordering="last_assistant_at")
    def last_assistant(self, obj: Conversation) -> str:
        return self._when(obj.last_assistant_at)

    @admin.display(description=_("next wake"), ordering="next_wake_at")
    def next_wake(self, obj: Conversation) -> str:
        return self._when(getattr(obj, "next_wake_at", None))

    def _when(self, value: datetime | None) -> str:
        """A time as Django's own list columns write it (the project's DATETIME_FORMAT), allowed to
        wrap between its words only: "Dec. 7, 2026," over "2:50 p.m.", never inside "2026-12-07"."""
        if value is None:
            return self.get_empty_value_display()
        text = formats.localize(timezone.template_localtime(value))  # type: ignore[attr-defined]  # Django's, missing from django-stubs
        return format_html_join(" ", '<span class="falai-word">{}</span>', ((word,) for word in text.split()))

    # -- the page ---------------------------------------------------------------------------
    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if obj is not None and self.has_view_or_change_permission(request, obj):
            context.update(self.conversation_context(request, obj))
        return super().change_view(request, object_id, form_url, extra_context=context)

    def conversation_context(self, request: HttpRequest, obj: Conversation) -> dict[str, Any]:
        read = conversations.read_conversation(obj.pk)
        session = read.session
        # the messages with the handoff markers and notes, as the desk shows them
        timeline, transcript_total = desk.transcript(obj.pk)
        handoff_state = read.handoff
        wakes = [{"key": w.key, "at": w.at, "computed": w.entry is not None,
                  "state": Wake.State(w.state).label if w.queued else ""} for w in read.wakes]
        return {
            "falai": {
                "status": conversation_status(obj),
                "status_label": STATUS_LABELS[conversation_status(obj)],
                "invalid": read.invalid,
                "handoff": handoff_state,
                "handoff_at": as_time(handoff_state.get("at")) if handoff_state else None,
                "timeline": timeline,
                "transcript": [item for item in timeline if item["type"] == "message"],
                "transcript_total": transcript_total,
                "retry_url": self.operation_url(obj.pk, "retry-send"),
                "desk_url": self.desk_url("_conversation", obj.pk),
                "data": [(name, compact_json(value)) for name, value in session.data.items()] if session else [],
                "runs": runs_of(session) if session else [],
                "outcomes": outcomes_timeline(obj.pk),
                "wakes": wakes,
                "wakes_problem": read.wakes_problem,
                "raw": pretty_json(read.blob),
                "can_handoff": self.has_handoff_permission(request, obj),
                "can_reply": self.has_reply_permission(request, obj),
                "erase_url": self.erase_url(obj.pk) if self.has_erase_permission(request, obj) else None,
                "understand_default": handoff.understand_by_default(),
                "me": request.user.get_username(),
                "urls": {op.replace("-", "_"): self.operation_url(obj.pk, op) for op in OPERATIONS},
            }
        }

    # -- handoff operations (POST only) -------------------------------------------------------
    def get_urls(self) -> list[Any]:
        own = [
            path(
                "<path:object_id>/handoff/<slug:operation>/",
                self.admin_site.admin_view(self.operation_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_handoff",
            ),
            path(
                "<path:object_id>/erase/",
                self.admin_site.admin_view(self.erase_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_erase",
            ),
        ]
        return self.desk_urls() + own + super().get_urls()  # before the catch-all "<path:object_id>/" redirect

    def operation_url(self, pk: str, operation: str) -> str:
        return reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_handoff", args=[quote(pk), operation],
                       current_app=self.admin_site.name)

    def change_url(self, pk: str, anchor: str = "") -> str:
        url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[quote(pk)],
                      current_app=self.admin_site.name)
        return url + (f"#{anchor}" if anchor else "")

    def operation_view(self, request: HttpRequest, object_id: str, operation: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        spec = OPERATIONS.get(operation)
        if spec is None:
            raise Http404(operation)
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]  # ModelAdmin's, missing from django-stubs
                request, self.opts, object_id)
        permission, run, anchor = spec
        if not self.has_view_permission(request, obj) or not permission(self, request, obj):
            raise PermissionDenied
        self.run_operation(request, obj, run)
        return HttpResponseRedirect(self.change_url(obj.pk, anchor))

    def erase_url(self, pk: str) -> str:
        return reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_erase", args=[quote(pk)],
                       current_app=self.admin_site.name)

    def erase_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The page's "Erase everywhere…": GET asks, POST erases (`host.erase`) and goes back to
        the list; a turn running leaves it alone and says so on the page."""
        pk = unquote(object_id)
        if not self.has_erase_permission(request):
            raise PermissionDenied
        obj = self.get_object(request, pk)
        if obj is None:
            return self._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]  # ModelAdmin's, missing from django-stubs
                request, self.opts, object_id)
        if request.method == "POST":
            if self._erase(request, [obj.pk]):  # a turn was running: still there
                return HttpResponseRedirect(self.change_url(obj.pk))
            return HttpResponseRedirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist",
                                                current_app=self.admin_site.name))
        return TemplateResponse(request, "admin/falai_django/conversation/erase.html", {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "object": obj,
            "title": gettext("Erase this conversation everywhere?"),
            "change_url": self.change_url(obj.pk),
        })

    def _take_over(self, request: HttpRequest, obj: Conversation) -> str:
        owner = request.user.get_username()
        understand = request.POST.get("understand") == "on"
        handoff.take_over(obj.pk, owner, understand=understand, by=request.user)
        if understand:
            return gettext("Took over as %(owner)s (fields keep landing).") % {"owner": owner}
        return gettext("Took over as %(owner)s.") % {"owner": owner}

    def _silence(self, request: HttpRequest, obj: Conversation) -> str:
        reason = request.POST.get("reason", "").strip()
        mode = request.POST.get("mode") or "stop"
        if mode not in SILENCE_MODES:
            raise handoff.HandoffError(gettext("unknown silence form %(mode)s") % {"mode": mode})
        if not reason:
            raise handoff.HandoffError(gettext("a silence needs a reason"))
        handoff.silence(obj.pk, reason, mode=mode, by=request.user)
        return gettext("Silenced: %(reason)s (%(mode)s).") % {"reason": reason, "mode": SILENCE_MODES[mode]}

    def _give_back(self, request: HttpRequest, obj: Conversation) -> str:
        handoff.give_back(obj.pk, by=request.user)
        return gettext("Gave the conversation back to the assistant.")

    def _reply(self, request: HttpRequest, obj: Conversation) -> str:
        text = request.POST.get("text", "").strip()
        if not text:
            raise handoff.HandoffError(gettext("a reply needs text"))
        reply = handoff.reply_as_human(obj.pk, text, author=request.user.get_username())
        if reply.event is None:
            self.message_user(request, gettext("The agent registers no outbound event, so the engine was not told "
                                               "of this reply: silence timers were not re-armed."), messages.WARNING)
        return gettext("Replied as %(author)s: %(text)s") % {"author": request.user.get_username(), "text": text}

    def _retry_send(self, request: HttpRequest, obj: Conversation) -> str:
        return retry_send_note(obj.pk, request.POST.get("item", ""))

    def _fire_wake(self, request: HttpRequest, obj: Conversation) -> str:
        key = request.POST.get("key", "")
        result = handoff.fire_wake_now(obj.pk, key)
        codes = ", ".join(o.code for o in (result.result.outcomes if result.result else []) if o.code)
        if result.changed:
            return gettext("Fired wake %(key)s now.") % {"key": key}
        if result.status in ("retry", "failed"):
            return gettext("Fired wake %(key)s now; the turn could not finish (%(status)s: %(error)s).") % {
                "key": key, "status": result.status, "error": result.error}
        return gettext("Fired wake %(key)s now; it changed nothing (%(codes)s).") % {
            "key": key, "codes": codes or result.status}

    def _requeue(self, request: HttpRequest, obj: Conversation) -> str:
        report = host.requeue_wakes(session_ids=[obj.pk])
        if report.get("failed"):
            raise handoff.HandoffError(gettext("the agent could not compute this conversation's wakes"))
        return ngettext("Re-enqueued %(count)d wake.", "Re-enqueued %(count)d wakes.", report["wakes"]) % {
            "count": report["wakes"]}

    # -- bulk actions on the list -----------------------------------------------------------
    @admin.action(permissions=["handoff"], description=_("Silence the selected conversations"))
    def silence_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        reason = request.POST.get("reason", "").strip()
        mode = request.POST.get("mode") or "stop"
        if request.POST.get("confirm") != "yes" or not reason or mode not in SILENCE_MODES:
            return TemplateResponse(request, "admin/falai_django/conversation/silence_selected.html", {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": gettext("Silence conversations"),
                "select_across": request.POST.get("select_across", "0"),
                "count": queryset.count(),
                "ids": [] if request.POST.get("select_across") == "1" else list(queryset.values_list("pk", flat=True)),
                "modes": list(SILENCE_MODES.items()),
                "reason": reason,
                "mode": mode,
                "missing_reason": request.POST.get("confirm") == "yes" and not reason,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            })
        note = gettext("Silenced: %(reason)s (%(mode)s).") % {"reason": reason, "mode": SILENCE_MODES[mode]}
        self._bulk(request, queryset, lambda pk: handoff.silence(pk, reason, mode=mode), note)
        return None

    @admin.action(permissions=["handoff"], description=_("Give the selected conversations back to the assistant"))
    def give_back_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._bulk(request, queryset.filter(silenced_reason__isnull=False), handoff.give_back,
                   gettext("Gave the conversation back to the assistant."))

    @admin.action(permissions=["erase"], description=_("Erase the selected conversations everywhere"))
    def erase_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        """Erase each selected conversation (`host.erase`), one transaction and one audit row each.
        No admin log line is written: it would keep the id the erasure removes."""
        self._erase(request, list(queryset.order_by().values_list("pk", flat=True)))

    def _erase(self, request: HttpRequest, pks: list[str]) -> list[str]:
        """Erase each conversation (`host.erase`) and say what happened; returns the ones left
        alone because a turn of theirs was running."""
        erased, busy = 0, []
        for pk in pks:
            try:
                host.erase(pk, user=request.user, via=Erasure.Via.ADMIN)
            except host.ConversationBusyError:
                busy.append(pk)
            except host.UnknownConversationError:
                continue  # erased meanwhile (another tab, the API)
            else:
                erased += 1
        if erased:
            self.message_user(request, ngettext(
                "Erased %(count)d conversation everywhere; the erasures list keeps its audit row.",
                "Erased %(count)d conversations everywhere; the erasures list keeps their audit rows.", erased)
                % {"count": erased}, messages.SUCCESS)
        if busy:
            self.message_user(request, gettext("Not erased, a turn was running: %(ids)s. Try again in a few seconds.")
                              % {"ids": ", ".join(busy)}, messages.ERROR)
        return busy

    def _bulk(self, request: HttpRequest, queryset: QuerySet, operation: Callable[[str], Any], note: str) -> None:
        done: list[Conversation] = []
        failed: list[str] = []
        for obj in queryset.defer("blob"):
            try:
                operation(obj.pk)
            except (InvalidSessionError, handoff.HandoffError, ValueError, host.UnknownConversationError):
                failed.append(obj.pk)
            else:
                done.append(obj)
        if done:
            assert request.user.pk is not None  # the admin's views run for a logged-in staff user
            LogEntry.objects.log_actions(user_id=request.user.pk, queryset=done, action_flag=CHANGE,
                                         change_message=note, single_object=False)
            self.message_user(request, ngettext("%(count)d conversation: %(note)s",
                                                "%(count)d conversations: %(note)s", len(done))
                              % {"count": len(done), "note": note}, messages.SUCCESS)
        if failed:
            self.message_user(request, gettext("Left unchanged (invalid session blob): %(ids)s")
                              % {"ids": ", ".join(failed)}, messages.ERROR)


SILENCE_MODES = {
    "stop": _("stop: the whole run stops (zero model calls)"),
    "skip": _("skip: talk and say steps are skipped, do steps still run"),
    "understand": _("understand: fields keep landing, nothing is said"),
}

# operation slug -> (permission check, runner, anchor on the page to return to)
OPERATIONS: dict[str, tuple[Callable[..., bool], Callable[..., str], str]] = {
    "take-over": (ConversationAdmin.has_handoff_permission, ConversationAdmin._take_over, "handoff"),
    "silence": (ConversationAdmin.has_handoff_permission, ConversationAdmin._silence, "handoff"),
    "give-back": (ConversationAdmin.has_handoff_permission, ConversationAdmin._give_back, "handoff"),
    "reply": (ConversationAdmin.has_reply_permission, ConversationAdmin._reply, "transcript"),
    "fire-wake": (ConversationAdmin.has_handoff_permission, ConversationAdmin._fire_wake, "wakes"),
    "requeue-wakes": (ConversationAdmin.has_handoff_permission, ConversationAdmin._requeue, "wakes"),
    "retry-send": (ConversationAdmin.has_reply_permission, ConversationAdmin._retry_send, "transcript"),
}


# ---------------------------------------------------------------------------------------------
# The desk's models: saved replies are the team's to edit; the rest is shown read-only
# ---------------------------------------------------------------------------------------------


@admin.register(SavedReply)
class SavedReplyAdmin(admin.ModelAdmin):
    list_display = ("title", "text")
    search_fields = ("title", "text")


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(DeskEntry)
class DeskEntryAdmin(_ReadOnlyAdmin):
    list_display = ("conversation", "kind", "author_name", "text", "at")
    list_filter = ("kind",)
    search_fields = ("conversation__id", "text")


@admin.register(Assignment)
class AssignmentAdmin(_ReadOnlyAdmin):
    list_display = ("conversation", "assignee", "assigned_at")


@admin.register(ReadMarker)
class ReadMarkerAdmin(_ReadOnlyAdmin):
    list_display = ("user", "conversation", "last_read_id")


@admin.register(Erasure)
class ErasureAdmin(_ReadOnlyAdmin):
    """The audit rows of erased conversations: who, when, how, how many rows; the id only as its
    HMAC. Searching for a conversation id finds its row (the search computes the HMAC)."""

    list_display = ("at", "username", "via", "session_hash", "rows")
    list_filter = ("via",)
    search_fields = ("session_hash",)
    search_help_text = _("Paste a conversation id to see whether and when it was erased.")
    readonly_fields = ("at", "user", "username", "via", "session_hash", "deleted")
    fields = readonly_fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the proof stays

    @admin.display(description=_("rows deleted"))
    def rows(self, obj: Erasure) -> int:
        return sum(obj.deleted.values()) if isinstance(obj.deleted, dict) else 0

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(session_hash__in=[host.audit_hash(term), term.lower()]), False
