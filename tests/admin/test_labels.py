"""The handoff pages' labels and table headers are capitalised, like the admin's own (issue 55: "form",
"time", "status"… sat beside "Reason", "Transcript", "Status"). Checked on the conversation page,
the bulk silence form, the desk's queue and the desk's conversation, in English and Portuguese."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

from falai_django import handoff

from .conftest import CHANGELIST, admin_client, make_user, page_url, say

pytestmark = pytest.mark.django_db

SID = "5511"
DESK = f"{CHANGELIST}desk/"
OUTCOME_HEADERS = ["Time", "Flow · step", "Status", "Code", "Message", "Detail", "Next", "Until"]
RUN_HEADERS = ["Flow · step", "Status", "Waiting until", "Asked", "Visits", "Run"]


def headers(html: str, section: str) -> list[str]:
    """The <th> texts inside the element with id `section` (up to the next <section>)."""
    part = html.split(f'id="{section}"', 1)[1].split("<section", 1)[0]
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", th)).strip()
            for th in re.findall(r"<th[^>]*>(.*?)</th>", part, re.S)]


def labels(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", text).strip() for text in re.findall(r"<label[^>]*>(.*?)</label>", html, re.S)]


@pytest.fixture
def silenced(run_on_commit):
    run_on_commit(say, SID, "oi", "m1")  # the agent asks: a live run, outcomes
    handoff.take_over(SID, "alice")
    return SID


def test_the_conversation_page_capitalises_its_labels(silenced):
    user = make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    html = admin_client(user).get(page_url(SID)).content.decode()

    assert headers(html, "outcomes") == OUTCOME_HEADERS
    runs = headers(html, "runs")
    assert runs and set(runs) <= set(RUN_HEADERS) and {"Flow · step", "Status", "Asked", "Run"} <= set(runs)
    state = html.split('id="handoff-state"', 1)[1].split("</p>", 1)[0]
    assert "<small>Form: stop" in state and "form:" not in state
    assert 'aria-label="Form"' in html and 'aria-label="form"' not in html
    for lowercase in ("time", "status", "code", "detail", "next", "until", "asked", "visits", "run", "flow · step"):
        assert f"<th>{lowercase}</th>" not in html, lowercase


def test_the_bulk_silence_form_capitalises_its_labels(silenced):
    user = make_user("alice", "view_conversation", "handoff_conversation")
    html = admin_client(user).post(CHANGELIST, {"action": "silence_selected", ACTION_CHECKBOX_NAME: [SID],
                                                "index": 0}).content.decode()

    assert 'id="silence-selected-form"' in html
    assert labels(html) == ["Reason", "Form"]


def test_the_desk_capitalises_its_labels(silenced):
    user = make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    client = admin_client(user)

    queue = client.get(f"{DESK}?q=open").content.decode()
    assert re.findall(r"<th>([^<]*)</th>", queue) == ["Conversation", "Owner", "Handoff", "Last customer message"]

    page = client.get(f"{DESK}{SID}/").content.decode()
    state = page.split('id="desk-handoff-state"', 1)[1].split("</p>", 1)[0]
    assert "<small>Form: stop</small>" in state and "form:" not in state


def test_the_capitalised_labels_in_portuguese(silenced):
    user = make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    client = admin_client(user)
    pt = {"accept-language": "pt-br"}

    html = client.get(page_url(SID), headers=pt).content.decode()
    assert headers(html, "outcomes") == ["Hora", "Fluxo · etapa", "Situação", "Código", "Mensagem", "Detalhe",
                                         "Próximo", "Até"]
    assert {"Fluxo · etapa", "Situação", "Perguntas feitas", "Visitas", "Execução"} <= set(headers(html, "runs"))
    assert "<small>Forma: stop" in html
    queue = client.get(f"{DESK}?q=open", headers=pt).content.decode()
    assert re.findall(r"<th>([^<]*)</th>", queue) == ["Conversa", "Responsável", "Transferência",
                                                      "Última mensagem do cliente"]
