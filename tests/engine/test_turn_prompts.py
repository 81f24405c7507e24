"""The prompt machinery (persistence-and-LLM note §6.1, §6.4): identity and the cacheable
system half, knowledge base, facts, pending fields with their asks, instructions, the speak
envelope's wire names, and business-hours snapping of silence and event starts."""

from __future__ import annotations

from datetime import timedelta

from scenarios.kit import T0_MS, make_agent

from falai_django.engine.jstime import iso_to_ms
from falai_django.engine.speak import wire_names

FIELDS = {"nome completo": {"type": "string", "ask": "Pergunte o nome inteiro, com {{context.tom}}."},
          "field_1": {"type": "string", "description": "um campo"},
          "message": {"type": "string", "enum": ["a", "b"]},
          "cidade": {"type": "string"}}


def test_wire_names_never_collide():
    assert wire_names(["nome completo", "field_1", "message"]) == {
        "nome completo": "field_1", "field_1": "field_2", "message": "field_3"}
    assert wire_names(["field_1", "nome completo"]) == {"field_1": "field_1", "nome completo": "field_2"}


def test_speak_prompt_sections_and_envelope():
    flow = {"id": "cad", "name": "Cadastro", "description": "Cadastro de {{context.quem}}.", "on": [{"message": []}],
            "collect": ["cidade"],
            "instructions": [{"kind": "never", "prompt": "Nunca prometa prazos.", "when": ["pedirem prazo"]}],
            "steps": [{"id": "s", "prompt": "Colete os dados.", "collect": ["nome completo", "field_1", "message"],
                       "instructions": [{"prompt": "Só para {{data.cidade}}", "if": {"known": ["cidade"]}}]}]}
    agent, provider, _ = make_agent(
        [flow], fields=FIELDS, knowledge_base={"planos": {"basico": 99}, "dias": ["seg", "ter"]},
        instructions=[{"kind": "must", "prompt": "Seja breve."}],
        understand=[{"fields": {"cidade": "Recife"}}],
        speak=[{"message": "Oi!", "field_1": "Ana Souza", "field_2": None, "field_3": "a"}])
    r = agent.turn(session_id="s1", message="  oi  ", id="m1", context={"tom": "calma", "quem": "clientes"})
    call = provider.calls[1]
    assert call.system.startswith('## Identity\nYou are "Ana".')
    assert "## Knowledge base\n- planos:\n  - basico: 99\n- dias: seg, ter" in call.system
    prompt = call.prompt
    assert "## Flow\nCadastro: Cadastro de clientes." in prompt
    assert "## Guideline for your reply (adapt to the conversation)\nColete os dados." in prompt
    assert "- nome completo (string)\n  How to ask: Pergunte o nome inteiro, com calma." in prompt
    assert "- message (string) [a | b]" in prompt
    assert '## Already known\n' in prompt and '- cidade: "Recife"' in prompt
    assert ("## Instructions\n- [must] [Always] Seja breve.\n"
            "- [never] [Always] Nunca prometa prazos. (apply only when: pedirem prazo)\n"
            "- [should] [Always] Só para Recife") in prompt
    assert '## Customer\'s latest message\n"oi"' in prompt
    assert '- "field_1": nome completo (string).' in prompt
    schema = call.input.parameters.json_schema
    assert list(schema["properties"]) == ["message", "field_1", "field_2", "field_3"]
    assert schema["required"] == list(schema["properties"]) and schema["additionalProperties"] is False
    assert schema["properties"]["field_3"] == {"type": ["string", "null"], "enum": ["a", "b"]}
    assert r.session.data == {"cidade": "Recife", "nome completo": "Ana Souza", "message": "a"}


def test_templated_persona_goes_inline():
    agent, provider, _ = make_agent([], fields={}, persona="Fale como {{context.marca}}.",
                                    speak=[{"message": "Oi"}])
    agent.turn(session_id="s1", message="oi", id="m1", context={"marca": "ACME"})
    call = provider.calls[0]
    assert call.system is None
    assert call.prompt.startswith('## Identity\nYou are "Ana". Always call yourself by this name.\nFale como ACME.')


def test_business_hours_snap_silence_wakes_and_park_event_starts():
    def opening(at, ctx):
        return at if at.hour >= 9 else at.replace(hour=9, minute=0, second=0, microsecond=0)

    silence = {"id": "ret", "name": "Ret", "on": [{"silence": "20h", "businessHours": True}],
               "steps": [{"id": "a", "say": "oi"}]}
    event = {"id": "ev", "name": "Ev", "on": [{"event": "x", "businessHours": True}], "steps": [{"id": "a", "say": "oi"}]}
    agent, _, clock = make_agent([silence, event], fields={}, events={"x": {}}, business_hours=opening)
    r = agent.turn(session_id="s1", event="x", key="e1")  # 10:00: open, so the run starts at once
    assert [m.text for m in r.messages] == ["oi"]
    (wake,) = r.schedule  # said at 10:00; +20h is 06:00, snapped to 09:00
    assert wake.key == f"silence:ret:s1:{T0_MS}" and iso_to_ms(wake.at.isoformat()) == T0_MS + 23 * 3_600_000
    clock.set("2026-09-21T03:00:00.000Z")
    r2 = agent.turn(session_id="s2", event="x", key="e2")
    assert r2.outcomes[0].code == "awaiting-trigger" and r2.messages == []
    assert r2.outcomes[0].until == "2026-09-21T09:00:00.000Z"
    assert timedelta(hours=6) == r2.schedule[0].at - clock.now()
