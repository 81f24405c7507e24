"""What the schema says beyond what drf-spectacular infers, written so that the app's own
schema (`GET schema`) and a project's export (`manage.py spectacular`) say the same: field
extensions, and what `FalaiAutoSchema` adds to each operation of the app.

- `TextExtension`: an API text field (`serializers.Text`) is written with its `minLength` and
  its `pattern` (no NUL; a reason is more than white space), the rules the server checks.
- `FlowNameExtension`, `EventNameExtension`: the running agent's flows and events as enums where
  the server refuses any other (`GET sessions?flow=`, a start's `flow`, an event's `event`).
- `JSONValueExtension`: a free JSON value (`context`, `payload`, `input`) is any JSON but null.
- `AnchorsExtension`, `ClaimsExtension`, `FlowSpecExtension`: `shapes`' forms, written for
  the OpenAPI version being generated (`shapes.for_version`).
- `add_links`: OpenAPI links from the operations that make or list conversations and flows to
  the operations that take their ids.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent

from falai_django.api import shapes

# Where an id comes from: an input names its conversation in the path; a list holds ids; a saved
# flow answers with its id.
_FROM_PATH = "$request.path.session_id"
_FROM_LIST = "$response.body#/results/0/id"
_FROM_FLOW = "$response.body#/id"
_INPUTS = ["messages", "events", "starts", "wakes"]


class TextExtension(OpenApiSerializerFieldExtension):
    target_class = "falai_django.api.serializers.Text"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if not self.target.allow_blank:
            schema["minLength"] = max(1, schema.get("minLength", 0))
        schema["pattern"] = self.target.schema_pattern
        return schema


class JSONValueExtension(OpenApiSerializerFieldExtension):
    """Any JSON value but null: a reference to `JsonValue`, registered with the components it
    needs in whichever schema is being built (the app's, or a project's export)."""

    target_class = "falai_django.api.serializers.JSONValueField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        for name, schema in shapes.COMPONENTS.items():
            component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name,
                                          schema=shapes.for_version(schema))
            auto_schema.registry.register_on_missing(component)
        return shapes.JSON_VALUE


class _ShapeExtension(OpenApiSerializerFieldExtension):
    shape: dict[str, Any] = {}

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        return shapes.for_version(self.shape)


class AnchorsExtension(_ShapeExtension):
    target_class = "falai_django.api.serializers.AnchorsField"
    shape = shapes.ANCHORS


class ClaimsExtension(_ShapeExtension):
    target_class = "falai_django.api.serializers.ClaimsField"
    shape = shapes.CLAIMS


class FlowSpecExtension(_ShapeExtension):
    target_class = "falai_django.api.serializers.FlowSpecField"
    shape = shapes.FLOW_SPEC


def _agent_names() -> tuple[list[str], list[str]]:
    """The running agent's flow ids and event names ([] and [] when it cannot be built: the
    system checks say why; the schema stays without the enums)."""
    from falai_django import conf

    try:
        agent = conf.get_agent()
    except Exception:  # noqa: BLE001 - a broken agent is E011's to report, not the schema's
        return [], []
    flows = [flow.id for flow in getattr(agent, "flows", ())]
    events = list(getattr(agent, "events", None) or {})
    return flows, events


class _AgentNames:
    """A name the server checks against the running agent: an enum of the agent's names (without
    any, the text's own schema: every value is refused, and the 400 says the agent has none).
    Mixed into a `TextExtension` subclass (a mixin, so not an extension of its own)."""

    priority = 1  # before TextExtension, which matches these subclasses of Text too

    def names(self) -> list[str]:
        raise NotImplementedError

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        schema = super().map_serializer_field(auto_schema, direction)  # type: ignore[misc]  # TextExtension's
        names = sorted(self.names())
        if names:
            schema.pop("pattern", None)
            schema["enum"] = names
        return schema


class FlowNameExtension(_AgentNames, TextExtension):
    target_class = "falai_django.api.serializers.FlowName"

    def names(self) -> list[str]:
        return _agent_names()[0]


class EventNameExtension(_AgentNames, TextExtension):
    target_class = "falai_django.api.serializers.EventName"

    def names(self) -> list[str]:
        return _agent_names()[1]


def is_webhook(requirement: dict[str, Any]) -> bool:
    return any(name.startswith("webhook") for name in requirement)


# The links, by the operation that answers with an id (method, path under the app's mount point):
# (link name, target operation id, where its id comes from, request body or None). The operation
# ids are `FalaiAutoSchema`'s, fixed by the paths (a test follows every link to its operation).
_SESSION_ID = "session_id"
_READ_ERASE_HANDOFF = [("Read", "sessions_retrieve"), ("Silence", "sessions_silence_create"),
                       ("Unsilence", "sessions_unsilence_create"), ("Erase", "sessions_destroy")]


def _session_links(value: str) -> list[tuple[str, str, str, str, Any]]:
    return [(name, op_id, _SESSION_ID, value, None) for name, op_id in _READ_ERASE_HANDOFF]


def _links_of(method: str, path: str) -> tuple[tuple[str, ...], list[tuple[str, str, str, str, Any]]]:
    """(the answer codes that carry links, the links) of one operation."""
    fire = ("FireWake", "sessions_wakes_create", _SESSION_ID, _FROM_PATH)
    if method == "post" and path.startswith("sessions/{session_id}/") and path.rsplit("/", 1)[1] in _INPUTS:
        return ("200", "202"), [*_session_links(_FROM_PATH), (*fire, {"key": "$response.body#/schedule/0/key"})]
    if (method, path) == ("get", "sessions"):
        return ("200",), _session_links(_FROM_LIST)
    if (method, path) == ("get", "sessions/{session_id}"):
        return ("200",), [(*fire, {"key": "$response.body#/pending_wakes/0/key"})]
    if (method, path) == ("post", "sessions/{session_id}/silence"):
        return ("200",), [(n, o, p, v, b) for n, o, p, v, b in _session_links(_FROM_PATH) if n in ("Read", "Unsilence")]
    flow_links = [("Read", "flows_retrieve"), ("Funnel", "flows_funnel_retrieve")]
    if (method, path) == ("put", "flows/{flow_id}"):
        return ("200",), [(name, op_id, "flow_id", _FROM_FLOW, None) for name, op_id in flow_links]
    if (method, path) == ("get", "flows"):
        return ("200",), [(name, op_id, "flow_id", _FROM_LIST, None) for name, op_id in flow_links]
    return (), []


def add_links(operation: dict[str, Any], method: str, path: str) -> None:
    """OpenAPI links on `operation`'s answers: where a client (or a stateful fuzzer) goes next
    with the ids this answer holds."""
    codes, links = _links_of(method, path)
    for code in codes:
        response = operation.get("responses", {}).get(code)
        if response is None:
            continue
        response["links"] = {}
        for name, op_id, parameter, value, body in links:
            link: dict[str, Any] = {"operationId": op_id, "parameters": {parameter: value},
                                    "description": f"{name}: with the id this answer holds."}
            if body is not None:
                link["requestBody"] = body
            response["links"][name] = link
