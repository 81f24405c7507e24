"""The admin for flows stored as data (issue 16), registered by `falai_django.admin`.

- The form edits the FlowSpec as JSON; `Flow.full_clean()` checks it against the agent's
  registries, so a `FlowConfigurationError` shows on the spec field (naming flow and step) and
  nothing is saved. Warnings become admin messages.
- The page shows a picture of the saved flow (`chart.flow_svg`), every saved version with
  who saved it, a diff of each against the current one, and a revert button (a POST form).
- "Where customers drop out" (`funnel.flow_funnel`) is one page per flow with a date range.
- A version's page offers "Replay recent conversations against this version" (`replay.runs`):
  the run goes to a django-q2 worker; its page shows the progress, then each conversation as
  same / different / needs model with the turn-by-turn differences side by side. Starting and
  reading a replay both need the flows' change permission.
"""

from __future__ import annotations

import difflib
import json
from datetime import date, timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    JsonResponse,
)
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from falai_django import conf, jsondepth
from falai_django.engine.spec import flow_authoring_schema
from falai_django.flows import chart, funnel, saving
from falai_django.models import Flow, FlowVersion, ReplayResult, ReplayRun

SPEC_TEMPLATE = {"id": "", "name": "", "on": [{"message": []}], "steps": []}
ENDING_LABELS = {"completed": _("completed"), "silenced": _("silenced"), "failed": _("failed"),
                 "abandoned": _("abandoned"), "in_progress": _("in progress")}


