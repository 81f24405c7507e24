"""The provider interface the core needs (engine-persistence-llm.md §5.1), seen from a provider a
user writes by hand against the TypeScript shapes."""

from __future__ import annotations

import json

from falai_django import falai
from falai_django.llm.types import GenerateInput, GenerateParameters, ProviderCapabilities
from falai_django.testing import fake_clock

FIELDS = {"nome": {"type": "string", "ask": "Pergunte o nome."}, "cidade": {"type": "string", "ask": "Cidade?"}}


def test_generate_input_reads_under_upstream_names():
    i = GenerateInput(prompt="p", system="s", parameters=GenerateParameters(json_schema={"type": "object"},
                                                                             schema_name="speak"))
    assert i["prompt"] == "p" and i["system"] == "s" and i["history"] == []
    assert i["parameters"]["schemaName"] == "speak" and i["parameters"]["jsonSchema"] == {"type": "object"}


def test_capabilities_are_five_booleans():
    caps = ProviderCapabilities()
    assert set(vars(caps)) == {"supports_tools", "supports_native_json_schema", "supports_streaming",
                               "supports_streaming_tool_calls", "supports_prompt_caching"}


class DictProvider:
    """Answers in upstream's plain shapes: dicts, not this package's dataclasses."""

    name = "dicts"
    capabilities = ProviderCapabilities(True, True, True, False, False)

    def __init__(self):
        self.calls = []

    def _reply(self, input):
        name = input["parameters"]["schemaName"]
        self.calls.append(name)
        if name == "understand":
            return {"fields": {"nome": "Maria"}}
        return {"message": "Prazer, Maria! De qual cidade?", "cidade": None}

    def generate_message(self, input):
        structured = self._reply(input)
        return {"message": json.dumps(structured), "structured": structured, "metadata": {"model": "dicts"}}

    def generate_message_stream(self, input):
        structured = self._reply(input)
        text = json.dumps(structured)
        yield {"delta": text, "accumulated": text, "done": True, "structured": structured}


def _agent(provider):
    f = falai().fields(FIELDS)
    flow = {"id": "t", "on": [{"message": []}], "steps": [{"id": "oi", "say": "Oi!"},
                                                         {"id": "q", "collect": ["nome", "cidade"]}]}
    return f.agent(name="Ana", provider=provider, clock=fake_clock("2026-09-21T10:00:00Z"), flows=[f.flow(flow)])


def test_a_hand_written_provider_answering_dicts_works_in_a_turn():
    provider = DictProvider()
    r = _agent(provider).turn(session_id="s1", message="Sou a Maria", id="m1", session=None, history=[])
    assert provider.calls == ["understand", "speak"]
    assert r.session.data.get("nome") == "Maria"
    assert [m.text for m in r.messages][-1] == "Prazer, Maria! De qual cidade?"


def test_a_hand_written_provider_streaming_dicts_works_in_turn_stream():
    provider = DictProvider()
    chunks = list(_agent(provider).turn_stream(session_id="s1", message="Sou a Maria", id="m1", session=None,
                                               history=[]))
    assert "".join(c["delta"] for c in chunks[:-1]) == "Prazer, Maria! De qual cidade?"
    assert [m.text for m in chunks[-1]["result"].messages][-1] == "Prazer, Maria! De qual cidade?"
