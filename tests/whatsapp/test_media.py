"""Issue 48, media in: voice notes transcribed and images described on the worker that runs the
turn, through the Graph API's media lookup and download (the local fake Graph API), with the
limits, and nothing lost when any of it fails."""

from __future__ import annotations

import logging
from contextlib import closing

import pytest
from django.test import Client
from host.helpers import METRICS_TOKEN, moved, scrape

from falai_django import channels
from falai_django.host.turns import process_record
from falai_django.models import History, TurnRecord

from . import agents, media_kit
from .conftest import TOKEN
from .pages import admin_page
from .payloads import WA_ID, deliver, envelope, message

AT = agents.START
VOICE = b"OggS\x00fake-opus-voice-note" * 20
PHOTO = b"\xff\xd8\xff\xe0fake-jpeg" * 30

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media_provider(settings):
    media_kit.reset()
    settings.FALAI = {**settings.FALAI, "MEDIA": {"PROVIDER": "whatsapp.media_kit.RECORDING"}}
    return media_kit.RECORDING


def voice(wamid: str = "wamid.V1", media_id: str = "MEDIA-V1") -> dict:
    return message("audio", wamid, AT, {"id": media_id, "mime_type": "audio/ogg; codecs=opus", "voice": True,
                                        "sha256": "abc"})


def image(caption: str | None, wamid: str = "wamid.P1", media_id: str = "MEDIA-P1") -> dict:
    payload = {"id": media_id, "mime_type": "image/jpeg", "sha256": "def"}
    if caption is not None:
        payload["caption"] = caption
    return message("image", wamid, AT, payload)


def held(monkeypatch) -> None:
    """The webhook stores inputs and queues nothing (a worker runs them when the test says)."""
    monkeypatch.setattr("falai_django.channels.whatsapp.receive.enqueue_turn", lambda record_id: None)


def user_line(wamid: str) -> History:
    return History.objects.get(conversation_id=WA_ID, role="user", message_key=wamid)


def test_a_voice_note_is_fetched_on_the_worker_and_its_transcription_is_what_the_agent_reads(
        graph, media_provider, monkeypatch, settings):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}
    held(monkeypatch)
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg")
    before = scrape(token=METRICS_TOKEN)
    assert deliver(Client(), envelope([voice()])).status_code == 200

    record = TurnRecord.objects.get(input_key="wamid.V1")
    assert graph.gets == [] and media_provider.calls == []  # the webhook request fetched nothing
    assert record.input["turn"]["message"] == "[audio]"

    process_record(record.pk)

    assert graph.lookups() == ["MEDIA-V1"] and graph.downloads() == ["MEDIA-V1"]
    assert all(headers.get("Authorization") == f"Bearer {TOKEN}" for _, headers in graph.gets)
    assert media_provider.calls == [("transcribe", VOICE, "audio/ogg")]
    line = user_line("wamid.V1")
    assert line.content == "meu nome é Joana"
    assert line.media["id"] == "MEDIA-V1" and line.media["outcome"] == "transcribed" and line.media["voice"] is True
    assert graph.texts() == ["Prazer, Joana!"]  # the model read the transcription
    record.refresh_from_db()
    assert record.status == "done" and record.input["context"]["whatsapp"]["media"]["id"] == "MEDIA-V1"
    assert record.input["context"]["whatsapp"]["media"]["transcription"] == "meu nome é Joana"
    html = admin_page(WA_ID)
    assert 'class="falai-media"' in html and "transcribed voice note" in html
    after = scrape(token=METRICS_TOKEN)
    assert moved(before, after, "falai_media_total", channel="whatsapp", type="audio", outcome="transcribed") == 1
    # the transcription is a model call like the turn's own (counted, its time the model's)
    assert moved(before, after, "falai_llm_calls_total", provider="Recording", model="", result="ok") == 1


