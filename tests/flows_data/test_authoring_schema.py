"""`flow_authoring_schema` (issue 55): the schema the flow editor completes and lints with is the
form people write (keys optional, `kind` read from the body, snake_case spellings, keys left to
code) and never stricter than the server: whatever it refuses, the server's check refuses too.
`flow_spec_schema`, the strict form models answer in, is unchanged."""

from __future__ import annotations

import jsonschema
import pytest

from falai_django.engine.errors import FlowConfigurationError
from falai_django.engine.spec import flow_authoring_schema, flow_spec_schema
from falai_django.flows.running import check_spec

from . import agents
from .authoring_corpus import INVALID, VALID, mutations

AGENT = agents.build()
AUTHORING = jsonschema.Draft202012Validator(flow_authoring_schema(AGENT))


def forms(schema) -> list:
    return [form for branch in schema["anyOf"] for form in forms(branch)] if "anyOf" in schema else [schema]


def server_accepts(spec) -> bool:
    try:
        check_spec(spec["id"], spec, AGENT, ["curto", "triagem"])
    except FlowConfigurationError:
        return False
    return True


@pytest.mark.parametrize("spec", VALID, ids=[s["id"] for s in VALID])
def test_every_way_people_write_a_valid_flow_is_valid_under_the_authoring_schema(spec):
    assert server_accepts(spec)
    assert [e.message for e in AUTHORING.iter_errors(spec)] == []


@pytest.mark.parametrize("spec", INVALID)
def test_what_the_schema_can_see_is_wrong_it_refuses_as_the_server_does(spec):
    assert not server_accepts(spec)
    assert not AUTHORING.is_valid(spec)


def test_the_readme_form_is_refused_by_the_strict_schema_only():
    readme = VALID[0]
    assert not jsonschema.Draft202012Validator(flow_spec_schema(AGENT)).is_valid(readme)  # kind, nulls
    assert AUTHORING.is_valid(readme)


def test_the_authoring_schema_is_never_stricter_than_the_server():
    """Thousands of one-edit variants of the valid flows: each one the schema refuses, the
    server refuses too (the schema may be laxer: the server's message covers the rest)."""
    refused_by_schema = refused_by_server_only = 0
    for spec in VALID:
        for mutant in mutations(spec):
            if not AUTHORING.is_valid(mutant):
                refused_by_schema += 1
                why = jsonschema.exceptions.best_match(AUTHORING.iter_errors(mutant))
                assert not server_accepts(mutant), (mutant, list(why.absolute_path), why.message, why.context)
            elif not server_accepts(mutant):
                refused_by_server_only += 1
    assert refused_by_schema > 500  # the schema does see most mistakes...
    assert refused_by_server_only > 0  # ...and leaves the rest (step targets, durations) to the server


def test_the_agents_names_are_enums_and_kind_is_optional():
    schema = flow_authoring_schema(AGENT)
    steps = forms(schema["properties"]["steps"]["items"])
    by_kind = {}
    for step in steps:
        kind = step["properties"]["kind"]["anyOf"][0]["enum"][0]
        by_kind.setdefault(kind, step)
        assert "kind" not in step["required"] and "id" in step["required"]
    assert [s["required"] for s in steps if "if" in s["required"] or "if_" in s["required"]] == [
        ["id", "if"], ["id", "if_"]]  # either spelling says what the step does
    assert set(by_kind) == {"prompt", "collect", "say", "do", "wait", "waitEvent", "if"}
    assert by_kind["collect"]["properties"]["collect"]["items"]["enum"] == ["nome", "empresa", "cidade"]
    assert by_kind["do"]["properties"]["do"]["anyOf"][0]["enum"] == ["notify"]
    assert by_kind["collect"]["properties"]["max_asks"]["x-falai-alias"] == "maxAsks"
    assert by_kind["say"]["x-falai-known-keys"] is True and by_kind["say"]["additionalProperties"] is True
