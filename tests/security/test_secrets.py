"""No secret — the provider API key, the webhook secret, Django's SECRET_KEY — ever shows up in
a log line, an API response, the run log, or an error page (DEBUG=False and DEBUG=True).

Logs are captured at DEBUG from the root logger (every library included) while the API is
driven through good and bad webhooks, a real `GeminiProvider` (holding the canary key) talks
to a fake Gemini that answers errors or is unreachable, and the admin is used.
"""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from providers.fake_gemini import FakeGemini, Reply, error_body

from falai_django import GeminiProvider
from falai_django.testing.postgres import free_port

from . import kit

pytestmark = pytest.mark.django_db(transaction=True)

SID = "5511999990000"


def _leaks(text: str) -> list[str]:
    return [secret for secret in kit.SECRETS if secret in text]


def _log_text(caplog) -> str:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    lines = []
    for record in caplog.records:
        lines.append(formatter.format(record))  # includes the formatted traceback, if any
        lines.append(repr(record.args))
    return "\n".join(lines)


def _gemini_agent(base_url: str):
    provider = GeminiProvider(api_key=kit.API_KEY, model="gemini-2.5-flash", base_url=base_url, retries=0,
                              timeout_ms=2000)
    return kit.reset(kit.build_agent(provider=provider))


def _operator():
    return kit.token_client("operator", "change_conversation", "view_conversation")


def _bodies(*responses) -> str:
    out = []
    for response in responses:
        if getattr(response, "streaming", False):
            out.append(b"".join(response.streaming_content).decode())
        else:
            out.append(response.content.decode())
    return "\n".join(out)


def test_webhook_traffic_never_logs_or_echoes_the_secret(caplog):
    caplog.set_level(logging.DEBUG)
    responses = [
        kit.signed_post(Client(), kit.api_url(SID, "messages"), {"text": "oi", "id": "w1"}),
        kit.signed_post(Client(), kit.api_url(SID, "messages"), {"text": "oi", "id": "w2"}, secret="wrong"),
        kit.signed_post(Client(), kit.api_url(SID, "messages"), {"text": "oi", "id": "w3"}, timestamp=1),
        kit.signed_post(Client(), kit.api_url(SID, "silence"), {"reason": "humano"}),
        kit.signed_post(Client(), kit.api_url(SID, "messages/stream"), {"text": "oi", "id": "w4"}),
    ]
    assert responses[0].status_code == 200 and responses[1].status_code == 401
    assert _leaks(_bodies(*responses)) == []
    assert _leaks(_log_text(caplog)) == []


