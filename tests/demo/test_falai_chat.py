"""`manage.py falai_chat`: the playground in a terminal, through the host (state persists)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from falai_django.providers.offline import MARK

from .support import THANKS, TRIAGE


def chat(monkeypatch, lines, *args):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    out, err = io.StringIO(), io.StringIO()
    call_command("falai_chat", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_whole_triage_then_state_wake_event_and_handoff(demo_settings, monkeypatch):
    from falai_django.models import Conversation

    out, err = chat(monkeypatch, [
        *TRIAGE,
        "/state",
        "/wake",
        '/event demo_agendada {"quando": "terça às 10h"}',
        "/silence humano",
        "alguém aí?",
        "/unsilence",
        "/quit",
        "never read",
    ], "--session", "cli-test")
    assert err == ""
    assert "Provider: offline" in out
    assert f"Ana> {MARK} Descubra quem é e de onde fala. Pergunte o nome da pessoa" in out
    assert f"Ana> {MARK} {THANKS}" in out
    assert 'data: {"nome": "João", "empresa": "Acme", "tamanho": "11-50", "confirmado": true}' in out
    assert "wake silence:lembrete:cli-test:" in out
    assert "Ana> Oi de novo! Um vendedor já está com o seu contato. Ficou alguma dúvida?" in out
    assert ("Ana> Prontinho! Sua demonstração ficou marcada para terça às 10h. "
            "Amanhã, neste mesmo horário, te mando um lembrete.") in out
    assert "(wake scheduled: agenda#crm" not in out  # the event key is the chat's own
    assert "(silenced: humano" in out
    after_silence = out.split("you> alguém aí?")[1].split("you> /unsilence")[0]
    assert "Ana>" not in after_silence  # silenced: nothing said
    assert "never read" not in out and out.rstrip().endswith("bye")
    assert Conversation.objects.get(pk="cli-test").blob["data"]["confirmado"] is True


@pytest.mark.django_db(transaction=True)
def test_state_persists_between_chats_and_bad_commands_are_explained(demo_settings, monkeypatch):
    chat(monkeypatch, TRIAGE[:2], "--session", "cli-2")
    out, err = chat(monkeypatch, ["Acme", "/event", "/event x {nope", "/frobnicate", "/wake"],
                    "--session", "cli-2", "--no-stream")
    assert f"Ana> {MARK} Pergunte quantas pessoas trabalham lá" in out  # carried on where it stopped
    assert "usage: /event name" in err and "not JSON" in err and "unknown command /frobnicate" in err
    assert "Ana> Oi! Ainda está por aí?" in out


@pytest.mark.django_db(transaction=True)
def test_silence_before_the_first_message_is_explained_and_creates_nothing(demo_settings, monkeypatch):
    from falai_django.models import Conversation

    out, err = chat(monkeypatch, ["/silence humano", "/unsilence"], "--session", "cli-new")
    assert err.count("no conversation yet: say something first") == 2
    assert "(silenced" not in out and not Conversation.objects.filter(pk="cli-new").exists()