def test_the_transcription_is_kept_on_the_input_so_a_retried_turn_does_not_fetch_again(graph, media_provider,
                                                                                       monkeypatch):
    held(monkeypatch)
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg")
    deliver(Client(), envelope([voice()]))
    record = TurnRecord.objects.get(input_key="wamid.V1")

    channels.prepare_input(record)
    channels.prepare_input(TurnRecord.objects.get(pk=record.pk))  # read back: a later attempt

    assert graph.lookups() == ["MEDIA-V1"] and len(media_provider.calls) == 1
    assert TurnRecord.objects.get(pk=record.pk).input["turn"]["message"] == "meu nome é Joana"


def test_the_time_spent_downloading_and_transcribing_is_not_host_time(graph, media_provider, settings):
    settings.FALAI = {**settings.FALAI, "METRICS_TOKEN": METRICS_TOKEN}
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg", delay_s=1.0)
    before = scrape(token=METRICS_TOKEN)
    deliver(Client(), envelope([voice()]))
    after = scrape(token=METRICS_TOKEN)

    assert user_line("wamid.V1").content == "meu nome é Joana"
    assert moved(before, after, "falai_turn_duration_seconds_count") == 1
    assert moved(before, after, "falai_turn_duration_seconds_sum") < 0.9  # the 1 s download is not in it


def test_an_image_caption_is_read_and_no_image_is_fetched_unless_images_are_described(graph, media_provider):
    graph.add_media("MEDIA-P1", PHOTO, "image/jpeg")
    deliver(Client(), envelope([image("quanto custa este?")]))

    assert user_line("wamid.P1").content == "quanto custa este?"
    assert graph.gets == [] and media_provider.calls == []
    assert 'class="falai-media">image</span>' in admin_page(WA_ID)


def test_with_describe_images_the_description_follows_the_caption(graph, media_provider, settings):
    settings.FALAI = {**settings.FALAI, "MEDIA": {**settings.FALAI["MEDIA"], "DESCRIBE_IMAGES": True}}
    graph.add_media("MEDIA-P1", PHOTO, "image/jpeg")
    graph.add_media("MEDIA-P2", PHOTO[:50], "image/png")
    deliver(Client(), envelope([image("quanto custa este?")]))
    deliver(Client(), envelope([image(None, "wamid.P2", "MEDIA-P2")]))

    assert user_line("wamid.P1").content == "quanto custa este?\n[image: um tênis vermelho]"
    assert user_line("wamid.P2").content == "[image: um tênis vermelho]"  # no caption: the description alone
    assert media_provider.calls == [("describe_image", PHOTO, "image/jpeg"), ("describe_image", PHOTO[:50], "image/png")]
    assert user_line("wamid.P2").media["description"] == "um tênis vermelho"
    assert "image, described" in admin_page(WA_ID)


@pytest.mark.parametrize("problem, why", [
    ("lookup", "the media lookup answered 404"),
    ("download", "the media download answered 500"),
    ("provider", "fake overload: the model is busy"),
    ("too_large", "over MAX_BYTES (1000)"),
    ("empty", "transcribe() answered no text"),
])
def test_a_media_that_cannot_be_read_leaves_the_marker_runs_the_turn_and_says_why(
        graph, media_provider, settings, caplog, problem, why):
    settings.FALAI = {**settings.FALAI, "MEDIA": {**settings.FALAI["MEDIA"], "MAX_BYTES": 1000},
                      "METRICS_TOKEN": METRICS_TOKEN}
    options = {"lookup": {"lookup_status": 404}, "download": {"download_status": 500},
               "too_large": {"file_size": 5000}}.get(problem, {})
    graph.add_media("MEDIA-V1", VOICE[:400], "audio/ogg", **options)
    if problem == "provider":
        media_provider.answers["transcribe"] = media_kit.overloaded()
    if problem == "empty":
        media_provider.answers["transcribe"] = "   "
    before = scrape(token=METRICS_TOKEN)

    with caplog.at_level(logging.WARNING, logger="falai_django.whatsapp"):
        deliver(Client(), envelope([voice()]))

    line = user_line("wamid.V1")
    assert line.content == "[audio]" and line.media["outcome"] == "failed" and why in line.media["error"]
    assert graph.texts() == ["Oi! Com quem eu falo?"]  # the turn ran on the marker
    assert TurnRecord.objects.get(input_key="wamid.V1").status == "done"
    logged = [r.getMessage() for r in caplog.records if "MEDIA-V1" in r.getMessage()]
    assert len(logged) == 1 and WA_ID in logged[0] and why in logged[0]
    if problem == "too_large":
        assert graph.downloads() == []  # a file_size over the limit is never downloaded
    assert "voice note, not transcribed" in admin_page(WA_ID)
    assert moved(before, scrape(token=METRICS_TOKEN), "falai_media_total",
                 channel="whatsapp", type="audio", outcome="failed") == 1


