"""The conversation list fits a 1400 px wide window without scrolling sideways (issue 55), in a
real browser (Playwright driving Debian's Chromium) against the live server, with rows as long as
they come: long ids, flow and step names, owners and silence reasons, every status, three dates
and a pending wake a row. Nothing is dropped to make it fit: every value is still on the page
(the long ones whole in the cell's title, when the cell shows them cut).

Checked with the demo's dates ("Y-m-d H:i:s") and with Django's own en-us ones ("Dec. 7, 2026,
2:50 p.m."), which are longer. Saves test-artifacts/admin-conversation-list-1400.png.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import override_settings
from django.utils import timezone
from django.utils.formats import reset_format_cache

from falai_django.models import Conversation, Wake

from .conftest import CHANGELIST, make_user

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
REASON = ("cliente pediu para falar com uma pessoa sobre o contrato de manutenção anual da filial de "
          "Campinas e a segunda via do boleto vencido em novembro")
OWNER = "maria.aparecida.dos.santos.oliveira@atendimento-empresa-exemplo.com.br"
FLOW, STEP = "orcamento_instalacao_residencial_completa", "confirmar_endereco_e_data_preferida_do_cliente"

WIDTHS = """() => {
  const doc = document.documentElement, list = document.getElementById('changelist');
  const results = document.querySelector('#changelist .results');
  const table = document.getElementById('result_list');
  return {page: [doc.scrollWidth, doc.clientWidth], changelist: [list.scrollWidth, list.clientWidth],
          results: [results.scrollWidth, results.clientWidth],
          table: table.getBoundingClientRect().width, container: results.getBoundingClientRect().width,
          columns: [...table.querySelectorAll('thead th')].map(th => [th.className, Math.round(th.getBoundingClientRect().width)]),
          tallest: Math.max(...[...table.querySelectorAll('tbody tr')].map(tr => tr.getBoundingClientRect().height))};
}"""


def rows() -> list[str]:
    now = timezone.now()
    ids = []
    for n in range(24):
        sid = f"whatsapp:+55119{n:08d}@{'cliente-com-identificador-longo' if n % 3 == 0 else 'c'}.example"
        status = n % 4  # idle, asking, waiting, silenced
        Conversation.objects.create(
            id=sid, version=1, blob={}, run_count=1 if status in (1, 2) else 0,
            asking_flow=FLOW if status == 1 else None, asking_step=STEP if status == 1 else None,
            human_owner=OWNER if status == 3 and n % 2 else None,
            silenced_reason=REASON if status == 3 else None,
            last_user_at=now - timedelta(minutes=n), last_assistant_at=now - timedelta(minutes=n, seconds=30))
        Wake.objects.create(conversation_id=sid, key=f"wake:{FLOW}:{n}", at=now + timedelta(hours=n))
        ids.append(sid)
    return ids


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("formats", ["project", "django"])
def test_the_conversation_list_fits_1400_px(live_server, new_page, formats):
    make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    ids = rows()
    page = new_page(width=1400, height=900)
    page.goto(f"{live_server.url}/admin/login/?next={CHANGELIST}")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#result_list")
    # Django's own date format (no FORMAT_MODULE_PATH): the longest dates the list shows
    with override_settings(**({"FORMAT_MODULE_PATH": None} if formats == "django" else {})):
        reset_format_cache()  # FORMAT_MODULE_PATH is not among the settings whose change resets it
        page.reload()
        page.wait_for_selector("#result_list")
        page.wait_for_load_state("load")
        widths = page.evaluate(WIDTHS)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"admin-conversation-list-1400-{formats}.png"))
    reset_format_cache()

    assert widths["tallest"] <= 220, f"a row grew too tall to read: {widths}"
    assert widths["page"][0] <= widths["page"][1], f"the page scrolls sideways: {widths}"
    assert widths["changelist"][0] <= widths["changelist"][1], widths
    assert widths["results"][0] <= widths["results"][1], f"the table is wider than its box: {widths}"
    assert widths["table"] <= widths["container"] + 0.5, widths

    # Nothing dropped: each row's values are on the page; a long silence reason shows two lines
    # and is whole in the cell's title.
    text = page.locator("#result_list").inner_text()
    for sid in ids:
        assert sid in text
    for value in (OWNER, f"{FLOW} · {STEP}"):
        assert value in text, value
    assert page.locator(f'#result_list .falai-clip[title="{REASON}"]').count() == 6
    for status in ("idle", "asking", "waiting", "silenced"):
        assert status in text
    # the dates wrap between their words only ("2026-12-07" stays whole)
    assert page.locator("#result_list .falai-word").count() >= 3 * len(ids)
    assert page.evaluate("() => [...document.querySelectorAll('#result_list .falai-word')]"
                         ".every(w => w.getClientRects().length === 1)")
