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


# -- the offline draft's name and trigger (issue 55: the name was cut mid-word at 60 characters and
# the trigger was the description's first five words, "Quando o cliente pedir um") -------------------

INSTALLATION = ("Quando o cliente pedir um orçamento de instalação, perguntar o endereço e a data preferida, "
                "depois confirmar")


def whole_word_prefix(name: str, description: str) -> bool:
    """`name` starts `description` and ends where a word ends, on no punctuation or space."""
    rest = description[len(name):]
    return (description.startswith(name) and name == name.strip() and name[-1:].isalnum()
            and (not rest or not rest[0].isalnum()))


def whole_words_of(phrase: str, description: str) -> bool:
    """`phrase` is taken whole from `description`: no word in it is cut at either end."""
    at = description.find(phrase)
    if at < 0 or not phrase:
        return False
    before, after = description[at - 1:at], description[at + len(phrase):at + len(phrase) + 1]
    return not before.isalnum() and not after.isalnum()


def test_the_offline_draft_names_the_flow_with_whole_words_and_a_meaningful_trigger():
    from falai_django.providers.offline import phrase_matches

    flow = drafts.draft_flow(INSTALLATION)

    assert flow.name == "Quando o cliente pedir um orçamento de instalação"  # its first clause
    assert whole_word_prefix(flow.name, INSTALLATION) and len(flow.name) <= 60
    [trigger] = flow.spec["on"]
    phrases = trigger["message"]
    assert phrases == ["orçamento de instalação"]
    for phrase in phrases:
        assert whole_words_of(phrase, INSTALLATION), phrase
        assert phrase != INSTALLATION[:28] and phrase != " ".join(INSTALLATION.split()[:5])
    # what a customer says starts it (the offline provider's own matching); the lead-in alone would not
    assert phrase_matches("oi, vocês fazem orçamento de instalação de ar-condicionado?", phrases[0])
    assert not phrase_matches("oi, vocês fazem orçamento de instalação de ar-condicionado?", "Quando o cliente pedir um")


@pytest.mark.parametrize("description", [
    INSTALLATION,
    "Responder dúvidas sobre o cardápio vegetariano e os preços das marmitas da semana para entrega em domicílio",
    "When a visitor asks about the opening hours on public holidays, explain them and mention the Sunday schedule",
    "Se alguém perguntar pelo horário de funcionamento da loja",
    "Explain the opening hours",
    "Quando o cliente pedir",
])
def test_offline_draft_names_and_triggers_never_cut_a_word(description):
    flow = drafts.draft_flow(description)

    assert whole_word_prefix(flow.name, description) and len(flow.name) <= 60, flow.name
    assert not flow.name.endswith((" o", " um", " de", " the", " a", ","))
    phrases = flow.spec["on"][0]["message"]
    assert phrases and all(whole_words_of(p, description) and len(p.split()) <= 6 for p in phrases), phrases
    assert description[:28] not in phrases or len(description) <= 28
