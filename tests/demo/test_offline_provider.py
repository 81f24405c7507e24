"""OfflineProvider against requests built by hand, as the persistence-and-LLM note §6.2/§6.4
shapes them: the JSON schema in `parameters.json_schema` and the stable prompt sections."""

from __future__ import annotations

import json

import pytest

from falai_django.llm.streaming import extract_message_so_far
from falai_django.llm.types import GenerateInput, GenerateParameters, Provider
from falai_django.providers.offline import MARK, OfflineProvider, match_enum, parse_boolean

SIZES = ["1-10", "11-50", "51-200", "200+"]


def _closed(props: dict) -> dict:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def understand_request(text: str, *, fields: dict | None = None, flows: list[tuple[str, str, list[str]]] = (),
                       current: tuple[str, str, list[str]] | None = None, asks: bool = False) -> GenerateInput:
    """An understand request: `current` = (flow id, step id, waiting field lines)."""
    props: dict = {}
    parts = ['## Task\nJudge the customer\'s latest message (quoted below) in the light of the conversation.']
    if current:
        flow_id, step_id, waiting = current
        body = [f'The customer is in the middle of "Triagem" ({flow_id}).', f"Current step: {step_id} — Descubra."]
        if waiting:
            body.append("This step is waiting for:")
            body.extend(f"- {line}" for line in waiting)
        body.append("The customer may carry on here or switch topics: score this flow like any other.")
        parts.append("## Current flow\n" + "\n".join(body))
    wires = ([current[0]] if current else []) + [f[0] for f in flows if not current or f[0] != current[0]]
    if wires:
        props["flows"] = _closed({w: {"type": ["integer", "null"]} for w in wires})
        lines = ["Score every flow from 0 to 100, the current one included."]
        for n, wire in enumerate(wires, 1):
            lines.append(f"{n}. {wire} — {wire.title()}")
            for fw, _name, phrases in flows:
                if fw == wire and phrases:
                    positive = [p for p in phrases if not p.startswith("!")]
                    negative = [p[1:] for p in phrases if p.startswith("!")]
                    if positive:
                        lines.append("   The customer: " + "; ".join(positive))
                    if negative:
                        lines.append("   Score 0 when: " + "; ".join(negative))
        parts.append("## Flows the customer may want\n" + "\n".join(lines))
    if fields:
        props["fields"] = _closed(fields)
        lines = ["Report a value only when the customer gave it in this message."]
        lines.extend(f"- {w} ({s['type'][0]})" for w, s in fields.items())
        parts.append("## Details the customer may have given\n" + "\n".join(lines))
    if asks:
        props["asks"] = {"type": ["boolean", "null"]}
    parts.append(f'## Customer\'s latest message\n"""\n{text}\n"""')
    parts.append("## Output\nReply with exactly one JSON object.")
    return GenerateInput(prompt="\n\n".join(parts), system='## Identity\nYou are "Ana".',
                         parameters=GenerateParameters(json_schema=_closed(props), schema_name="understand"))


def speak_request(text: str | None, *, pending: list[tuple[str, dict, str | None]], guideline: str,
                  known: dict | None = None, history: list | None = None, idle: bool = False) -> GenerateInput:
    props: dict = {"message": {"type": ["string", "null"]}}
    parts = []
    if not idle:
        parts.append("## Flow\nTriagem")
    parts.append(f"## Guideline for your reply (adapt to the conversation)\n{guideline}")
    if pending:
        lines = ["Ask for these in order, at this step's pace."]
        for wire, schema, ask in pending:
            props[wire] = schema
            enum = f" [{' | '.join(schema['enum'])}]" if schema.get("enum") else ""
            lines.append(f"- {wire} ({schema['type'][0]}){enum}")
            if ask:
                lines.append(f"  How to ask: {ask}")
        parts.append("## Still to collect\n" + "\n".join(lines))
    if known:
        parts.append("## Already known\nThese facts are settled; never ask for them again.\n"
                     + "\n".join(f"- {k}: {json.dumps(v, ensure_ascii=False)}" for k, v in known.items()))
    if text is not None:
        parts.append(f'## Customer\'s latest message\n"{text}"')
    else:
        parts.append("## Situation\nThere is no new message from the customer. You speak first.")
    parts.append('## Response format\nReply with one JSON object and nothing else.')
    return GenerateInput(prompt="\n\n".join(parts), history=history or [],
                         parameters=GenerateParameters(json_schema=_closed(props), schema_name="speak"))


