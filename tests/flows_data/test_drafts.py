"""A flow written from a description: the provider is asked with `flow_spec_schema` as the
structured output; the answer is checked and saved disabled; a bad or missing answer saves
nothing and says why. The offline provider's draft is deterministic."""

from __future__ import annotations

from typing import Any

import pytest

from falai_django.engine.errors import ProviderError
from falai_django.engine.spec import flow_spec_schema
from falai_django.flows import drafts
from falai_django.llm.types import GenerateOutput
from falai_django.models import Flow

from . import agents

pytestmark = pytest.mark.django_db


class Scripted:
    """A provider answering every call with `answer` (or raising it), recording the requests."""

    def __init__(self, answer: Any) -> None:
        self.answer, self.requests = answer, []

    def generate_message(self, request: Any) -> GenerateOutput:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        if isinstance(self.answer, str):
            return GenerateOutput(message=self.answer)
        return GenerateOutput(message="", structured=self.answer)


def agent_with(provider: Any) -> Any:
    agent = agents.current_agent()
    agent.provider = provider
    return agent


def test_the_offline_draft_is_deterministic_checked_and_disabled(staff):
    one = drafts.draft_flow("Collect the nome and the cidade of visitors", changed_by=staff)
    two = drafts.draft_flow("Collect the nome and the cidade of visitors")
    assert (one.pk, two.pk) == ("collect-the-nome-and", "collect-the-nome-and-2")
    assert one.spec["steps"] == [
        {"id": "pede_nome", "kind": "collect", "collect": ["nome"]},
        {"id": "pede_cidade", "kind": "collect", "collect": ["cidade"]},
        {"id": "fim", "kind": "say", "say": "Thank you! Someone from the team follows up from here."},
    ]
    assert {**two.spec, "id": one.pk} == one.spec
    assert one.enabled is False and one.updated_by == staff
    assert one.versions.get().note == "draft from a description: Collect the nome and the cidade of visitors"


def test_a_description_naming_no_field_gets_a_prompt_step():
    flow = drafts.draft_flow("Explain the opening hours")
    assert [s["kind"] for s in flow.spec["steps"]] == ["prompt", "say"]
    assert flow.spec["steps"][0]["prompt"] == "Explain the opening hours"


def test_the_provider_is_asked_with_the_agents_flow_spec_schema():
    provider = Scripted({"id": "x", "name": "X", "on": [{"message": []}], "description": None,
                         "steps": [{"id": "a", "kind": "say", "say": "Oi", "then": None}]})
    agent = agent_with(provider)
    flow = drafts.draft_flow("say hi", agent=agent)
    [request] = provider.requests
    assert request.parameters.schema_name == "flow_spec"
    assert request.parameters.json_schema == flow_spec_schema(agent)
    assert "say hi" in request.prompt and "nome" in request.prompt and "notify" in request.prompt
    assert flow.spec == {"id": "x", "name": "X", "on": [{"message": []}],
                         "steps": [{"id": "a", "kind": "say", "say": "Oi"}]}  # nulls gone


@pytest.mark.parametrize(("answer", "why"), [
    ({"id": "x", "steps": [{"id": "a", "kind": "collect", "collect": ["idade"]}]}, 'unknown field "idade"'),
    ({"id": "x", "steps": "nope"}, "steps"),
    ("not json at all", "did not answer with a JSON object"),
    (ProviderError("scripted", "network", "down"), "could not be reached"),
])
def test_a_bad_answer_saves_nothing_and_says_why(answer, why):
    with pytest.raises(drafts.DraftError, match=why.replace("(", r"\(")):
        drafts.draft_flow("anything", agent=agent_with(Scripted(answer)))
    assert not Flow.objects.exists()