def test_a_download_larger_than_it_said_is_cut_off_at_max_bytes(graph, media_provider, settings):
    settings.FALAI = {**settings.FALAI, "MEDIA": {**settings.FALAI["MEDIA"], "MAX_BYTES": 100}}
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg", file_size=50)  # the lookup understates it
    deliver(Client(), envelope([voice()]))

    assert user_line("wamid.V1").content == "[audio]" and media_provider.calls == []
    assert "over MAX_BYTES (100)" in user_line("wamid.V1").media["error"]


def test_a_provider_without_transcribe_leaves_the_marker_and_fetches_nothing(graph, settings, caplog):
    settings.FALAI = {**settings.FALAI, "MEDIA": {"PROVIDER": "whatsapp.media_kit.IMAGES_ONLY"}}
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg")
    with caplog.at_level(logging.INFO, logger="falai_django.whatsapp"):
        deliver(Client(), envelope([voice()]))

    assert user_line("wamid.V1").content == "[audio]" and graph.gets == []
    assert any("MEDIA-V1" in r.getMessage() and "no transcribe()" in r.getMessage() for r in caplog.records)


def test_provider_none_is_the_agents_own_provider(graph, settings):
    settings.FALAI = {**settings.FALAI, "MEDIA": {"PROVIDER": None}}
    heard: list[tuple[int, str]] = []

    def transcribe(data: bytes, mime_type: str) -> str:
        heard.append((len(data), mime_type))
        return "meu nome é Rita"

    agents.current_agent().provider.transcribe = transcribe  # the agent's own (scripted) provider
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg")
    deliver(Client(), envelope([voice()]))

    assert heard == [(len(VOICE), "audio/ogg")]
    assert user_line("wamid.V1").content == "meu nome é Rita" and graph.texts() == ["Prazer, Rita!"]


def test_a_factory_is_called_once_and_defaults_fill_the_keys_a_project_leaves_out(graph, settings):
    settings.FALAI = {**settings.FALAI, "MEDIA": {"PROVIDER": "whatsapp.media_kit.recording_factory"}}
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg")
    graph.add_media("MEDIA-V2", VOICE[:30], "audio/mpeg")
    deliver(Client(), envelope([voice()]))
    deliver(Client(), envelope([voice("wamid.V2", "MEDIA-V2")]))

    assert media_kit.made == ["recording"]
    assert [call[2] for call in media_kit.RECORDING.calls] == ["audio/ogg", "audio/mpeg"]


def test_the_defaults_are_the_documented_ones():
    from falai_django import conf

    assert conf.DEFAULTS["MEDIA"] == {"PROVIDER": None, "DESCRIBE_IMAGES": False, "MAX_BYTES": 16 * 1024 * 1024,
                                      "TIMEOUT": 30}
    assert conf.WHATSAPP_DEFAULTS["MEDIA"] == {}


# -- the real vendor SDKs against the fake model servers -------------------------------------------


def voice_note_through(provider, settings, graph, mime_type: str) -> None:
    """A voice note through the signed webhook, transcribed by `provider` (a real vendor SDK)."""
    settings.FALAI = {**settings.FALAI, "MEDIA": {"PROVIDER": provider}}
    graph.add_media("MEDIA-V1", VOICE, mime_type)
    deliver(Client(), envelope([voice()]))


