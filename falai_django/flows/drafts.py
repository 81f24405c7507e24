"""A flow written from a description: the agent's provider answers with a FlowSpec, using
`flow_spec_schema` (the agent's own names) as the structured-output schema. The answer is checked
like any save and stored disabled, as a draft for a person to review and enable."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from falai_django import conf, jsondepth
from falai_django.engine.errors import FlowConfigurationError, ProviderError
from falai_django.engine.spec import flow_spec_schema, from_spec, to_spec
from falai_django.llm.calling import call_provider
from falai_django.llm.types import GenerateInput, GenerateParameters
from falai_django.models import Flow

SCHEMA_NAME = "flow_spec"

SYSTEM = (
    "You write conversation flows for a customer-service assistant as FlowSpec JSON. A flow has an id (a short "
    "slug), a name, triggers (`on`) and steps run in order: collect (ask for fields), prompt (a guideline to "
    "speak by), say (fixed text), do (run an action), wait, waitEvent and if. Use only the fields, actions, "
    "events, conditions, tools and flows the schema lists. Keep it short: the fewest steps that do the job."
)


class DraftError(Exception):
    """The provider failed or its answer is not a valid flow; nothing was saved."""


def _names(agent: Any) -> str:
    fields = "\n".join(f"- {slug}: {getattr(d, 'ask', None) or ''}".rstrip(": ") for slug, d in agent.fields.items())
    return (f"Fields:\n{fields or '- (none)'}\n"
            f"Actions: {', '.join(agent.actions) or '(none)'}\n"
            f"Events: {', '.join(agent.events) or '(none)'}\n"
            f"Conditions: {', '.join(agent.conditions) or '(none)'}\n"
            f"Tools: {', '.join(t.id for t in agent.tools) or '(none)'}\n"
            f"Existing flows: {', '.join(f.id for f in agent.flows) or '(none)'}")


def _free_id(wanted: Any) -> str:
    base = re.sub(r"[^a-z0-9_-]+", "-", str(wanted or "").lower()).strip("-")[:60] or "rascunho"
    flow_id, n = base, 2
    while Flow.objects.filter(pk=flow_id).exists():
        flow_id, n = f"{base}-{n}", n + 1
    return flow_id


def request_spec(description: str, agent: Any = None) -> dict[str, Any]:
    """Ask the agent's provider for a FlowSpec answering `description` (not checked, not saved)."""
    agent = agent or conf.get_code_agent()
    request = GenerateInput(
        system=SYSTEM,
        prompt=f"## Names you may use\n{_names(agent)}\n\n## The flow to write\n{description}",
        parameters=GenerateParameters(json_schema=flow_spec_schema(agent), schema_name=SCHEMA_NAME),
    )
    try:
        out = call_provider(agent.provider, request)
    except ProviderError as exc:
        raise DraftError(f"the model could not be reached ({exc})") from exc
    spec = out.structured
    if spec is None:
        try:
            spec = jsondepth.loads(out.message, "the model's answer")
        except jsondepth.JSONDepthError as exc:
            raise DraftError(str(exc)) from None
        except ValueError:
            spec = None
    if not isinstance(spec, Mapping):
        raise DraftError("the model did not answer with a JSON object")
    try:
        jsondepth.check(spec, "the model's answer")  # before from_spec walks it (recursively)
    except ValueError as exc:  # too deep, or a circle
        raise DraftError(str(exc)) from None
    return dict(spec)


def draft_flow(description: str, changed_by: Any = None, agent: Any = None) -> Flow:
    """Write, check and save (disabled) a flow for `description`. Raises `DraftError`."""
    spec = request_spec(description, agent)
    spec["id"] = _free_id(spec.get("id"))
    try:
        spec = to_spec(from_spec(spec))  # nulls and the model's filler keys go; kinds are written out
    except FlowConfigurationError as exc:
        raise DraftError(str(exc)) from exc
    flow = Flow(id=spec["id"], name=str(spec.get("name") or spec["id"])[:255], enabled=False, spec=spec)
    try:
        flow.save(changed_by=changed_by, note=f"draft from a description: {description}"[:255])
    except ValidationError as exc:
        raise DraftError(" ".join(exc.message_dict.get("spec", exc.messages))) from exc
    return flow
