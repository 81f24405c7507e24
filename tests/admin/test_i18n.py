"""The admin speaks English and Brazilian Portuguese; the committed catalogue is complete and compiled."""

from __future__ import annotations

from pathlib import Path

import pytest

import falai_django

from .conftest import CHANGELIST, admin_client, operation_url, page_url, say

CATALOGUE = Path(falai_django.__file__).parent / "locale" / "pt_BR" / "LC_MESSAGES"


@pytest.mark.django_db
def test_conversation_page_in_brazilian_portuguese(operator, run_on_commit):
    run_on_commit(say, "5511", "oi", "m1")
    client = admin_client(operator)

    html = client.get(page_url("5511"), headers={"accept-language": "pt-br"}).content.decode()

    for label in ("Transcrição", "Assumir a conversa", "Silenciar com um motivo", "Dados coletados",
                  "Execuções ativas", "Despertares pendentes", "Resultados (mais recentes primeiro)",
                  "Enviar resposta", "A assistente está respondendo.", "Cliente", "Assistente"):
        assert label in html, label

    followed = client.post(operation_url("5511", "take-over"), headers={"accept-language": "pt-br"}, follow=True)
    assert "Conversa assumida por alice." in followed.content.decode()


@pytest.mark.django_db
def test_list_in_brazilian_portuguese(operator, run_on_commit):
    run_on_commit(say, "5511", "oi", "m1")
    html = admin_client(operator).get(CHANGELIST, headers={"accept-language": "pt-br"}).content.decode()

    for label in ("Próximo despertar", "Transferência", "Última mensagem do cliente em", "perguntando", "silenciada",
                  "Silenciar as conversas selecionadas"):
        assert label in html, label


def test_catalogue_is_complete_and_compiled():
    import polib
    po = polib.pofile(str(CATALOGUE / "django.po"))
    mo = polib.mofile(str(CATALOGUE / "django.mo"))

    assert po.untranslated_entries() == [] and po.fuzzy_entries() == []
    compiled = {(e.msgid, e.msgstr or tuple(sorted(e.msgstr_plural.items()))) for e in mo}
    written = {(e.msgid, e.msgstr or tuple(sorted(e.msgstr_plural.items()))) for e in po.translated_entries()}
    assert written <= compiled, "django.mo is stale: recompile django.po"