class PrettyJSONField(forms.JSONField):
    """The spec indented, so people can read and edit it. Text nested deeper than
    `FALAI["MAX_JSON_DEPTH"]` is a form error naming the limit, and is shown back as typed (the
    decoder and the indenting encoder recurse: such text must never reach them)."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and not self.disabled:
            try:
                jsondepth.check_text(value, "the spec")
            except jsondepth.JSONDepthError as exc:
                raise ValidationError(str(exc), code="invalid") from None
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        if isinstance(data, str) and not self.disabled and jsondepth.text_depth(data) > jsondepth.max_depth():
            return forms.fields.InvalidJSONInput(data)
        return super().bound_data(data, initial)

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class FlowForm(forms.ModelForm):
    spec = PrettyJSONField(
        label=_("Spec"), initial=SPEC_TEMPLATE,
        widget=forms.Textarea(attrs={"rows": 28, "cols": 100, "class": "falai-spec", "spellcheck": "false"}),
        help_text=_("The FlowSpec as JSON. Checked against the agent's fields, actions, events, conditions, "
                    "tools and flows when you save."))
    note = forms.CharField(label=_("Note"), required=False, max_length=255,
                           help_text=_("What changed, kept with this version."))

    class Meta:
        model = Flow
        fields = ["id", "name", "enabled", "position", "spec"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "id" in self.fields:  # typed once: the spec's "id" may say it instead
            self.fields["id"].required = False
            self.fields["id"].help_text = _('Leave it empty to use the spec\'s "id"; a spec without an "id" '
                                            "gets this one.")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean returns cleaned_data
        if "spec" not in data:
            return data
        given = data.get("id") if "id" in self.fields else self.instance.pk
        flow_id, data["spec"] = saving.one_id(given, data["spec"])
        if "id" in self.fields:
            if not flow_id:
                self.add_error("id", gettext('Give the flow an id, here or as the spec\'s "id".'))
            else:
                data["id"] = flow_id
                try:  # the spec's id goes through the same checks the field's does
                    self.fields["id"].run_validators(flow_id)
                except ValidationError as exc:
                    self.add_error("id", exc)
        return data


def _svg(spec: Any) -> str:
    return mark_safe(chart.flow_svg(spec))  # noqa: S308 - every text in it is escaped


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "head"
    return {"+": "add", "-": "del", "@": "at"}.get(line[:1], "")


def _who(version: FlowVersion) -> str:
    user = version.changed_by
    return user.get_username() if user is not None else gettext("(code or import)")


@admin.register(Flow)
class FlowAdmin(admin.ModelAdmin):
    form = FlowForm
    fields = ["id", "name", "enabled", "position", "spec", "note"]
    change_form_template = "admin/falai_django/flow/change_form.html"
    list_display = ["id", "name", "enabled", "position", "version", "updated_at", "changed_by"]
    list_filter = ["enabled"]
    search_fields = ["id", "name"]
    change_list_template = "admin/falai_django/flow/change_list.html"

    @admin.display(description=_("changed by"))
    def changed_by(self, obj: Flow) -> str:
        return obj.updated_by.get_username() if obj.updated_by is not None else "—"

    def get_readonly_fields(self, request: HttpRequest, obj: Flow | None = None) -> list[str]:
        # The id is the flow's identity in every session blob: fixed once saved.
        return ["id"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Flow, form: forms.ModelForm, change: bool) -> None:
        obj.save(changed_by=request.user, note=form.cleaned_data.get("note") or "")
        for warning in getattr(obj, "spec_warnings", []):
            self.message_user(request, warning, messages.WARNING)
        if not conf.get("FLOWS_DB"):
            self.message_user(request, gettext('FALAI["FLOWS_DB"] is off: the agent does not run database flows.'),
                              messages.WARNING)

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], add: bool = False,
                           change: bool = False, form_url: str = "", obj: Flow | None = None) -> HttpResponse:
        try:
            schema = flow_authoring_schema(conf.get_code_agent())
        except Exception as exc:  # noqa: BLE001 - an agent that cannot be built: the page still opens
            schema, context["schema_error"] = None, str(exc)
        context["spec_schema"] = schema
        if obj is not None:
            context["picture"] = _svg(obj.spec)
            context["versions"] = [
                {"v": v, "who": _who(v), "diff_url": reverse("admin:falai_django_flow_version",
                                                             args=[quote(obj.pk), v.version])}
                for v in obj.versions.select_related("changed_by")[:50]]
            context["funnel_url"] = reverse("admin:falai_django_flow_funnel", args=[quote(obj.pk)])
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/versions/<int:version>/", wrap(self.version_view), name="falai_django_flow_version"),
            path("<path:object_id>/versions/<int:version>/revert/", wrap(self.revert_view),
                 name="falai_django_flow_revert"),
            path("<path:object_id>/versions/<int:version>/replay/", wrap(self.replay_start_view),
                 name="falai_django_flow_replay_start"),
            path("<path:object_id>/replays/<int:run_id>/", wrap(self.replay_view), name="falai_django_flow_replay"),
            path("<path:object_id>/funnel/", wrap(self.funnel_view), name="falai_django_flow_funnel"),
            path("picture/", wrap(self.picture_view), name="falai_django_flow_picture"),
            path("check/", wrap(self.check_view), name="falai_django_flow_check"),
            path("draft/", wrap(self.draft_view), name="falai_django_flow_draft"),
            *super().get_urls(),
        ]

    def _flow(self, request: HttpRequest, object_id: str) -> Flow:
        flow = self.get_object(request, unquote(object_id))
        if flow is None:
            raise Http404(gettext("No flow %(id)s.") % {"id": object_id})
        if not self.has_view_permission(request, flow):
            raise PermissionDenied
        return flow

    def version_view(self, request: HttpRequest, object_id: str, version: int) -> HttpResponse:
        """One saved version: its picture, and its diff against the current spec."""
        flow = self._flow(request, object_id)
        old = flow.versions.filter(version=version).select_related("changed_by").first()
        if old is None:
            raise Http404(gettext("Flow %(id)s has no version %(v)s.") % {"id": flow.pk, "v": version})
        before = json.dumps(old.spec, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
        after = json.dumps(flow.spec, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
        lines = list(difflib.unified_diff(before, after, f"version {version}", f"version {flow.version} (current)",
                                          lineterm="", n=3))
        diff = format_html_join("", '<span class="{}">{}</span>', (
            (_diff_class(ln), ln) for ln in lines))
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "title": str(old), "flow": flow,
            "old": old, "who": _who(old), "diff": diff, "same": not lines, "picture": _svg(old.spec),
            "can_revert": self.has_change_permission(request, flow) and old.version != flow.version,
            "revert_url": reverse("admin:falai_django_flow_revert", args=[quote(flow.pk), version]),
            "change_url": reverse("admin:falai_django_flow_change", args=[quote(flow.pk)]),
            **self._replay_context(request, flow, version),
        }
        return TemplateResponse(request, "admin/falai_django/flow/version.html", context)

    # -- "Replay recent conversations against this version"
    def _replay_context(self, request: HttpRequest, flow: Flow, version: int) -> dict[str, Any]:
        from falai_django.replay.runs import MAX_LIMIT

        if not self.has_change_permission(request, flow):
            return {"can_replay": False}
        runs = ReplayRun.objects.filter(flow=flow, version=version).select_related("requested_by")[:10]
        return {
            "can_replay": True, "replay_max": MAX_LIMIT, "replay_scopes": ReplayRun.Scope.choices,
            "replay_start_url": reverse("admin:falai_django_flow_replay_start", args=[quote(flow.pk), version]),
            "replays": [{"run": run, "url": reverse("admin:falai_django_flow_replay", args=[quote(flow.pk), run.pk])}
                        for run in runs],
        }

    def replay_start_view(self, request: HttpRequest, object_id: str, version: int) -> HttpResponse:
        """Queue a replay of the latest conversations against `version` (POST: `scope`, `limit`)."""
        from falai_django.replay import runs

        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        flow = self._flow(request, object_id)
        if not self.has_change_permission(request, flow):
            raise PermissionDenied
        version_url = reverse("admin:falai_django_flow_version", args=[quote(flow.pk), version])
        scope = request.POST.get("scope") or ReplayRun.Scope.FLOW
        try:
            limit = int(request.POST.get("limit") or 50)
            run = runs.start(flow, version, user=request.user, scope=scope, limit=limit)
        except runs.ReplayError:
            raise Http404(gettext("Flow %(id)s has no version %(v)s.") % {"id": flow.pk, "v": version}) from None
        except ValueError:
            self.message_user(request, gettext("Not started: choose which conversations, and at most %(max)s of "
                                               "them.") % {"max": runs.MAX_LIMIT}, messages.ERROR)
            return HttpResponseRedirect(version_url)
        return HttpResponseRedirect(reverse("admin:falai_django_flow_replay", args=[quote(flow.pk), run.pk]))

    def replay_view(self, request: HttpRequest, object_id: str, run_id: int) -> HttpResponse:
        """A replay's progress, then its conversations; `?progress=1` answers the progress as JSON
        (the page polls it while the worker runs)."""
        from falai_django.replay.runs import stalled

        flow = self._flow(request, object_id)
        if not self.has_change_permission(request, flow):
            raise PermissionDenied
        run = ReplayRun.objects.filter(flow=flow, pk=run_id).select_related("requested_by").first()
        if run is None:
            raise Http404(gettext("Flow %(id)s has no replay %(n)s.") % {"id": flow.pk, "n": run_id})
        idle = stalled(run)
        if request.GET.get("progress"):
            return JsonResponse({"state": run.state, "finished": run.finished, "total": run.total, "done": run.done,
                                 "same": run.same, "different": run.different, "needs_model": run.needs_model,
                                 "errors": run.errors, "error": run.error,
                                 "stalled_s": int(idle.total_seconds()) if idle else None})
        results = list(run.results.all()) if run.finished else []
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "flow": flow, "run": run,
            "title": gettext("Replay against version %(v)s of %(flow)s") % {"v": run.version, "flow": flow},
            "stalled": idle, "results": [_result_row(r) for r in results],
            "change_url": reverse("admin:falai_django_flow_change", args=[quote(flow.pk)]),
            "version_url": reverse("admin:falai_django_flow_version", args=[quote(flow.pk), run.version]),
            "progress_url": f"{request.path}?progress=1",
        }
        return TemplateResponse(request, "admin/falai_django/flow/replay.html", context)

    def revert_view(self, request: HttpRequest, object_id: str, version: int) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        flow = self._flow(request, object_id)
        if not self.has_change_permission(request, flow):
            raise PermissionDenied
        change_url = reverse("admin:falai_django_flow_change", args=[quote(flow.pk)])
        try:
            flow.revert_to(version, changed_by=request.user)
        except FlowVersion.DoesNotExist:
            raise Http404(gettext("Flow %(id)s has no version %(v)s.") % {"id": flow.pk, "v": version}) from None
        except ValidationError as exc:
            for message in exc.message_dict.get("spec", exc.messages):
                self.message_user(request, gettext("Not reverted: %(why)s") % {"why": message}, messages.ERROR)
            return HttpResponseRedirect(change_url)
        self.log_change(request, flow, gettext("Reverted to version %(v)s.") % {"v": version})
        self.message_user(request, gettext("Reverted to version %(v)s: it is now version %(new)s.")
                          % {"v": version, "new": flow.version}, messages.SUCCESS)
        return HttpResponseRedirect(change_url)

    def picture_view(self, request: HttpRequest) -> HttpResponse:
        """The picture of the spec being edited (POST the JSON; the editor redraws with it)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            spec = jsondepth.loads(request.body or b"null", "the spec")
        except jsondepth.JSONDepthError as exc:
            return HttpResponse(str(exc), status=400, content_type="text/plain")
        except (ValueError, RecursionError):
            return HttpResponse(gettext("The spec is not valid JSON."), status=400, content_type="text/plain")
        return HttpResponse(chart.flow_svg(spec), content_type="image/svg+xml")

    def check_view(self, request: HttpRequest) -> HttpResponse:
        """What a save would say of the spec being edited (POST its text; `?id=` the id field, or
        `?object=` the stored flow being edited): `{"ok", "error", "warnings", "picture"}`, from
        `saving.check_text`, the check every save runs. The editor shows it as you type."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_view_permission(request):
            raise PermissionDenied
        pk = request.GET.get("object") or None
        if pk is not None and not Flow.objects.filter(pk=unquote(pk)).exists():
            return JsonResponse(saving.verdict(gettext("No flow %(id)s.") % {"id": pk}), status=404)
        return JsonResponse(saving.check_text(request.GET.get("id"), request.body, pk=unquote(pk) if pk else None))

    def funnel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        flow = self._flow(request, object_id)
        today = timezone.localdate()
        try:
            since = date.fromisoformat(request.GET.get("since") or (today - timedelta(days=30)).isoformat())
            until = date.fromisoformat(request.GET.get("until") or today.isoformat())
        except ValueError:
            self.message_user(request, gettext("Dates are written YYYY-MM-DD."), messages.ERROR)
            since, until = today - timedelta(days=30), today
        report = funnel.flow_funnel(flow.pk, since, until, spec=flow.spec)
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "flow": flow,
            "title": gettext("Where customers drop out: %(flow)s") % {"flow": flow},
            "report": report, "chart": mark_safe(funnel.funnel_svg(report)),  # noqa: S308 - escaped inside
            "since": since.isoformat(), "until": until.isoformat(),
            "change_url": reverse("admin:falai_django_flow_change", args=[quote(flow.pk)]),
            "rows": funnel.report_rows(report),
            "endings": [(key, ENDING_LABELS[key], report["ended"][key]) for key in funnel.ENDINGS],
        }
        return TemplateResponse(request, "admin/falai_django/flow/funnel.html", context)

    def draft_view(self, request: HttpRequest) -> HttpResponse:
        """Write a flow from a description: the agent's provider answers with a FlowSpec
        (`flow_spec_schema` as the structured output), which is checked and saved disabled."""
        from falai_django.flows import drafts

        if not self.has_add_permission(request):
            raise PermissionDenied
        description = (request.POST.get("description") or "").strip() if request.method == "POST" else ""
        error = None
        if request.method == "POST":
            if not description:
                error = gettext("Describe the flow first.")
            else:
                try:
                    flow = drafts.draft_flow(description, changed_by=request.user)
                except drafts.DraftError as exc:
                    error = gettext("No draft was saved: %(why)s") % {"why": exc}
                else:
                    self.log_addition(request, flow, gettext("Draft written from a description."))
                    self.message_user(request, gettext('Draft "%(id)s" saved, disabled: review it, then enable it.')
                                      % {"id": flow.pk}, messages.SUCCESS)
                    return HttpResponseRedirect(reverse("admin:falai_django_flow_change", args=[quote(flow.pk)]))
        return TemplateResponse(request, "admin/falai_django/flow/draft.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": gettext("Write a draft flow from a description"), "description": description, "error": error,
        }, status=400 if error else 200)


PART_LABELS = {"messages": _("messages"), "codes": _("codes"), "data": _("data"), "schedule": _("schedule"),
               "ended": _("ended")}


def _result_row(result: ReplayResult) -> dict[str, Any]:
    """One replayed conversation for the page: its link, and (when it is not the same) every turn
    with the five parts before and after, side by side."""
    row: dict[str, Any] = {"result": result, "turns": []}
    if result.status != ReplayResult.Status.SAME:
        for turn in (result.report or {}).get("turns") or []:
            diffs = set(turn.get("diffs") or [])
            row["turns"].append({
                "turn": turn, "parts": [
                    {"name": part, "label": label, "changed": part in diffs,
                     "before": _shown(part, (turn.get("before") or {}).get(part)),
                     "after": _shown(part, (turn.get("after") or {}).get(part))}
                    for part, label in PART_LABELS.items()]})
    try:
        row["url"] = reverse("admin:falai_django_conversation_change", args=[quote(result.conversation_id)])
    except NoReverseMatch:  # the conversation admin is not registered on this site
        row["url"] = ""
    return row


def _shown(part: str, value: Any) -> str:
    """A part as the page shows it: texts one per line, data as indented JSON; "—" when it is
    not known (a turn recorded before recordings kept the data)."""
    if value is None:
        return "—" if part == "data" else ""
    if part == "data":
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    if isinstance(value, list):
        return "\n".join(str(item) for item in value)
    return str(value)