STRING = {"type": ["string", "null"]}
BOOLEAN = {"type": ["boolean", "null"]}
NUMBER = {"type": ["number", "null"]}
SIZE = {"type": ["string", "null"], "enum": SIZES}


@pytest.fixture
def provider() -> OfflineProvider:
    return OfflineProvider(language="pt")


def test_it_is_a_provider_named_offline(provider):
    assert isinstance(provider, Provider)
    assert provider.name == "offline"


# -- understand ----------------------------------------------------------------------------


def test_no_matching_phrase_scores_zero_so_the_catch_all_takes_over(provider):
    request = understand_request("oi", flows=[("precos", "Preços", ["quero saber o preço", "quanto custa"])])
    assert provider.generate_message(request).structured == {"flows": {"precos": 0}}


def test_a_matching_phrase_scores_high_and_an_exclusion_scores_zero(provider):
    flows = [("precos", "Preços", ["quanto custa o plano", "!já sou cliente"])]
    assert provider.generate_message(understand_request("quanto custa o plano anual?", flows=flows)
                                     ).structured["flows"] == {"precos": 90}
    assert provider.generate_message(understand_request("já sou cliente, quanto custa o plano?", flows=flows)
                                     ).structured["flows"] == {"precos": 0}


def test_the_current_flow_keeps_a_neutral_score(provider):
    request = understand_request("Acme", current=("triagem", "quem", ["empresa (string)"]),
                                 fields={"empresa": STRING})
    reply = provider.generate_message(request).structured
    assert reply["flows"] == {"triagem": 60}
    assert reply["fields"] == {"empresa": "Acme"}


def test_enum_from_a_number_inside_a_range(provider):
    reply = provider.generate_message(understand_request("umas 30 pessoas", fields={"tamanho": SIZE})).structured
    assert reply == {"fields": {"tamanho": "11-50"}}
    assert match_enum("somos 200+", SIZES) == "200+"
    assert match_enum("mais ou menos 1.500", SIZES) == "200+"
    assert match_enum("11-50", SIZES) == "11-50"
    assert match_enum("não sei", SIZES) is None


def test_number_and_boolean_fields(provider):
    fields = {"idade": NUMBER, "aceita": BOOLEAN}
    assert provider.generate_message(understand_request("tenho 42, e sim", fields=fields)).structured == {
        "fields": {"idade": 42, "aceita": True}}
    assert parse_boolean("não, está errado") is False
    assert parse_boolean("isso mesmo") is True
    assert parse_boolean("11-50") is None


def test_free_text_only_answers_the_field_the_current_step_asked(provider):
    fields = {"nome": STRING, "empresa": STRING, "tamanho": SIZE}
    # No current flow (the first message): "oi" is never anybody's name.
    assert provider.generate_message(understand_request("oi", fields=fields)).structured["fields"] == {
        "nome": None, "empresa": None, "tamanho": None}
    waiting = ("triagem", "quem", ["nome (string)", "empresa (string)"])
    reply = provider.generate_message(understand_request("meu nome é João", fields=fields, current=waiting))
    assert reply.structured["fields"] == {"nome": "João", "empresa": None, "tamanho": None}
    reply = provider.generate_message(understand_request("sou o João da Acme", fields=fields, current=waiting))
    assert reply.structured["fields"] == {"nome": "João", "empresa": "Acme", "tamanho": None}
    # An introduction names the customer even before anything was asked.
    reply = provider.generate_message(understand_request("oi, sou a Maria, da Padaria Central", fields=fields))
    assert reply.structured["fields"] == {"nome": "Maria", "empresa": "Padaria Central", "tamanho": None}
    # A question is not an answer.
    reply = provider.generate_message(understand_request("como funciona?", fields=fields, current=waiting))
    assert reply.structured["fields"]["nome"] is None


def test_aliased_fields_answer_under_their_alias(provider):
    request = understand_request("umas 30 pessoas", fields={"d1": SIZE})
    assert provider.generate_message(request).structured == {"fields": {"d1": "11-50"}}


