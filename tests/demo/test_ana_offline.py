"""The demo agent, offline: the whole Triagem from "oi" to the thank-you, the confirm loop, the
silence follow-up and the event flow — through `agent.turn` and through the host."""

from __future__ import annotations

import importlib
import sys

import pytest

from falai_django.providers.offline import MARK, OfflineProvider
from falai_django.testing import fake_clock
from project.agents import build_ana, make_provider

from .support import START, THANKS, TRIAGE


def converse(agent, texts, *, session=None, history=None, sid="5511999990000"):
    """Play messages through agent.turn as a host would; returns (session, history, results)."""
    history = list(history or [])
    results = []
    for i, text in enumerate(texts):
        r = agent.turn(session_id=sid, message=text, id=f"wamid.{len(history)}.{i}", session=session,
                       history=history)
        if r.changed:
            session = r.session
        history += [{"role": "user", "content": text}] + [{"role": "assistant", "content": m.text}
                                                          for m in r.messages]
        results.append(r)
    return session, history, results


@pytest.fixture
def agent():
    return build_ana(provider=OfflineProvider(language="pt"), clock=fake_clock(START))


def test_importing_the_demo_agents_builds_nothing_and_needs_no_key(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    sys.modules.pop("project.agents", None)
    module = importlib.import_module("project.agents")
    assert "ana" not in module._built
    assert module.ana.provider.name == "offline"
    assert module.ana is module.ana  # built once
    assert module.ana.name == "Ana" and [f.id for f in module.ana.flows] == ["triagem", "lembrete", "agenda"]


def test_a_key_selects_gemini():
    from falai_django import GeminiProvider
    from falai_django.playground.drive import provider_label

    gemini = build_ana(provider=make_provider("test-key"))
    assert isinstance(gemini.provider, GeminiProvider)
    assert provider_label(gemini) == "gemini (gemini-2.5-flash)"
    offline = build_ana(provider=make_provider(""))
    assert isinstance(offline.provider, OfflineProvider)
    assert provider_label(offline).startswith("offline (no GEMINI_API_KEY")


def test_the_triage_from_hello_to_thank_you(agent):
    session, history, results = converse(agent, TRIAGE)
    replies = [[m.text for m in r.messages] for r in results]
    assert all(len(texts) == 1 and texts[0].startswith(MARK) for texts in replies), replies
    assert "Pergunte o nome da pessoa" in replies[0][0]
    assert "Pergunte de qual empresa" in replies[1][0]
    assert "1-10 | 11-50 | 51-200 | 200+" in replies[2][0]
    assert "nome: João; empresa: Acme; tamanho: 11-50" in replies[3][0]
    assert replies[5] == [f"{MARK} {THANKS}"]
    assert session.data == {"nome": "João", "empresa": "Acme", "tamanho": "11-50", "confirmado": True}
    assert [e.reason for e in results[-1].ended] == ["end"]
    assert [e.flow_id for e in results[-1].ended] == ["triagem"]
    assert all(r.llm_calls <= 2 for r in results)


def test_a_no_loops_back_to_confirm_again(agent):
    session, history, results = converse(agent, TRIAGE[:4] + ["não"])
    assert "confirmado" not in session.data
    last = results[-1]
    codes = [(o.step_id, o.code) for o in last.outcomes]
    assert ("quem", "already-known") in codes and ("porte", "already-known") in codes
    assert [r.step_id for r in session.runs] == ["confirma"]
    session, history, results = converse(agent, ["sim", "obrigado"], session=session, history=history)
    assert session.data["confirmado"] is True
    assert results[-1].messages[0].text == f"{MARK} {THANKS}"


def test_silence_brings_back_a_customer_mid_triage(agent):
    session, history, results = converse(agent, TRIAGE[:2])
    wakes = agent.pending_wakes(session=session)
    assert [w.key.split(":")[:2] for w in wakes] == [["silence", "lembrete"]]
    r = agent.turn(session_id="5511999990000", wake=wakes[0].key, session=session, history=history)
    assert [m.text for m in r.messages] == [
        "Oi! Ainda está por aí? Quando quiser, seguimos a triagem de onde paramos."]
    # The triage is still asking; the next answer lands where it left off.
    session, history, results = converse(agent, ["Acme"], session=r.session, history=history)
    assert session.data["empresa"] == "Acme"


def test_silence_after_the_triage_offers_help(agent):
    session, history, _ = converse(agent, TRIAGE)
    [wake] = agent.pending_wakes(session=session)
    r = agent.turn(session_id="5511999990000", wake=wake.key, session=session, history=history)
    assert [m.text for m in r.messages] == [
        "Oi de novo! Um vendedor já está com o seu contato. Ficou alguma dúvida?"]
    assert agent.pending_wakes(session=r.session) == []  # once


def test_the_event_confirms_then_a_timer_reminds(agent):
    session, history, _ = converse(agent, ["oi"])
    r = agent.turn(session_id="5511999990000", event="demo_agendada", payload={"quando": "terça às 10h"},
                   key="crm:1", session=session, history=history)
    assert [m.text for m in r.messages] == [
        "Prontinho! Sua demonstração ficou marcada para terça às 10h. "
        "Amanhã, neste mesmo horário, te mando um lembrete."]
    [timer] = [e for e in r.schedule if not e.key.startswith("silence:")]
    assert (timer.at - agent.now()).total_seconds() == 86400
    r2 = agent.turn(session_id="5511999990000", wake=timer.key, session=r.session, history=history)
    assert [m.text for m in r2.messages] == ["Lembrete: a sua demonstração é terça às 10h. Até lá!"]


# -- through the host ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_triage_through_the_host(demo_settings):
    from falai_django import host
    from falai_django.models import Conversation, HistoryItem, Wake

    from . import support

    for i, text in enumerate(TRIAGE):
        result = host.handle("5511988887777", {"message": text, "id": f"wamid.{i}"})
        assert result.status == "done", result.error
    conversation = Conversation.objects.get(pk="5511988887777")
    assert conversation.blob["data"] == {"nome": "João", "empresa": "Acme", "tamanho": "11-50",
                                         "confirmado": True}
    assistant = list(HistoryItem.objects.filter(conversation=conversation, role="assistant")
                     .values_list("content", flat=True))
    assert len(assistant) == len(TRIAGE) and assistant[-1] == f"{MARK} {THANKS}"
    assert [m.text for m in support.sent] == assistant  # the sender got every reply, in order
    assert Wake.objects.filter(conversation=conversation, key__startswith="silence:lembrete:").exists()


def test_an_introduction_in_the_first_message_skips_ahead(agent):
    session, history, results = converse(agent, ["oi, sou o João da Acme"])
    assert session.data == {"nome": "João", "empresa": "Acme"}
    assert ("quem", "already-known") in [(o.step_id, o.code) for o in results[0].outcomes]
    assert "Pergunte quantas pessoas trabalham lá" in results[0].messages[0].text
