"""The flows API (issue 16): read and save a stored flow, and where customers drop out.

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

from datetime import date, timedelta
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from falai_django import conf
from falai_django.api.schema import answers
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


_FLOW_BODY = inline_serializer("FlowInput", {
    "spec": serializers.JSONField(help_text="The FlowSpec; its `id` is the flow's id (left out, the URL's goes in)."),
    "name": serializers.CharField(required=False, help_text="Default: the spec's own `name`."),
    "enabled": serializers.BooleanField(required=False),
    "position": serializers.IntegerField(required=False),
    "note": serializers.CharField(required=False, help_text="Kept with the saved version."),
})


@extend_schema(tags=["flows"], request=_FLOW_BODY, responses=answers(
    {200: (dict, "The stored flow (after a PUT: the version just saved, and `warnings`).")},
    errors={404: "No stored flow with this id (GET)."}))
class FlowView(FalaiView):
    """A stored flow: read it, or save a new version."""

    permission_classes = [CanManageFlows]

    def get(self, request: Any, flow_id: str) -> Response:
        flow = Flow.objects.filter(pk=flow_id).select_related("updated_by").first()
        if flow is None:
            raise NotFound(_("No stored flow with this id."))
        return Response(_flow_json(flow))

    def put(self, request: Any, flow_id: str) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise ValidationError({"detail": [_("The body is a JSON object.")]})
        flow = Flow.objects.filter(pk=flow_id).first()
        needed = "falai_django.change_flow" if flow is not None else "falai_django.add_flow"
        if not request.user.has_perm(needed):
            raise PermissionDenied(_("You need the permission %(p)s.") % {"p": needed})
        flow = flow or Flow(id=flow_id)
        if "spec" not in body:
            raise ValidationError({"spec": [_("This field is required.")]})
        flow.spec = one_id(flow_id, body["spec"])[1]  # the URL says the id: the spec may leave it out
        for name, kind in (("name", str), ("enabled", bool), ("position", int)):
            if name in body:
                value = body[name]
                if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                    raise ValidationError({name: [_("Must be a %(t)s.") % {"t": kind.__name__}]})
                setattr(flow, name, value)
        if "name" not in body and (spec_name := flow.spec_name()) is not None:
            flow.name = spec_name  # a PUT without a name takes the spec's own
        try:
            flow.full_clean()
            flow.save(changed_by=request.user, note=str(body.get("note") or "")[:255])
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}) from exc
        return Response({**_flow_json(flow), "warnings": list(getattr(flow, "spec_warnings", []))})


def _date(request: Any, name: str, default: date) -> date:
    text = request.query_params.get(name)
    if not text:
        return default
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValidationError({name: [_("A date written YYYY-MM-DD.")]}) from None


@extend_schema(tags=["flows"], responses=answers(
    {200: (dict, "started, steps (reached, max_asks, median_seconds), fields (runs, asks), max_asks, ended.")},
    errors={404: "No flow with this id: neither stored nor on the agent."}))
class FunnelView(FalaiView):
    """Where customers drop out of a flow, from the run log."""

    def get(self, request: Any, flow_id: str) -> Response:
        today = timezone.localdate()
        until = _date(request, "until", today)
        since = _date(request, "since", until - timedelta(days=30))
        if since > until:
            raise ValidationError({"since": [_("since comes after until.")]})
        stored = Flow.objects.filter(pk=flow_id).values_list("spec", flat=True).first()
        spec = stored
        if spec is None:
            code_flow = conf.get_agent().flow(flow_id)
            if code_flow is None:
                raise NotFound(_("No flow with this id."))
            spec = {"steps": [{"id": s.id} for s in code_flow.steps]}
        return Response(funnel.flow_funnel(flow_id, since, until, spec=spec))