def test_a_voice_note_through_gemini_inline_audio(graph, settings):
    import base64

    from providers.fake_gemini import FakeGemini, Reply, text_chunks

    from falai_django.providers.gemini import GeminiProvider

    server = FakeGemini()
    provider = GeminiProvider(api_key="test-key", base_url=server.base_url, sleep=lambda ms: None)
    with closing(server), closing(provider):
        server.push(Reply(chunks=text_chunks("meu nome é Carla", 2)))
        voice_note_through(provider, settings, graph, "audio/ogg; codecs=opus")

    (request,) = server.requests
    parts = request.body["contents"][0]["parts"]
    blob = next(part.get("inlineData") or part.get("inline_data") for part in parts
                if "inlineData" in part or "inline_data" in part)
    assert base64.urlsafe_b64decode(blob["data"] + "=" * (-len(blob["data"]) % 4)) == VOICE
    assert (blob.get("mimeType") or blob.get("mime_type")) == "audio/ogg"
    assert user_line("wamid.V1").content == "meu nome é Carla" and graph.texts() == ["Prazer, Carla!"]


def test_a_voice_note_through_openais_transcription_endpoint(graph, settings):
    from providers import fake_vendors

    from falai_django.providers.openai import OpenAIProvider

    server = fake_vendors.FakeVendor()
    provider = OpenAIProvider(api_key="sk-test", model="gpt-4.1-mini", base_url=server.url("/v1"),
                              sleep=lambda ms: None)
    with closing(server), closing(provider):
        server.push(fake_vendors.transcription("meu nome é Dora"))
        voice_note_through(provider, settings, graph, "audio/ogg")

    (request,) = server.requests
    assert request.path == "/v1/audio/transcriptions"
    assert request.body["model"] == "gpt-4o-mini-transcribe" and request.body["file"]["data"] == VOICE
    assert user_line("wamid.V1").content == "meu nome é Dora" and graph.texts() == ["Prazer, Dora!"]


def test_the_offline_provider_gives_a_marker_naming_the_type_and_size(graph, settings):
    settings.FALAI = {**settings.FALAI, "MEDIA": {"PROVIDER": "falai_django.providers.offline.OfflineProvider",
                                                  "DESCRIBE_IMAGES": True}}
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg")
    graph.add_media("MEDIA-P1", PHOTO, "image/jpeg")
    deliver(Client(), envelope([voice()]))
    deliver(Client(), envelope([image("e este?")]))

    assert user_line("wamid.V1").content == f"[transcription: audio/ogg, {len(VOICE)} bytes]"
    assert user_line("wamid.P1").content == f"e este?\n[image: [image description: image/jpeg, {len(PHOTO)} bytes]]"


@pytest.mark.parametrize("media, found", [
    ({"PROVIDER": "whatsapp.media_kit.RECORDING", "DESCRIBE_IMAGES": True}, []),
    ("gemini", ["falai_django.E170"]),
    ({"PROVIDER": "whatsapp.media_kit.NOPE"}, ["falai_django.E171"]),
    ({"DESCRIBE_IMAGES": "yes"}, ["falai_django.E172"]),
    ({"MAX_BYTES": 0, "TIMEOUT": -1}, ["falai_django.E172", "falai_django.E172"]),
    ({"MAXBYTES": 10}, ["falai_django.W170"]),
])
def test_the_media_setting_is_checked(settings, media, found):
    from falai_django.checks import check_media_settings

    settings.FALAI = {**settings.FALAI, "MEDIA": media}
    assert [p.id for p in check_media_settings()] == found


def test_a_provider_setting_that_does_not_import_leaves_the_marker_and_runs_the_turn(graph, settings, caplog):
    settings.FALAI = {**settings.FALAI, "MEDIA": {"PROVIDER": "whatsapp.media_kit.MISSING"}}
    graph.add_media("MEDIA-V1", VOICE, "audio/ogg")
    with caplog.at_level(logging.WARNING, logger="falai_django.whatsapp"):
        deliver(Client(), envelope([voice()]))

    assert user_line("wamid.V1").content == "[audio]" and graph.texts() == ["Oi! Com quem eu falo?"]
    assert any("MEDIA-V1" in r.getMessage() and WA_ID in r.getMessage() and "PROVIDER" in r.getMessage()
               for r in caplog.records)
