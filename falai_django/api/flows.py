"""The flows API (issue 16): read and save a stored flow, and where customers drop out.

    GET  flows                      the stored flows (no specs), by position
    GET  flows/<id>                 the stored flow (404 when there is none)
    PUT  flows/<id>                 {spec, name?, enabled?, position?}: checked like the admin's
                                    form; a bad spec is a 400 naming the flow and step, nothing saved;
                                    without `name`, the spec's own name is the flow's; a spec without
                                    an `id` gets the URL's
    GET  flows/<id>/funnel?since=YYYY-MM-DD&until=YYYY-MM-DD   the funnel (default: the last 30 days)

Reading needs `falai_django.view_flow`, saving `change_flow` (and `add_flow` for a new id); the
funnel is open to whoever may drive conversations.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from falai_django import conf
from falai_django.api import shapes
from falai_django.api.schema import answers, extend_method_schema
from falai_django.api.serializers import FlowSpecField, Text, text_problem
from falai_django.api.views import FalaiView
from falai_django.flows import funnel
from falai_django.flows.saving import one_id
from falai_django.models import Flow


class CanManageFlows(permissions.BasePermission):
    message = _("You need the flow permissions (view, change, add) for this.")

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and getattr(user, "is_active", False)
                    and user.has_perm("falai_django.view_flow"))


def _flow_json(flow: Flow) -> dict[str, Any]:
    return {"id": flow.pk, "name": flow.name, "enabled": flow.enabled, "position": flow.position,
            "version": flow.version, "spec": flow.spec,
            "updated_at": flow.updated_at.isoformat() if flow.updated_at else None,
            "updated_by": flow.updated_by.get_username() if flow.updated_by is not None else None}


class FlowInputSerializer(serializers.Serializer):
    """`PUT flows/<id>`'s body, for the schema (the view checks each value, strictly by type)."""

    spec = FlowSpecField()
    name = Text(max_length=255, required=False, allow_blank=True, help_text=_("Default: the spec's own `name`."))
    enabled = serializers.BooleanField(required=False)
    position = serializers.IntegerField(required=False, min_value=shapes.INT32_MIN, max_value=shapes.INT32_MAX)
    note = Text(required=False, allow_blank=True,
                help_text=_("Kept with the saved version (its first 255 characters)."))


_EXAMPLE_SPEC = {"spec": {"name": "Greeting", "steps": [{"id": "hello", "say": "Hello! How can I help?"}]},
                 "enabled": False, "note": "first draft"}
# A flow id as Django's `slug` converter reads it (what `SlugField` stores): any other id has no flow.
_FLOW_ID = OpenApiParameter("flow_id", {"type": "string", "maxLength": 255, "pattern": shapes.SLUG},
                            OpenApiParameter.PATH, description="A flow's id (a slug).")


def _is_flow_id(flow_id: str) -> bool:
    return len(flow_id) <= 255 and re.fullmatch(shapes.SLUG, flow_id) is not None  # the schema's own pattern


_FLOW_LIST = answers(
    {200: (inline_serializer("FlowList", {
        "count": serializers.IntegerField(),
        "results": serializers.ListField(child=serializers.DictField(), help_text=(
            "id, name, enabled, position, version, updated_at, updated_by: the stored flows by position.")),
    }), "The stored flows (their specs: GET flows/{flow_id}).")})


@extend_schema(tags=["flows"])
class FlowListView(FalaiView):
    """The stored flows, by position (without their specs)."""

    permission_classes = [CanManageFlows]

    @extend_method_schema(operation_id="flows_list", responses=_FLOW_LIST)
    def get(self, request: Any) -> Response:
        flows = [{k: v for k, v in _flow_json(flow).items() if k != "spec"}
                 for flow in Flow.objects.order_by("position", "id").select_related("updated_by")]
        return Response({"count": len(flows), "results": flows})


