"""The admin for flows stored as data (issue 16), registered by `falai_django.admin`.

- The form edits the FlowSpec as JSON; `Flow.full_clean()` checks it against the agent's
  registries, so a `FlowConfigurationError` shows on the spec field (naming flow and step) and
  nothing is saved. Warnings become admin messages.
- The page shows a picture of the saved flow (`chart.flow_svg`), every saved version with
  who saved it, a diff of each against the current one, and a revert button (a POST form).
- "Where customers drop out" (`funnel.flow_funnel`) is one page per flow with a date range.
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
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from falai_django import conf, jsondepth
from falai_django.engine.spec import flow_spec_schema
from falai_django.flows import chart, funnel
from falai_django.models import Flow, FlowVersion

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
        label=_("spec"), initial=SPEC_TEMPLATE,
        widget=forms.Textarea(attrs={"rows": 28, "cols": 100, "class": "falai-spec", "spellcheck": "false"}),
        help_text=_("The FlowSpec as JSON. Checked against the agent's fields, actions, events, conditions, "
                    "tools and flows when you save."))
    note = forms.CharField(label=_("note"), required=False, max_length=255,
                           help_text=_("What changed, kept with this version."))

    class Meta:
        model = Flow
        fields = ["id", "name", "enabled", "position", "spec"]


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
        return obj.updated_by.get_username() if obj.updated_by_id else "—"

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
            schema = flow_spec_schema(conf.get_code_agent())
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
            path("<path:object_id>/funnel/", wrap(self.funnel_view), name="falai_django_flow_funnel"),
            path("picture/", wrap(self.picture_view), name="falai_django_flow_picture"),
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
        }
        return TemplateResponse(request, "admin/falai_django/flow/version.html", context)

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
