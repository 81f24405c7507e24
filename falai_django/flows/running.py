"""Flows stored in the database (`models.Flow`), checked and run beside the code agent's.

The running agent is the code agent (`FALAI["AGENT"]`, which supplies fields, actions, events,
conditions, tools and the code flows) with every enabled database flow added; a database flow
whose id is a code flow's replaces it in its place, the others follow in `position` order.

Every process keeps the merged agent and re-reads the flows table only when a cheap stamp
(`count, max(updated_at), sum(version)` of one small table) changed, and checks that stamp at
most once every `FLOWS_RELOAD_S` seconds: a new version reaches web processes and workers within
seconds, for at most one tiny query per turn. A save in this process forgets the stamp at once.

The module reaches the model through the app registry (never an import of `models`), so
`conf.get_agent` can use it without importing the models.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from falai_django.engine.errors import FlowConfigurationError
from falai_django.engine.spec import from_spec, validate_flow

logger = logging.getLogger("falai_django.flows")

__all__ = ["StoredFlow", "check_spec", "invalidate", "merged_agent", "running_agent", "stored_flows"]


@dataclass(frozen=True)
class StoredFlow:
    """One enabled database flow as the runtime sees it."""

    id: str
    spec: Mapping[str, Any]
    position: int
    version: int


def _flow_model() -> Any:
    from django.apps import apps

    return apps.get_model("falai_django", "Flow")


def _code_flow_ids(code_agent: Any) -> list[str]:
    return [f.id for f in getattr(code_agent, "flows", ())]


def check_spec(flow_id: str, spec: Any, code_agent: Any, other_flow_ids: Iterable[str] = ()) -> list[str]:
    """Check a stored FlowSpec against the code agent's registries and the other flows' ids.

    Raises `FlowConfigurationError` naming the flow and step; returns the warnings. The spec's
    `id` must be the row's id (the slug is the flow's identity in every session blob)."""
    if not isinstance(spec, Mapping):
        raise FlowConfigurationError(
            f'[FlowConfigurationError] flow "{flow_id}": the spec is not a JSON object. '
            'Write a FlowSpec such as {"id": "...", "steps": [...]}.')
    if spec.get("id") != flow_id:
        raise FlowConfigurationError(
            f'[FlowConfigurationError] flow "{flow_id}": the spec\'s id is {spec.get("id")!r}, not "{flow_id}". '
            "Make the spec's id the flow's id (sessions find their flow by it).")
    flow = from_spec(spec)
    ids = {*_code_flow_ids(code_agent), *other_flow_ids, flow_id}
    registries = {
        "fields": code_agent.fields, "actions": code_agent.actions, "events": code_agent.events,
        "conditions": code_agent.conditions, "tools": code_agent.tools, "flows": [{"id": i} for i in sorted(ids)],
    }
    return [*validate_flow(flow, registries).warnings, *_unmapped_media(flow)]


def _unmapped_media(flow: Any) -> list[str]:
    """A `say` step naming a media slug the WhatsApp channel does not map: its message would fail."""
    from django.conf import settings  # not falai_django.conf: it imports this module

    whatsapp = (getattr(settings, "FALAI", None) or {}).get("WHATSAPP")
    if not isinstance(whatsapp, dict):
        return []
    from falai_django.channels.whatsapp.media_out import unmapped_media

    return [f'step "{step}": the media slug "{slug}" is not in FALAI["WHATSAPP"]["MEDIA"]; its message will '
            "fail to send until it is added" for _, step, slug in unmapped_media([flow], whatsapp.get("MEDIA") or {})]


def merged_agent(code_agent: Any, stored: Iterable[StoredFlow]) -> Any:
    """The code agent with `stored` flows added (or replacing code flows of the same id).

    A stored flow that no longer validates (the code agent lost an action it names, say) is
    left out and logged, so one stale row never stops every conversation."""
    stored = sorted(stored, key=lambda s: (s.position, s.id))
    if not stored:
        return code_agent
    all_ids = [*_code_flow_ids(code_agent), *(s.id for s in stored)]
    usable: dict[str, dict[str, Any]] = {}
    for row in stored:
        try:
            check_spec(row.id, row.spec, code_agent, all_ids)
        except FlowConfigurationError as exc:
            logger.error("database flow %r (version %s) left out: %s", row.id, row.version, exc)
            continue
        usable[row.id] = from_spec(row.spec)
    flows: list[Any] = [usable.pop(f.id, f) for f in code_agent.flows]
    flows.extend(usable.values())
    return code_agent.with_flows(flows)


# ----------------------------------------------------------------------------- the runtime cache

_lock = threading.Lock()
_state: dict[str, Any] = {"checked_at": None, "stamp": None, "stored": (), "code": None, "agent": None}


def invalidate() -> None:
    """Check the flows table on the next `running_agent` call (a save in this process)."""
    with _lock:
        _state["checked_at"] = None


def _stamp() -> tuple[Any, ...]:
    from django.db.models import Count, Max, Sum

    row = _flow_model().objects.aggregate(n=Count("id"), at=Max("updated_at"), v=Sum("version"))
    return row["n"], row["at"], row["v"]


def stored_flows() -> tuple[StoredFlow, ...]:
    """The enabled database flows, read now."""
    rows = _flow_model().objects.filter(enabled=True).values_list("id", "spec", "position", "version")
    return tuple(StoredFlow(id=i, spec=s, position=p, version=v) for i, s, p, v in rows)


def running_agent(code_agent: Any, reload_s: float = 2.0) -> Any:
    """The code agent plus the enabled database flows (cached; see the module docstring)."""
    from django.db import DatabaseError

    now = time.monotonic()
    with _lock:
        checked_at, stamp = _state["checked_at"], _state["stamp"]
        due = checked_at is None or now - checked_at >= reload_s
    if due:
        try:
            fresh = _stamp()
            rows = stored_flows() if fresh != stamp or checked_at is None else None
        except (DatabaseError, RuntimeError) as exc:
            # No table yet (before `migrate`) or no database in this context (a test without
            # one): the code agent alone is the agent.
            logger.debug("flows table not read: %s", exc)
            return code_agent
        with _lock:
            _state["checked_at"] = now
            if rows is not None:
                _state.update(stamp=fresh, stored=rows, code=None, agent=None)
    with _lock:
        if _state["code"] is code_agent and _state["agent"] is not None:
            return _state["agent"]
        stored = _state["stored"]
    agent = merged_agent(code_agent, stored)
    with _lock:
        _state.update(code=code_agent, agent=agent)
    return agent