def test_asks_is_true_for_a_question(provider):
    assert provider.generate_message(understand_request("quanto custa?", asks=True)).structured == {"asks": True}
    assert provider.generate_message(understand_request("ok", asks=True)).structured == {"asks": False}


def test_understand_is_deterministic(provider):
    request = understand_request("sou o João da Acme", fields={"nome": STRING, "empresa": STRING},
                                 current=("triagem", "quem", ["nome (string)", "empresa (string)"]))
    first = provider.generate_message(request)
    assert all(provider.generate_message(request).structured == first.structured for _ in range(3))
    assert json.loads(first.message) == first.structured


# -- speak ---------------------------------------------------------------------------------


def test_speak_phrases_the_guideline_and_the_first_missing_ask(provider):
    request = speak_request("oi", guideline="Descubra quem é e de onde fala.", pending=[
        ("nome", STRING, "Pergunte o nome da pessoa."), ("empresa", STRING, "Pergunte a empresa.")])
    reply = provider.generate_message(request)
    assert reply.structured == {
        "message": f"{MARK} Descubra quem é e de onde fala. Pergunte o nome da pessoa.",
        "nome": None, "empresa": None}
    assert reply.message == reply.structured["message"]


def test_speak_offers_an_enums_options(provider):
    request = speak_request("Acme", guideline="Collect what is still missing.", pending=[
        ("tamanho", SIZE, "Pergunte quantas pessoas trabalham lá.")])
    message = provider.generate_message(request).structured["message"]
    assert message.startswith(MARK)
    assert "Pergunte quantas pessoas trabalham lá." in message
    assert "1-10 | 11-50 | 51-200 | 200+" in message


def test_speak_fills_a_boolean_and_acknowledges_it(provider):
    pending = [("confirmado", BOOLEAN, "Resuma e pergunte se está certo.")]
    known = {"nome": "João", "tamanho": "11-50"}
    asked = provider.generate_message(speak_request("11-50", guideline="x", pending=pending, known=known))
    assert asked.structured["confirmado"] is None
    assert "nome: João" in asked.structured["message"] and "(sim / não)" in asked.structured["message"]
    answered = provider.generate_message(speak_request("sim", guideline="x", pending=pending, known=known))
    assert answered.structured == {"message": f"{MARK} Anotado: confirmado = sim.", "confirmado": True}
    refused = provider.generate_message(speak_request("não", guideline="x", pending=pending, known=known))
    assert refused.structured["confirmado"] is False


def test_speak_fills_a_lone_pending_text_field_only_as_an_answer(provider):
    pending = [("cidade", STRING, "Pergunte a cidade.")]
    asked = [{"role": "assistant", "content": "De qual cidade?"}]
    assert provider.generate_message(speak_request("Recife", guideline="g", pending=pending, history=asked)
                                     ).structured["cidade"] == "Recife"
    # Nothing was asked yet: the first message is not an answer.
    assert provider.generate_message(speak_request("Recife", guideline="g", pending=pending)
                                     ).structured["cidade"] is None
    # A value the understand call already placed elsewhere is not reused.
    assert provider.generate_message(speak_request("Recife", guideline="g", pending=pending, history=asked,
                                                   known={"estado": "Recife"})).structured["cidade"] is None


def test_speak_on_a_wake_speaks_first_from_the_guideline(provider):
    reply = provider.generate_message(speak_request(None, guideline="Retome a conversa.", pending=[]))
    assert reply.structured == {"message": f"{MARK} Retome a conversa."}


def test_the_idle_speaker_says_it_has_no_model(provider):
    reply = provider.generate_message(speak_request("e aí?", guideline="Answer.", pending=[], idle=True))
    assert reply.structured["message"].startswith(MARK)
    assert "GEMINI_API_KEY" in reply.structured["message"] and "e aí?" in reply.structured["message"]


def test_english_scaffolding():
    reply = OfflineProvider().generate_message(speak_request(
        "yes", guideline="g", pending=[("ok", BOOLEAN, "Ask whether it is right.")]))
    assert reply.structured == {"message": f"{MARK} Noted: ok = yes.", "ok": True}


