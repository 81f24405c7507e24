"""Issue 48, media out: a `say` step with `media: {"slug": ...}` goes out as the media
`FALAI["WHATSAPP"]["MEDIA"]` maps it to, the text as its caption where the type takes one (as a
text right after where it does not), and a slug the mapping lacks is a system-check error."""

from __future__ import annotations

import pytest
from django.test import Client

from falai_django import falai
from falai_django.channels.whatsapp.checks import check_whatsapp
from falai_django.host.delivery import send_pending
from falai_django.models import History
from falai_django.testing import mock_provider

from . import agents
from .pages import admin_page
from .payloads import WA_ID, deliver, envelope, text

pytestmark = pytest.mark.django_db(transaction=True)

TABELA = {"type": "document", "link": "https://example.com/tabela.pdf", "filename": "tabela.pdf"}
LOGO = {"type": "image", "id": "1234567890"}
RECADO = {"type": "audio", "link": "https://example.com/recado.ogg"}


def media_agent(*steps: dict) -> None:
    f = falai()
    agents._current["agent"] = f.agent(
        name="Ana", provider=mock_provider(speak=[{"message": "ok"}] * 10), clock=agents.clock(),
        flows=[f.flow({"id": "precos", "name": "Preços", "on": [{"message": []}], "steps": list(steps)})])


@pytest.fixture(autouse=True)
def mapping(settings):
    whatsapp = {**settings.FALAI["WHATSAPP"], "MEDIA": {"tabela": TABELA, "logo": LOGO, "recado": RECADO}}
    settings.FALAI = {**settings.FALAI, "WHATSAPP": whatsapp}


def say_oi() -> None:
    assert deliver(Client(), envelope([text("oi", "wamid.IN1", agents.START)])).status_code == 200


def test_a_say_with_a_document_is_one_document_message_with_the_text_as_its_caption(graph):
    media_agent({"id": "tabela", "say": "Segue a tabela de preços.", "media": {"slug": "tabela"}})
    say_oi()

    assert graph.bodies() == [{
        "messaging_product": "whatsapp", "recipient_type": "individual", "to": WA_ID,
        "biz_opaque_callback_data": History.objects.get(role="assistant").idempotency_key,
        "type": "document",
        "document": {"link": "https://example.com/tabela.pdf", "filename": "tabela.pdf",
                     "caption": "Segue a tabela de preços."},
    }]
    row = History.objects.get(role="assistant")
    assert row.send_status == "sent" and row.channel_message_id == "wamid.OUT1"
    assert row.media == {"slug": "tabela"} and row.content == "Segue a tabela de preços."
    assert 'class="falai-media">with media: tabela</span>' in admin_page(WA_ID)


def test_an_uploaded_image_goes_by_its_id(graph):
    media_agent({"id": "logo", "say": "Nossa marca", "media": {"slug": "logo"}})
    say_oi()

    body = graph.bodies()[0]
    assert body["type"] == "image" and body["image"] == {"id": "1234567890", "caption": "Nossa marca"}


def test_audio_takes_no_caption_so_the_text_follows_it_and_a_retry_sends_only_what_is_missing(graph):
    media_agent({"id": "recado", "say": "Ouça o recado.", "media": {"slug": "recado"}})
    graph.script.append((200, None, {}))  # the audio goes out
    graph.answer("server_error")  # the text after it does not
    say_oi()

    row = History.objects.get(role="assistant")
    assert [b["type"] for b in graph.bodies()] == ["audio", "text"]
    assert graph.bodies()[0]["audio"] == {"link": "https://example.com/recado.ogg"}
    assert row.send_status == "pending" and "131000" in row.send_error
    assert row.media["sent_media_wamid"] == "wamid.OUT1"  # the first part is remembered

    History.objects.filter(pk=row.pk).update(next_attempt_at=None)
    assert send_pending(WA_ID) == 1

    assert [b["type"] for b in graph.bodies()] == ["audio", "text", "text"]  # the audio is not sent twice
    assert graph.texts()[-1] == "Ouça o recado."
    assert {b["biz_opaque_callback_data"] for b in graph.bodies()} == {row.idempotency_key}
    row.refresh_from_db()
    assert row.send_status == "sent" and row.channel_message_id == "wamid.OUT3"


def test_a_slug_the_mapping_lacks_at_send_time_fails_the_row_naming_it(graph, settings):
    media_agent({"id": "catalogo", "say": "Veja o catálogo.", "media": {"slug": "catalogo"}})
    say_oi()

    row = History.objects.get(role="assistant")
    assert graph.bodies() == [] and row.send_status == "failed"
    assert '"catalogo" is not in FALAI["WHATSAPP"]["MEDIA"]' in row.send_error


def test_a_say_without_media_is_still_a_text(graph):
    media_agent({"id": "oi", "say": "Olá!"})
    say_oi()
    assert graph.texts() == ["Olá!"] and graph.bodies()[0]["type"] == "text"


def check(settings) -> list[tuple[str, str]]:
    return [(p.id, p.msg) for p in check_whatsapp()]


def test_the_system_check_names_the_flow_the_step_and_the_slug_the_mapping_lacks(settings):
    media_agent({"id": "tabela", "say": "Segue a tabela.", "media": {"slug": "tabela"}},
                {"id": "folheto", "say": "E o folheto.", "media": {"slug": "folheto"}})
    assert check(settings) == [(
        "falai_django.E056",
        'Flow "precos", step "folheto": the media slug "folheto" is not in FALAI["WHATSAPP"]["MEDIA"]: the message '
        "could not be sent.")]


def test_manage_py_check_stops_on_an_unmapped_slug(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    media_agent({"id": "folheto", "say": "E o folheto.", "media": {"slug": "folheto"}})
    with pytest.raises(SystemCheckError, match='step "folheto": the media slug "folheto"'):
        call_command("check")


@pytest.mark.parametrize("entry, says", [
    ({"type": "pdf", "link": "https://x/y.pdf"}, "has type 'pdf'"),
    ({"type": "document"}, 'exactly one of "id"'),
    ({"type": "image", "id": "1", "link": "https://x/y.png"}, 'exactly one of "id"'),
])
def test_a_malformed_mapping_entry_is_an_error(settings, entry, says):
    media_agent({"id": "oi", "say": "Olá!"})
    settings.FALAI = {**settings.FALAI, "WHATSAPP": {**settings.FALAI["WHATSAPP"], "MEDIA": {"x": entry}}}
    found = check(settings)
    assert [p[0] for p in found] == ["falai_django.E055"] and says in found[0][1]


def test_a_stored_flow_with_an_unmapped_slug_is_saved_with_a_warning(settings):
    from falai_django.flows.running import check_spec

    spec = {"id": "promo", "steps": [{"id": "folheto", "say": "E o folheto.", "media": {"slug": "folheto"}}]}
    warnings = check_spec("promo", spec, agents.current_agent())
    assert any('step "folheto": the media slug "folheto"' in w for w in warnings)
    settings.FALAI = {**settings.FALAI, "WHATSAPP": {**settings.FALAI["WHATSAPP"], "MEDIA": {"folheto": TABELA}}}
    assert not any("media slug" in w for w in check_spec("promo", spec, agents.current_agent()))