@extend_schema(tags=["flows"], parameters=[_FLOW_ID])
class FlowView(FalaiView):
    """A stored flow: read it, or save a new version."""

    permission_classes = [CanManageFlows]

    @extend_method_schema(responses=answers({200: (dict, "The stored flow.")},
                                            errors={404: "No stored flow with this id."}))
    def get(self, request: Any, flow_id: str) -> Response:
        if not _is_flow_id(flow_id):
            raise NotFound(_("No stored flow with this id."))
        flow = Flow.objects.filter(pk=flow_id).select_related("updated_by").first()
        if flow is None:
            raise NotFound(_("No stored flow with this id."))
        return Response(_flow_json(flow))

    @extend_method_schema(request=FlowInputSerializer, examples=[OpenApiExample("A greeting", value=_EXAMPLE_SPEC,
                                                                      request_only=True)],
                          responses=answers({200: (dict, "The version just saved, and `warnings`.")}))
    def put(self, request: Any, flow_id: str) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise ValidationError({"detail": [_("The body is a JSON object.")]})
        if not _is_flow_id(flow_id):
            raise ValidationError({"flow_id": [_("A flow id is a slug: letters, digits, - and _, at most 255.")]})
        flow = Flow.objects.filter(pk=flow_id).first()
        needed = "falai_django.change_flow" if flow is not None else "falai_django.add_flow"
        if not request.user.has_perm(needed):
            raise PermissionDenied(_("You need the permission %(p)s.") % {"p": needed})
        flow = flow or Flow(id=flow_id)
        problems = {name: [problem] for name, value in body.items() if (problem := text_problem(value))}
        if problems:  # PostgreSQL stores no NUL in text or jsonb: refused here, with its field
            raise ValidationError(problems)
        if "spec" not in body:
            raise ValidationError({"spec": [_("This field is required.")]})
        if not isinstance(body["spec"], dict):
            raise ValidationError({"spec": [_("The spec is a JSON object (a FlowSpec).")]})
        if "note" in body and not isinstance(body["note"], str):
            raise ValidationError({"note": [_("Must be a %(t)s.") % {"t": "str"}]})
        flow.spec = one_id(flow_id, body["spec"])[1]  # the URL says the id: the spec may leave it out
        for name, kind in (("name", str), ("enabled", bool), ("position", int)):
            if name in body:
                value = body[name]
                if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                    raise ValidationError({name: [_("Must be a %(t)s.") % {"t": kind.__name__}]})
                if isinstance(value, int) and not shapes.INT32_MIN <= value <= shapes.INT32_MAX:
                    # the column's range on every database (SQLite would store more, PostgreSQL fail)
                    raise ValidationError({name: [_("Must be between %(lo)s and %(hi)s.")
                                                  % {"lo": shapes.INT32_MIN, "hi": shapes.INT32_MAX}]})
                setattr(flow, name, value)
        if "name" not in body and (spec_name := flow.spec_name()) is not None:
            flow.name = spec_name  # a PUT without a name takes the spec's own
        try:
            flow.full_clean()
            flow.save(changed_by=request.user, note=str(body.get("note") or "")[:255])
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}) from exc
        return Response({**_flow_json(flow), "warnings": list(getattr(flow, "spec_warnings", []))})


# The days a funnel reads: 1970 to 9899, written YYYY-MM-DD (the day after `until` and the 30
# days before it stay in range).
_DAY = r"^\d{4}-\d{2}-\d{2}$"
_FIRST_DAY, _LAST_DAY = date(1970, 1, 1), date(9899, 12, 31)
_DAY_SCHEMA = {"type": "string", "format": "date", "pattern": shapes.ISO_TIME[:shapes.ISO_TIME.index("T")] + "$"}


def _date(request: Any, name: str, default: date) -> date:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        day = date.fromisoformat(text) if re.fullmatch(_DAY, text, re.ASCII) else None
    except ValueError:
        day = None
    if day is None or not _FIRST_DAY <= day <= _LAST_DAY:
        raise ValidationError({name: [_("A date written YYYY-MM-DD, from 1970-01-01 to 9899-12-31.")]})
    return day


_DAY_PARAMS = [
    OpenApiParameter("since", {**_DAY_SCHEMA}, description="The first day (default: 30 days before until). Not "
                     "after until: a 400 says so."),
    OpenApiParameter("until", {**_DAY_SCHEMA}, description="The last day (default: today)."),
]


@extend_schema(tags=["flows"], parameters=[_FLOW_ID, *_DAY_PARAMS], responses=answers(
    {200: (dict, "started, steps (reached, max_asks, median_seconds), fields (runs, asks), max_asks, ended.")},
    errors={400: "A day not written YYYY-MM-DD, out of 1970 to 9899, or since after until.",
            404: "No flow with this id: neither stored nor on the agent."}))
class FunnelView(FalaiView):
    """Where customers drop out of a flow, from the run log."""

    def get(self, request: Any, flow_id: str) -> Response:
        today = timezone.localdate()
        until = _date(request, "until", today)
        since = _date(request, "since", max(_FIRST_DAY, until - timedelta(days=30)))
        if since > until:
            raise ValidationError({"since": [_("since comes after until.")]})
        if not _is_flow_id(flow_id):
            raise NotFound(_("No flow with this id."))
        stored = Flow.objects.filter(pk=flow_id).values_list("spec", flat=True).first()
        spec = stored
        if spec is None:
            code_flow = conf.get_agent().flow(flow_id)
            if code_flow is None:
                raise NotFound(_("No flow with this id."))
            spec = {"steps": [{"id": s.id} for s in code_flow.steps]}
        return Response(funnel.flow_funnel(flow_id, since, until, spec=spec))