def test_streaming_delivers_the_envelope_in_chunks(provider):
    request = speak_request("oi", guideline="Descubra quem é.", pending=[("nome", STRING, "Pergunte o nome.")])
    chunks = list(provider.generate_message_stream(request))
    assert len(chunks) > 3 and chunks[-1].done
    assert chunks[-1].structured == provider.generate_message(request).structured
    assert extract_message_so_far(chunks[-1].accumulated) == chunks[-1].structured["message"]
    assert extract_message_so_far(chunks[2].accumulated) != chunks[-1].structured["message"]


# -- compaction summary ----------------------------------------------------------------------


def test_the_summary_call_is_marked_and_lists_the_history(provider):
    request = GenerateInput(prompt="Summarize the conversation.", history=[
        {"role": "user", "content": "oi"}, {"role": "assistant", "content": "Oi! Com quem falo?"}],
        parameters=GenerateParameters(json_schema={}, schema_name=None))
    out = provider.generate_message(request)
    assert out.structured is None
    assert out.message.startswith(MARK)
    assert "- user: oi" in out.message and "- assistant: Oi! Com quem falo?" in out.message


def test_a_fixed_question_is_never_asked_twice(provider):
    """With a real engine: the answer before a fixed question only answers; the question follows."""
    from falai_django import falai
    from falai_django.testing import fake_clock

    f = falai().fields({"cidade": {"type": "string", "ask": "Pergunte a cidade."}})
    agent = f.agent(name="Ana", provider=provider, clock=fake_clock("2026-09-20T10:00:00Z"), flows=[f.flow({
        "id": "c", "name": "Cidade", "on": [{"message": []}], "steps": [
            {"id": "q", "collect": ["cidade"], "question": "De qual cidade você fala?"},
            {"id": "fim", "say": "Valeu, {{data.cidade}}!"}]})])
    r = agent.turn(session_id="s", message="quanto custa?", id="1")
    assert [(m.kind, m.text) for m in r.messages] == [
        ("ai", f"{MARK} Sem modelo, não sei responder a “quanto custa?”."), ("verbatim", "De qual cidade você fala?")]
    history = [{"role": "user", "content": "quanto custa?"}] + [{"role": "assistant", "content": m.text}
                                                               for m in r.messages]
    r2 = agent.turn(session_id="s", message="Recife", id="2", session=r.session, history=history)
    assert [m.text for m in r2.messages] == ["Valeu, Recife!"]


def test_routing_and_mentions_with_a_real_engine(provider):
    """A catch-all takes "oi"; a flow whose phrases match takes the floor from it; a mention
    flow starts beside the conversation with its extract values as input."""
    from falai_django import falai
    from falai_django.testing import fake_clock

    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome."}})
    agent = f.agent(name="Ana", provider=provider, clock=fake_clock("2026-09-20T10:00:00Z"), flows=[
        f.flow({"id": "precos", "name": "Preços", "on": [{"message": ["quanto custa o plano", "!já sou cliente"]}],
                "steps": [{"id": "tabela", "say": "O plano custa R$ 99."}]}),
        f.flow({"id": "urgente", "name": "Urgente", "on": [{"mention": ["sistema fora do ar"],
                                                              "extract": {"clientes": {"type": "number"}}}],
                "steps": [{"id": "alerta", "say": "Alerta: {{input.clientes}} clientes parados."}]}),
        f.flow({"id": "triagem", "name": "Triagem", "on": [{"message": []}],
                "steps": [{"id": "quem", "collect": ["nome"]}]}),
    ])
    r = agent.turn(session_id="s", message="oi", id="1")
    assert [s.flow_id for s in r.started] == ["triagem"]
    r = agent.turn(session_id="s", message="quanto custa o plano?", id="2", session=r.session)
    assert [s.flow_id for s in r.started] == ["precos"]
    assert [m.text for m in r.messages][0] == "O plano custa R$ 99."
    r = agent.turn(session_id="s", message="o sistema está fora do ar para 40 clientes", id="3", session=r.session)
    assert [s.flow_id for s in r.started] == ["urgente"]
    assert "Alerta: 40 clientes parados." in [m.text for m in r.messages]
