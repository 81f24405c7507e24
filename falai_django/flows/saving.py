"""What saving a stored flow runs: the spec check against the agent, and the running agent's reset.

The `Flow` model knows its columns and its versions; checking a spec needs the settings (the
nesting bound), the code agent (`conf.get_code_agent`) and the flows domain
(`running.check_spec`), which sit above the models. So this module owns the check and reaches the
model through signals, which `connect()` wires (`apps.FalaiConfig.ready` calls it):

- `Flow.clean` sends `models.flows.checking_spec`; `check(flow)` receives it. It bounds the
  spec's nesting (`FALAI["MAX_JSON_DEPTH"]`, before anything walks it), checks the spec against
  the agent and the other enabled flows, and returns the warnings (kept on `flow.spec_warnings`),
  or raises `ValidationError({"spec": ...})`: the limit, or the `FlowConfigurationError`'s text
  naming the flow and the step. `Flow.full_clean` (the admin's form, `PUT flows/<id>`,
  `falai_flows import`) and `Flow.save` (which cleans first: a bad spec saves nothing) all run it;
- after a save or a delete, `running.invalidate()` makes this process read the flows table again
  on its next turn, at once and again when the transaction commits (other processes see the new
  stamp within `FLOWS_RELOAD_S`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from falai_django import conf, jsondepth
from falai_django.engine.errors import FlowConfigurationError
from falai_django.flows import running
from falai_django.models import Flow
from falai_django.models.flows import checking_spec

__all__ = ["check", "check_text", "connect", "one_id", "verdict"]


def one_id(flow_id: str | None, spec: Any) -> tuple[str, Any]:
    """The flow's id typed once (issue 55): the admin's id field and the spec's `id` say the same
    thing, so either may be left out. Returns `(id, spec)` with the missing one filled from the
    other: a blank id takes the spec's `id`; a spec without an `id` gets the field's, first.
    When both are given and differ, both are returned as they are and the check names the
    mismatch."""
    flow_id = (flow_id or "").strip()
    spec_id = spec.get("id") if isinstance(spec, dict) else None
    if not flow_id and isinstance(spec_id, str):
        return spec_id, spec
    if flow_id and isinstance(spec, dict) and spec_id in (None, ""):
        return flow_id, {"id": flow_id, **{k: v for k, v in spec.items() if k != "id"}}
    return flow_id, spec


def verdict(error: str | None = None, warnings: list[str] | None = None, picture: str | None = None) -> dict[str, Any]:
    """The flow editor's answer: `{"ok", "error", "warnings", "picture"}` (ok when no error)."""
    return {"ok": error is None, "error": error, "warnings": warnings or [], "picture": picture}


def check_text(flow_id: str | None, text: str | bytes, pk: str | None = None) -> dict[str, Any]:
    """What saving `text` as the spec of flow `flow_id` would say, without saving (a `verdict`).
    The flow editor posts every pause in typing here, so the page shows the server's own verdict
    (the same `check` a save runs). `pk` is the stored row being edited: it is the flow's id then,
    so the check leaves that row out of the other flows, as its own save would."""
    from falai_django.flows import chart

    try:
        spec = jsondepth.loads(text or b"null", "the spec")
    except jsondepth.JSONDepthError as exc:
        return verdict(str(exc))
    except (ValueError, RecursionError) as exc:
        return verdict(f"The spec is not valid JSON: {exc}.")
    flow_id, spec = one_id(pk or flow_id, spec)
    picture = chart.flow_svg(spec)
    if not flow_id:
        return verdict('The flow has no id: write it in the id field or as the spec\'s "id".', picture=picture)
    flow = Flow(id=flow_id, spec=spec)
    try:
        if not pk:  # a new flow's id is a form field too: the same validators a save runs
            Flow._meta.get_field("id").clean(flow_id, flow)
    except ValidationError as exc:
        return verdict(" ".join(exc.messages), picture=picture)
    try:
        warnings = check(flow)
    except ValidationError as exc:
        return verdict(" ".join(exc.message_dict.get("spec", exc.messages)), picture=picture)
    return verdict(warnings=warnings, picture=picture)


def check(flow: Flow) -> list[str]:
    """Check `flow.spec` against the code agent's registries and the other enabled flows; return
    the warnings (also kept on `flow.spec_warnings`). Raises `ValidationError` on the spec field.
    A flow without an id is left to the id field's own error."""
    try:  # before anything walks the spec (the check and the picture recurse into it)
        jsondepth.check(flow.spec, "the spec")
    except ValueError as exc:
        raise ValidationError({"spec": str(exc)}) from None
    if not flow.id:
        return []
    others = Flow.objects.filter(enabled=True).exclude(pk=flow.pk).values_list("id", flat=True)
    try:
        warnings = running.check_spec(flow.id, flow.spec, conf.get_code_agent(), list(others))
    except FlowConfigurationError as exc:
        raise ValidationError({"spec": str(exc)}) from exc
    flow.spec_warnings = warnings
    return warnings


def _check_on_clean(sender: type[Flow], instance: Flow, **kwargs: Any) -> None:
    check(instance)


def _reset_after_change(sender: type[Flow], **kwargs: Any) -> None:
    running.invalidate()  # this process, at once (a read inside the same transaction sees it)
    transaction.on_commit(running.invalidate, using=kwargs.get("using"))  # and once it is visible


def connect() -> None:
    """Check every `Flow` clean (and so every save); reset the running agent after a change."""
    checking_spec.connect(_check_on_clean, sender=Flow, dispatch_uid="falai_django.flows.check")
    post_save.connect(_reset_after_change, sender=Flow, dispatch_uid="falai_django.flows.reset")
    post_delete.connect(_reset_after_change, sender=Flow, dispatch_uid="falai_django.flows.reset_on_delete")