@pytest.mark.parametrize("failure", ["auth-400", "server-500", "quota-429", "unreachable"])
def test_provider_failures_never_log_or_return_the_api_key(caplog, failure):
    from falai_django.models import TurnRecord

    caplog.set_level(logging.DEBUG)
    if failure == "unreachable":
        fake = None
        _gemini_agent(f"http://127.0.0.1:{free_port()}")
    else:
        status, code, message = {
            "auth-400": (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
            "server-500": (500, "INTERNAL", "An internal error has occurred."),
            "quota-429": (429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Generate Content'."),
        }[failure]
        fake = FakeGemini(responder=lambda recorded: Reply(status=status, body=error_body(status, code, message)))
        _gemini_agent(fake.base_url)
    try:
        client = _operator()
        responses = [
            kit.post_json(client, kit.api_url(SID, "messages"), {"text": "oi", "id": "g1"}),
            kit.post_json(client, kit.api_url(SID, "starts"), {"flow": "campanha", "key": "c1"}),
            kit.post_json(client, kit.api_url(SID, "messages/stream"), {"text": "meu nome é Ana", "id": "g2"}),
            client.get(kit.api_url(SID)),
        ]
    finally:
        if fake is not None:
            fake.close()
    assert all(r.status_code < 500 for r in responses), [r.status_code for r in responses]
    assert _leaks(_bodies(*responses)) == []
    assert _leaks(_log_text(caplog)) == []
    stored = " ".join(TurnRecord.objects.values_list("error", flat=True)) + " ".join(
        str(o) for o in TurnRecord.objects.values_list("outcomes", flat=True))
    assert _leaks(stored) == []
    if fake is not None and fake.requests:
        assert all(kit.API_KEY not in r.path for r in fake.requests), "the key travels in the URL"


def test_an_upstream_that_echoes_the_key_is_not_relayed(caplog):
    """A proxy in front of Gemini that echoes the request (key included) in its error text: the
    host must not copy it into logs, the run log or API answers. (Redact the configured key.)

    The first call (the speak of the first message) succeeds, so the run asks; the second
    message's understand call then fails, which is the failure the host parks and records."""
    import json

    from providers.fake_gemini import text_chunks

    from falai_django.models import TurnRecord

    caplog.set_level(logging.DEBUG)
    calls = []

    def responder(recorded):
        calls.append(recorded)
        if len(calls) == 1:
            return Reply(chunks=text_chunks(json.dumps({"message": "Oi! Com quem eu falo?", "nome": None}), 1))
        return Reply(status=400, body=error_body(
            400, "INVALID_ARGUMENT", f"bad request for key={recorded.headers.get('x-goog-api-key', '')}"))

    fake = FakeGemini(responder=responder)
    _gemini_agent(fake.base_url)
    try:
        client = _operator()
        first = kit.post_json(client, kit.api_url(SID, "messages"), {"text": "oi", "id": "e1"})
        second = kit.post_json(client, kit.api_url(SID, "messages"), {"text": "sou a Ana", "id": "e2"})
        state = client.get(kit.api_url(SID))
    finally:
        fake.close()
    assert first.status_code == 200 and first.json()["messages"], first.content
    assert second.status_code == 202 and second.json()["status"] == "retry", second.content
    assert len(calls) >= 2 and kit.API_KEY in json.dumps(calls[1].headers)  # the echo really carried it
    leaks = {
        "api answer": _leaks(_bodies(second, state)),
        "log lines": _leaks(_log_text(caplog)),
        "run log": _leaks(" ".join(TurnRecord.objects.values_list("error", flat=True))),
    }
    assert leaks == {"api answer": [], "log lines": [], "run log": []}, f"the echoed API key was relayed: {leaks}"


def _boom(session_id, session, turn_input):
    raise RuntimeError("context builder exploded")


@pytest.mark.parametrize("debug", [False, True], ids=["DEBUG=False", "DEBUG=True"])
def test_error_pages_never_show_a_secret(settings, debug):
    from falai_django import conf

    fake_gemini_url = f"http://127.0.0.1:{free_port()}"
    _gemini_agent(fake_gemini_url)  # the agent in play holds the canary key
    settings.FALAI = kit.falai_settings(CONTEXT="security.test_secrets._boom")
    settings.GEMINI_API_KEY = kit.API_KEY
    settings.DEBUG = debug
    conf.clear_cache()
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=_operator().defaults["HTTP_AUTHORIZATION"])
    pages = [
        kit.post_json(client, kit.api_url(SID, "messages"), {"text": "oi", "id": "x1"}),
        client.get("/falai/sessions/" + "x" * 300),
        client.get("/no/such/page/"),
        client.get(kit.api_url(SID, "messages")),  # GET on a POST-only endpoint
    ]
    assert pages[0].status_code == 500  # a JSON sentence and an error id, whatever DEBUG says
    assert set(pages[0].json()) == {"detail", "error_id"}
    assert "RuntimeError" not in pages[0].content.decode() and "exploded" not in pages[0].content.decode()
    assert _leaks(_bodies(*pages)) == []


def test_the_admin_page_and_logs_never_show_a_secret(caplog, settings):
    from django.contrib.auth.models import User

    caplog.set_level(logging.DEBUG)
    from falai_django import host

    host.handle(SID, {"message": "oi", "id": "a1"})
    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    client = kit.login_client(admin)
    pages = [client.get("/admin/falai_django/conversation/"),
             client.get(f"/admin/falai_django/conversation/{SID}/change/"),
             client.post(f"/admin/falai_django/conversation/{SID}/handoff/take-over/", {}, follow=True)]
    assert all(p.status_code == 200 for p in pages)
    assert _leaks(_bodies(*pages)) == []
    assert _leaks(_log_text(caplog)) == []
