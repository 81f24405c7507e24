"""persistence-and-LLM note §6: understand/speak contract details visible through turn()."""

from __future__ import annotations

from .turn_kit import World


def test_speak_wire_aliases():
    fields = {"nome completo": {"type": "string"}, "field_1": {"type": "string"}, "message": {"type": "string"}}
    fl = {"id": "f", "name": "F", "on": [{"event": "ev"}],
          "steps": [{"id": "q", "collect": ["nome completo", "field_1", "message"]}]}
    w = World([fl], fields=fields,
              speak=[{"message": "Oi", "field_1": "Ana Maria", "field_2": "x", "field_3": "y"}])
    r = w.turn(event="ev", key="e1")
    env = w.provider.calls[0].input.parameters.json_schema
    assert list(env["properties"]) == ["message", "field_1", "field_2", "field_3"]
    assert r.session.data == {"nome completo": "Ana Maria", "field_1": "x", "message": "y"}


def test_understand_aliases_for_unsafe_ids():
    fields = {"nome completo": {"type": "string"}}
    fls = [{"id": "a:b", "name": "AB", "on": [{"message": ["x"]}], "steps": [{"id": "s", "prompt": "x"}]},
           {"id": "c", "name": "C", "on": [{"message": ["y"]}],
            "steps": [{"id": "s", "prompt": "x", "collect": ["nome completo"]}]}]
    w = World(fls, fields=fields, understand=[{"flows": {"f1": 90, "c": 10}, "fields": {"d2": "Ana"}}],
              speak=[{"message": "ok"}])
    r = w.turn(message="x", id="m1")
    schema = w.provider.calls[0].input.parameters.json_schema
    assert set(schema["properties"]["flows"]["properties"]) == {"f1", "c"}
    assert set(schema["properties"]["fields"]["properties"]) == {"d2"}
    assert r.started[0].flow_id == "a:b"
    assert r.session.data == {"nome completo": "Ana"}


def test_instructions_rendering_and_filter():
    fl = {"id": "f", "name": "F", "on": [{"event": "ev"}],
          "instructions": [{"prompt": "Fale do fluxo", "kind": "must"}],
          "steps": [{"id": "q", "prompt": "x", "instructions": [{"prompt": "Do passo", "when": "o cliente pedir"}]}]}
    w = World([fl], speak=[{"message": "ok"}],
              instructions=[{"prompt": "Seja breve", "kind": "never"},
                            {"prompt": "Nunca aparece", "if": lambda ctx: False}])
    w.turn(event="ev", key="e1")
    p = w.provider.calls[0].prompt
    assert "## Instructions" in p
    assert "- [never] [Always] Seja breve" in p
    assert "Nunca aparece" not in p
    i1, i2, i3 = p.index("Seja breve"), p.index("Fale do fluxo"), p.index("Do passo")
    assert i1 < i2 < i3
    assert "(apply only when: o cliente pedir)" in p


def test_idle_prompt_and_instructions():
    w = World([], speak=[{"message": "ok"}],
              idle={"prompt": "Responda com simpatia", "instructions": [{"prompt": "Idle-only"}]})
    w.turn(message="oi", id="m1")
    p = w.provider.calls[0].prompt
    assert "Responda com simpatia" in p and "Idle-only" in p
    assert "## Flow" not in p


def test_understand_prompt_sections_order():
    fls = [{"id": "a", "name": "A", "on": [{"message": ["x"]}], "steps": [{"id": "s", "prompt": "x"}]},
           {"id": "b", "name": "B", "on": [{"message": ["y"]}], "steps": [{"id": "s", "prompt": "x"}]}]
    w = World(fls, understand=[{}], speak=[{"message": "ok"}])
    w.turn(message="texto do cliente", id="m1")
    p = w.provider.calls[0].prompt
    order = [p.index(s) for s in ("## Task", "## Flows the customer may want", "## Customer's latest message",
                                  "## Output")]
    assert order == sorted(order)
    assert '"""\ntexto do cliente\n"""' in p


def test_persona_templated_goes_inline():
    w = World([], speak=[{"message": "ok"}], persona="Atende {{context.loja}}")
    w.turn(message="oi", id="m1", context={"loja": "Loja X"})
    c = w.provider.calls[0]
    assert "Atende Loja X" in c.prompt
    assert not (c.system or "").startswith("## Identity")


