"""Static facts about an agent's flows, computed once per agent and kept on it."""

from __future__ import annotations

from typing import Any

from .flows import Flow, Trigger


class AgentIndex:
    """Static facts about an agent's flows, computed once and kept on the agent."""

    def __init__(self, agent: Any) -> None:
        self.flows: tuple[Flow, ...] = tuple(agent.flows)
        self.by_id: dict[str, Flow] = dict(agent.flows_by_id)
        self.fields = agent.fields
        self.message_trigger: dict[str, Trigger | None] = {}
        self.catch_all_trigger: dict[str, Trigger | None] = {}
        self.mention_trigger: dict[str, Trigger | None] = {}
        self.silence_trigger: dict[str, Trigger | None] = {}
        self.flow_fields: dict[str, tuple[str, ...]] = {}
        self.has_question: dict[str, bool] = {}
        for flow in self.flows:
            fid = flow.id
            self.message_trigger[fid] = next((t for t in flow.on if t.kind == "message" and t.phrases), None)
            self.catch_all_trigger[fid] = next((t for t in flow.on if t.kind == "message" and not t.phrases), None)
            self.mention_trigger[fid] = flow.first_trigger("mention")
            self.silence_trigger[fid] = flow.first_trigger("silence")
            seen: dict[str, None] = {}
            for slug in flow.collect or ():
                seen.setdefault(slug, None)
            for step in flow.steps:
                if step.kind == "talk":
                    for slug in step.collect or ():
                        seen.setdefault(slug, None)
            self.flow_fields[fid] = tuple(seen)
            self.has_question[fid] = any(s.kind == "talk" and s.question for s in flow.steps)
        self.has_silence = any(self.silence_trigger.values())
        self.speak_cache: dict[Any, Any] = {}


def agent_index(agent: Any) -> AgentIndex:
    index = getattr(agent, "_falai_turn_index", None)
    if index is None:
        index = AgentIndex(agent)
        try:
            agent._falai_turn_index = index
        except AttributeError:  # a frozen agent: rebuild per turn
            pass
    return index