def test_knowledge_base_rendering_in_system():
    kb = {"horario": "9h às 18h", "preco": 10.0, "ativo": True, "planos": ["basic", "pro"],
          "filiais": [{"cidade": "SP"}], "contato": {"fone": "11"}}
    w = World([], speak=[{"message": "ok"}], knowledge_base=kb)
    w.turn(message="oi", id="m1")
    system = w.provider.calls[0].system
    assert "## Knowledge base" in system
    assert "- horario: 9h às 18h" in system
    assert "- preco: 10\n" in system + "\n"  # numbers as JSON.stringify writes them
    assert "- ativo: true" in system
    assert "- planos: basic, pro" in system
    assert "- contato:\n  - fone: 11" in system


def _is_strict(schema) -> bool:
    """persistence-and-LLM note §3.5: every object node closed, every property required, recursively."""
    if not isinstance(schema, dict):
        return True
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "object" in types:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", [])) != set(props):
            return False
        return all(_is_strict(p) for p in props.values())
    if "array" in types:
        return _is_strict(schema.get("items"))
    return True


def test_both_envelopes_are_strict():
    fields = {"nome": {"type": "string", "description": "Nome", "ask": "x"},
              "porte": {"type": "string", "enum": ["a", "b"]}, "n": {"type": "integer"}}
    fls = [{"id": "a", "name": "A", "on": [{"message": ["x"]}],
            "steps": [{"id": "s", "prompt": "x", "collect": ["nome", "porte", "n"],
                       "branches": [{"when": "quer sair", "then": "end"}]}]},
           {"id": "b", "name": "B", "on": [{"message": ["y"]}], "steps": [{"id": "s", "prompt": "x"}]},
           {"id": "c", "name": "C", "on": [{"mention": ["cancelar"], "extract": {
               "motivo": {"type": "string", "description": "Por quê"},
               "itens": {"type": "array", "items": {"type": "string"}},
               "nota": {"type": "integer", "optional": True}}}],
            "steps": [{"id": "s", "say": "ok"}]}]
    w = World(fls, fields=fields, understand=[{"flows": {"a": 90}}, {}],
              speak=[{"message": "Nome?", "nome": None, "porte": None, "n": None}, {"message": "ok"}])
    w.turn(message="x", id="m1")
    w.turn(message="y", id="m2")
    und = w.provider.calls[0].input.parameters.json_schema
    assert _is_strict(und)
    ext = und["properties"]["extract"]["properties"]["c"]
    assert set(ext["properties"]) == {"motivo", "itens", "nota"}
    assert "null" in ext["properties"]["nota"]["type"] and "null" in ext["properties"]["itens"]["type"]
    spk = w.provider.calls[1].input.parameters.json_schema
    assert _is_strict(spk)
    assert spk["properties"]["porte"]["enum"][:2] == ["a", "b"]
    assert "ask" not in spk["properties"]["nome"] and spk["properties"]["nome"].get("description") == "Nome"
    assert _is_strict(w.provider.calls[2].input.parameters.json_schema)
    assert _is_strict(w.provider.calls[3].input.parameters.json_schema)


def test_instruction_when_exclusions_render_as_never_when():
    # open question (LLM note §8.8): `!` phrases in an instruction's `when` are exclusions (DECISIONS T19)
    fl = {"id": "f", "name": "F", "on": [{"event": "ev"}], "steps": [{"id": "q", "prompt": "x"}]}
    w = World([fl], speak=[{"message": "ok"}],
              instructions=[{"kind": "never", "prompt": "Prometa desconto.",
                             "when": ["o lead pede desconto", "o lead insiste", "!o lead já tem proposta", "!"]},
                            {"kind": "never", "prompt": "Cite preço.", "when": "!o lead já viu a tabela"},
                            {"prompt": "Sem condição."}])
    w.turn(event="ev", key="e1")
    p = w.provider.calls[0].prompt
    assert ("- [never] [Always] Prometa desconto. (apply only when: o lead pede desconto OR o lead insiste; "
            "never when: o lead já tem proposta)") in p
    assert "- [never] [Always] Cite preço. (never when: o lead já viu a tabela)" in p
    assert "- [should] [Always] Sem condição.\n" in p + "\n"
