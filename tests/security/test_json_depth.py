"""Issue 28: JSON nested too deeply is a 400 (or a form error) naming the limit, never a 500.

`FALAI["MAX_JSON_DEPTH"]` (default 32) bounds every JSON value a request carries: the API's body
(event payloads, start inputs, context), a flow spec (`PUT flows/<id>`, the admin's form and
picture), the playground's event payload, a signed WhatsApp body; and a payload or input a
Python caller hands the host. Nothing is written for a refused value. The template renderer
writes a value of any depth without recursion, and the stream's error frame carries a generic
sentence and an error id (the log line has the same id), never the exception.

Log lines are caught with a handler on the logger itself: some suites run with `-p no:logging`.
"""

from __future__ import annotations

import json
import logging
import re
import sys

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from falai_django import falai, jsondepth
from falai_django.testing import fake_clock, mock_provider

from . import kit

pytestmark = pytest.mark.django_db(transaction=True)

SID = "5511777770000"
LIMIT = "the limit is 32 (FALAI['MAX_JSON_DEPTH'])"
API_PERMS = ("change_conversation", "view_conversation")


def nested(levels: int, leaf: object = "fundo") -> object:
    """`levels` objects deep: nested(2) == {"x": {"x": "fundo"}}."""
    value = leaf
    for _ in range(levels):
        value = {"x": value}
    return value


def deep_text(levels: int) -> str:
    """JSON text `levels` arrays deep, too deep for `json.dumps` to write (or `json.loads` to read)."""
    return "[" * levels + "1" + "]" * levels


def api_client() -> Client:
    token = kit.token_client("operator", *API_PERMS).defaults["HTTP_AUTHORIZATION"]
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=token)


def post_raw(client: Client, what: str, body: str, sid: str = SID):
    return client.post(kit.api_url(sid, what), data=body, content_type="application/json")


def nothing_written() -> bool:
    """No inbox row, conversation or transcript anywhere (each test starts from an empty database)."""
    from falai_django.models import History, Session, TurnRecord

    return not (TurnRecord.objects.exists() or Session.objects.exists() or History.objects.exists())


class Lines(logging.Handler):
    """The records one logger emits while the block runs."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.logger = logging.getLogger(name)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> Lines:
        self.previous = (self.logger.level, self.logger.disabled)
        self.logger.addHandler(self)
        self.logger.setLevel(logging.DEBUG)
        self.logger.disabled = False
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.previous[0])
        self.logger.disabled = self.previous[1]

    @property
    def lines(self) -> list[str]:
        return [record.getMessage() for record in self.records]


def template_agent():
    """The kit's agent plus flows that render what the caller sent: `{{input.x}}`."""
    f = falai().fields({"nome": {"type": "string"}})
    return f.agent(
        name="Ana",
        provider=mock_provider(understand=[{}] * 50, speak=[{"message": "ok"}] * 50),
        clock=fake_clock("2026-09-20T10:00:00Z"),
        events={"pago": {"direction": "inbound"}},
        flows=[
            f.flow({"id": "campanha", "name": "Campanha", "steps": [{"id": "oi", "say": "Oferta: {{input.x}}"}]}),
            f.flow({"id": "pagamento", "name": "Pagamento", "on": [{"event": "pago"}],
                    "steps": [{"id": "ok", "say": "Pago: {{input.x}}"}]}),
        ],
    )


@pytest.fixture
def renders_input():
    kit.reset(template_agent())
    yield
    kit.reset()


# ------------------------------------------------------------------------------------ the helper


def test_depth_counts_arrays_and_objects_without_recursion():
    assert jsondepth.depth("oi") == 0 and jsondepth.depth(None) == 0
    assert jsondepth.depth([]) == 1 and jsondepth.depth({}) == 1
    assert jsondepth.depth({"a": [1, {"b": []}], "c": 2}) == 4
    assert jsondepth.depth([[1], [[[2]]], []]) == 4  # the deepest branch, not the first or the last
    assert jsondepth.depth(nested(100_000)) == 100_000  # far past the recursion limit
    circle: list = []
    circle.append([circle])
    with pytest.raises(ValueError, match="circular"):
        jsondepth.depth(circle)
    shared = [1]
    assert jsondepth.depth([shared, [shared]]) == 3  # seen twice is not a circle


def test_text_depth_reads_brackets_outside_strings():
    assert jsondepth.text_depth('{"a": "[[[[{{{{", "b": [1, {"c": "]]]]"}]}') == 3
    assert jsondepth.text_depth(r'["a \" [[[ \\", [[]]]') == 3  # escaped quotes do not end a string
    assert jsondepth.text_depth(deep_text(200_000)) == 200_000
    assert jsondepth.text_depth(b'"[[["') == 0 and jsondepth.text_depth("7") == 0
    for value in ({"a": [1, {"b": ["]", "{"]}]}, nested(40), [[], [[[]]]]):
        assert jsondepth.text_depth(json.dumps(value)) == jsondepth.depth(value)


def test_the_error_names_depth_limit_and_setting(settings):
    with pytest.raises(jsondepth.JSONDepthError) as caught:
        jsondepth.check(nested(40), "payload")
    assert str(caught.value) == f"payload is nested 40 levels deep; {LIMIT}"
    assert jsondepth.check(nested(32), "payload") == nested(32)  # exactly the limit passes
    settings.FALAI = {**settings.FALAI, "MAX_JSON_DEPTH": 5}
    with pytest.raises(jsondepth.JSONDepthError, match="nested 6 levels deep; the limit is 5 "):
        jsondepth.loads(json.dumps(nested(6)))
    settings.FALAI = {**settings.FALAI, "MAX_JSON_DEPTH": 10**6}
    assert jsondepth.max_depth() == jsondepth.CEILING  # never past what the recursive walkers survive


# ------------------------------------------------------------------------------------ the API


@pytest.mark.parametrize(("what", "body"), [
    ("events", lambda deep: {"event": "pago", "key": "pay:1", "payload": deep}),
    ("starts", lambda deep: {"flow": "campanha", "key": "camp:1", "input": deep}),
    ("messages", lambda deep: {"text": "oi", "id": "wamid.1", "context": deep}),
    ("messages/stream", lambda deep: {"text": "oi", "id": "wamid.1", "context": deep}),
], ids=["event-payload", "start-input", "message-context", "stream-context"])
def test_a_deep_value_in_an_api_body_is_a_400_naming_the_limit(renders_input, what, body):
    client = api_client()
    response = post_raw(client, what, json.dumps(body(nested(300))))
    assert response.status_code == 400, response.content[:300]
    assert response.json() == {"detail": f"JSON parse error - a value in the body is nested 300 levels deep; {LIMIT}"}
    assert nothing_written()


@pytest.mark.parametrize("what", ["events", "starts", "messages", "messages/stream", "silence", "wakes"])
def test_a_body_too_deep_to_parse_is_a_400_naming_its_depth(what):
    body = '{"event": "pago", "key": "k", "text": "oi", "flow": "campanha", "reason": "r", "payload": ' \
           + deep_text(100_000) + "}"
    response = post_raw(api_client(), what, body)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["detail"] == f"JSON parse error - a value in the body is nested 100000 levels deep; {LIMIT}"
    assert nothing_written()


@pytest.mark.parametrize(("what", "body", "text"), [
    ("events", lambda value, n: {"event": "pago", "key": f"pay:{n}", "payload": value}, "Pago: "),
    ("starts", lambda value, n: {"flow": "campanha", "key": f"camp:{n}", "input": value}, "Oferta: "),
], ids=["event-payload", "start-input"])
def test_a_value_at_the_limit_runs_and_one_level_more_is_refused(renders_input, what, body, text):
    """The limit holds each value (as for a Python caller); the body's own braces are its envelope."""
    client = api_client()
    over = post_raw(client, what, json.dumps(body({"x": nested(32)}, 2)))
    assert over.status_code == 400
    assert over.json() == {"detail": f"JSON parse error - a value in the body is nested 33 levels deep; {LIMIT}"}
    assert nothing_written()
    at_limit = post_raw(client, what, json.dumps(body({"x": nested(31)}, 1)))
    assert at_limit.status_code == 200, at_limit.content[:300]
    assert at_limit.json()["messages"][0]["text"] == text + json.dumps(nested(31), separators=(",", ":"))


def test_a_context_at_the_limit_runs_and_one_level_more_is_refused(renders_input):
    client = api_client()
    over = post_raw(client, "messages", json.dumps({"text": "oi", "id": "wamid.2", "context": nested(33)}))
    assert over.status_code == 400
    assert "a value in the body is nested 33 levels deep; " + LIMIT in over.json()["detail"]
    assert nothing_written()
    at_limit = post_raw(client, "messages", json.dumps({"text": "oi", "id": "wamid.1", "context": nested(32)}))
    assert at_limit.status_code == 200, at_limit.content[:300]
    from falai_django.models import TurnRecord

    assert TurnRecord.objects.get().input["context"] == nested(32)


def test_the_limit_follows_the_setting(settings, renders_input):
    settings.FALAI = {**settings.FALAI, "MAX_JSON_DEPTH": 4}
    client = api_client()
    refused = post_raw(client, "starts", json.dumps({"flow": "campanha", "key": "c:1", "input": {"x": nested(4)}}))
    assert refused.status_code == 400
    assert refused.json()["detail"].endswith("nested 5 levels deep; the limit is 4 (FALAI['MAX_JSON_DEPTH'])")
    assert nothing_written()
    taken = post_raw(client, "starts", json.dumps({"flow": "campanha", "key": "c:1", "input": {"x": nested(3)}}))
    assert taken.status_code == 200, taken.content[:300]
    assert taken.json()["messages"][0]["text"] == 'Oferta: {"x":{"x":{"x":"fundo"}}}'


def test_a_python_caller_gets_an_input_error_naming_the_field_and_the_limit(renders_input):
    from falai_django import host

    for turn_input, field in (({"event": "pago", "key": "pay:1", "payload": nested(40)}, "payload"),
                              ({"start": {"flow": "campanha", "key": "c:1", "input": nested(5000)}}, "input")):
        with pytest.raises(host.InputError) as caught:
            host.handle(SID, turn_input)
        assert caught.value.field == field
        depth = jsondepth.depth(turn_input.get("payload") or turn_input["start"]["input"])
        assert str(caught.value) == f"{field} is nested {depth} levels deep; {LIMIT}"
    circle: dict = {}
    circle["x"] = circle
    with pytest.raises(host.InputError, match="payload must be plain JSON"):
        host.handle(SID, {"event": "pago", "key": "pay:1", "payload": circle})
    assert nothing_written()
    result = host.handle(SID, {"event": "pago", "key": "pay:1", "payload": nested(32)})  # exactly the limit
    assert result.status == "done"
    assert result.result.messages[0].text == "Pago: " + json.dumps(nested(31), separators=(",", ":"))


def test_a_python_callers_context_is_held_to_the_limit(renders_input):
    from falai_django import host

    for context in (nested(33), nested(5000)):
        with pytest.raises(host.InputError) as caught:
            host.handle(SID, {"message": "oi", "id": "m1"}, context=context)
        assert caught.value.field == "context"
        assert str(caught.value) == f"context is nested {jsondepth.depth(context)} levels deep; {LIMIT}"
    circle: dict = {}
    circle["x"] = [circle]
    with pytest.raises(host.InputError, match="context must be plain data .*circular"):
        host.handle(SID, {"message": "oi", "id": "m1"}, context=circle)
    assert nothing_written()
    result = host.handle(SID, {"message": "oi", "id": "m1"}, context=nested(32))
    assert result.status == "done"
    from falai_django.models import TurnRecord

    assert TurnRecord.objects.get().input["context"] == nested(32)


@pytest.mark.parametrize(("turn_input", "field"), [
    ({"message": "oi", "at": nested(5000)}, "at"),
    ({"event": "pago", "key": "pay:1", "hop": nested(5000)}, "hop"),
], ids=["at", "hop"])
def test_an_error_quoting_a_deep_value_quotes_its_start(renders_input, turn_input, field):
    """The message shows what was sent, cut to three levels: never a walk of the whole value."""
    from falai_django import host

    with pytest.raises(host.InputError) as caught:
        host.handle(SID, turn_input)
    assert caught.value.field == field
    assert str(caught.value).endswith("got {'x': {'x': {'x': {...}}}}")
    assert nothing_written()


# ------------------------------------------------------------------------------------ templates


def test_the_renderer_writes_a_value_of_any_depth_without_recursion():
    from falai_django.engine import templates

    levels = sys.getrecursionlimit() * 5
    lists: object = 1
    for _ in range(levels):
        lists = [lists]
    scope = templates.scope_of(data={}, context=None, input={"x": nested(levels), "l": lists,
                                                            "mixed": [[1, [2, []]], {"a": [3]}]})
    text = templates.render("Oi {{input.x}}!", scope)
    assert text == "Oi " + '{"x":' * levels + '"fundo"' + "}" * levels + "!"
    assert templates.render("{{input.l}}", scope) == "1"  # nested lists join flat, as JavaScript's do
    assert templates.render("{{input.mixed}}", scope) == '1, 2, , {"a":[3]}'
    assert templates.render_deep({"msg": "{{input.x.x.x.x}}"}, scope)["msg"].startswith('{"x":{"x":')


def test_json_too_deep_for_the_decoder_is_unreadable_text_not_a_recursion_error():
    """A model's answer, a stored blob, a fact in the offline provider's prompt: read with `json`,
    whose decoder runs out of stack past about a thousand levels."""
    from falai_django.engine.errors import InvalidSessionError
    from falai_django.engine.session import Session
    from falai_django.llm.jsonparse import (
        extract_embedded_json_object,
        parse_json_response,
        try_parse_json_response,
    )
    from falai_django.providers.offline import known_facts

    deep = deep_text(100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json_response('{"message": ' + deep + "}")
    assert try_parse_json_response(deep) is None
    assert extract_embedded_json_object('Oi {"a": ' + deep + "} e {\"b\": 1}") == {"b": 1}
    blob = '{"v": 4, "id": "s1", "data": {"a": ' + deep + "}}"
    with pytest.raises(InvalidSessionError, match="not valid JSON"):
        Session.from_json_text(blob, "s1")
    assert known_facts("## Already known\n- cor: " + deep + "\n- nome: \"Ana\"\n") == {"cor": deep, "nome": "Ana"}


# ------------------------------------------------------------------------------------ flows


def test_put_flow_with_a_deep_spec_is_a_400_and_saves_nothing():
    from falai_django.models import Flow

    client = kit.token_client("author", "view_flow", "change_flow", "add_flow")
    for levels, depth in ((300, 301), (32, 33)):  # the spec's own braces count: x at 32 is a spec 33 deep
        spec = {"id": "fundo", "name": "Fundo", "steps": [{"id": "oi", "say": "Oi"}], "x": nested(levels)}
        response = client.put("/falai/flows/fundo", data=json.dumps({"spec": spec}), content_type="application/json")
        assert response.status_code == 400, response.content[:300]
        assert response.json() == {"detail": f"JSON parse error - a value in the body is nested {depth} levels deep; "
                                             f"{LIMIT}"}
    assert not Flow.objects.exists()


def test_put_flow_with_a_spec_at_the_limit_is_saved():
    from falai_django.models import Flow

    client = kit.token_client("author", "view_flow", "change_flow", "add_flow")
    spec = {"id": "fundo", "name": "Fundo", "steps": [{"id": "oi", "say": "Oi"}], "x": nested(31)}
    assert jsondepth.depth(spec) == 32
    response = client.put("/falai/flows/fundo", data=json.dumps({"spec": spec}), content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    assert Flow.objects.get().spec == spec
    assert client.get("/falai/flows/fundo").json()["spec"] == spec


def test_the_flow_model_refuses_a_deep_spec_before_checking_it():
    """What the admin form, the flows API, drafts and imports all go through."""
    from django.core.exceptions import ValidationError

    from falai_django.models import Flow

    with pytest.raises(ValidationError) as caught:
        Flow(id="fundo", spec=nested(33)).full_clean()
    assert caught.value.message_dict["spec"] == [f"the spec is nested 33 levels deep; {LIMIT}"]
    with pytest.raises(ValidationError) as caught:  # at the limit: on to the spec's own checks
        Flow(id="fundo", spec=nested(32)).full_clean()
    assert "nested" not in " ".join(caught.value.message_dict["spec"])
    assert not Flow.objects.exists()


def test_a_flow_draft_nested_too_deeply_is_a_draft_error(monkeypatch):
    """The admin's draft page: the model's answer is bounded before `from_spec` walks it."""
    from types import SimpleNamespace

    from falai_django.flows import drafts

    answers = [(SimpleNamespace(structured=None, message=deep_text(100_000)), 100_000),
               (SimpleNamespace(structured={"id": "x", "steps": [], "x": nested(300)}, message=""), 301)]
    for out, depth in answers:
        monkeypatch.setattr(drafts, "call_provider", lambda provider, request, out=out: out)
        with pytest.raises(drafts.DraftError) as caught:
            drafts.request_spec("a deep flow", kit.current_agent())
        assert str(caught.value) == f"the model's answer is nested {depth} levels deep; {LIMIT}"


@pytest.fixture
def admin_client():
    from django.contrib.auth.models import User

    return kit.login_client(User.objects.create_superuser("flora", "flora@example.com", "pw"))


@pytest.mark.parametrize(("text", "depth"), [
    (json.dumps({"id": "fundo", "name": "F", "steps": [], "x": nested(300)}), 301),
    ('{"id": "fundo", "steps": [], "x": ' + deep_text(100_000) + "}", 100_001),
], ids=["deep", "too-deep-to-parse"])
def test_the_admin_form_shows_a_deep_spec_as_a_form_error(admin_client, text, depth):
    from falai_django.models import Flow

    response = admin_client.post("/admin/falai_django/flow/add/",
                                 {"id": "fundo", "name": "F", "position": 0, "spec": text})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["spec"]
    assert errors[0] == f"the spec is nested {depth} levels deep; {LIMIT}"
    assert escape(text[:60]) in response.content.decode()  # shown back as typed
    assert not Flow.objects.exists()


def test_the_admin_picture_of_a_deep_spec_is_a_400(admin_client):
    response = admin_client.post("/admin/falai_django/flow/picture/", deep_text(100_000),
                                 content_type="application/json")
    assert response.status_code == 400
    assert response.content.decode() == f"the spec is nested 100000 levels deep; {LIMIT}"


# ------------------------------------------------------------------------------------ playground


@pytest.mark.parametrize(("payload", "depth"), [(json.dumps(nested(300)), 300), (deep_text(100_000), 100_000)],
                         ids=["deep", "too-deep-to-parse"])
def test_the_playground_event_form_refuses_a_deep_payload(admin_client, payload, depth):
    from falai_django.models import TurnRecord

    response = admin_client.post(reverse("falai:playground-event"), {"event": "pago", "payload": payload})
    assert response.status_code == 400
    assert response.json() == {"error": f"the payload is nested {depth} levels deep; {LIMIT}"}
    assert not TurnRecord.objects.exists()


def test_the_playground_event_form_takes_a_payload_at_the_limit(admin_client):
    from falai_django.models import TurnRecord

    response = admin_client.post(reverse("falai:playground-event"), {"event": "pago",
                                                                     "payload": json.dumps(nested(32))})
    assert response.status_code == 200, response.content[:300]
    assert TurnRecord.objects.get().input["turn"]["payload"] == nested(32)


# ------------------------------------------------------------------------------------ WhatsApp


@pytest.fixture
def whatsapp(settings):
    settings.FALAI = {**settings.FALAI, "WHATSAPP": {"PHONE_NUMBER_ID": "106540352242922", "ACCESS_TOKEN": "t",
                                                     "APP_SECRET": "app-s3cret", "VERIFY_TOKEN": "v",
                                                     "GRAPH_URL": "http://127.0.0.1:9"}}


def whatsapp_body(extra: object) -> bytes:
    """Meta's envelope (9 levels to the text) with one message carrying `extra` beside its text."""
    message = {"from": SID, "id": "wamid.DEEP", "timestamp": "1758362400", "type": "text",
               "text": {"body": "oi"}, "extra": extra}
    value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "106540352242922"},
             "contacts": [{"profile": {"name": "Ana"}, "wa_id": SID}], "messages": [message]}
    return json.dumps({"object": "whatsapp_business_account",
                       "entry": [{"id": "1", "changes": [{"value": value, "field": "messages"}]}]}).encode()


def deliver(body: bytes):
    from falai_django.channels.whatsapp.webhook import signature

    return Client().post("/falai/whatsapp/webhook", data=body, content_type="application/json",
                         headers={"X-Hub-Signature-256": signature("app-s3cret", body)})


@pytest.mark.parametrize(("extra", "depth"), [(nested(300), 308), (json.loads(deep_text(50)), 58)],
                         ids=["objects", "arrays"])
def test_a_deep_signed_whatsapp_body_is_a_400_with_a_reason_and_a_warning(whatsapp, extra, depth):
    with Lines("falai_django.whatsapp") as log:
        response = deliver(whatsapp_body(extra))
    assert response.status_code == 400
    reason = f"the body is nested {depth} levels deep; {LIMIT}"
    assert response.json() == {"detail": reason}
    assert [r.levelno for r in log.records] == [logging.WARNING]
    assert reason in log.lines[0]
    assert nothing_written()


def test_a_signed_whatsapp_body_at_the_limit_is_stored(whatsapp):
    body = whatsapp_body(nested(24))  # 8 levels down to the message, 24 more: 32
    assert jsondepth.text_depth(body) == 32
    response = deliver(body)
    assert response.status_code == 200, response.content[:300]
    assert response.json()["inputs"] == 1


# ------------------------------------------------------------------------------------ stream errors


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_the_stream_error_frame_is_generic_and_its_id_is_in_the_log(settings, monkeypatch, debug):
    from falai_django import host

    settings.DEBUG = debug

    def failing_stream(session_id, turn_input, **kwargs):
        yield {"delta": "Oi"}
        raise RuntimeError("SELECT secret FROM vault WHERE token='tok_CANARY_77'")

    monkeypatch.setattr(host, "stream", failing_stream)
    with Lines("falai_django.api") as log:
        response = api_client().post(kit.api_url(SID, "messages/stream"), data=json.dumps({"text": "oi"}),
                                     content_type="application/json")
        text = b"".join(response.streaming_content).decode()
    assert response.status_code == 200
    frames = [dict(line.split(": ", 1) for line in frame.splitlines()) for frame in text.strip().split("\n\n")]
    assert [frame["event"] for frame in frames] == ["delta", "error"]
    error = json.loads(frames[1]["data"])
    assert set(error) == {"detail", "error_id"}
    assert "RuntimeError" not in text and "CANARY" not in text and "SELECT" not in text
    assert error["detail"].startswith("The turn failed")
    assert re.fullmatch(r"[0-9a-f]{12}", error["error_id"])
    [record] = [r for r in log.records if r.levelno == logging.ERROR]
    assert error["error_id"] in record.getMessage() and SID in record.getMessage()
    assert record.exc_info and "tok_CANARY_77" in str(record.exc_info[1])  # the details stay in the log


def test_two_stream_failures_get_two_error_ids(monkeypatch):
    from falai_django import host

    def failing_stream(session_id, turn_input, **kwargs):
        yield {"delta": "Oi"}
        raise RuntimeError("boom")

    monkeypatch.setattr(host, "stream", failing_stream)
    client = api_client()
    ids = set()
    for n in range(2):
        response = client.post(kit.api_url(SID, "messages/stream"), data=json.dumps({"text": f"oi {n}"}),
                               content_type="application/json")
        last = b"".join(response.streaming_content).decode().strip().split("\n\n")[-1]
        ids.add(json.loads(last.split("data: ", 1)[1])["error_id"])
    assert len(ids) == 2


# ------------------------------------------------------------------------------------ internal errors

CANARY = "SELECT secret FROM vault WHERE token='tok_CANARY_77'"


@pytest.fixture
def failing_turns(monkeypatch):
    """The kit's agent, whose turns raise an error carrying internal text once `broken` is set."""
    agent = kit.current_agent()
    broken = {"on": False}
    turn, turn_stream = agent.turn, agent.turn_stream

    def check() -> None:
        if broken["on"]:
            raise RuntimeError(CANARY)

    def failing_turn(**kwargs):
        check()
        return turn(**kwargs)

    def failing_stream(**kwargs):
        check()
        yield from turn_stream(**kwargs)

    monkeypatch.setattr(agent, "turn", failing_turn)
    monkeypatch.setattr(agent, "turn_stream", failing_stream)
    return broken


@pytest.mark.parametrize("what", ["messages", "messages/stream"])
@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_a_failing_turn_is_a_json_500_with_an_error_id_and_the_text_stays_in_the_log(
        settings, failing_turns, what, debug):
    """Before the stream's first byte too: never Django's page (with DEBUG on, a traceback)."""
    from falai_django.api import failures
    from falai_django.models import TurnRecord

    settings.DEBUG = debug
    client = api_client()
    assert post_raw(client, "messages", json.dumps({"text": "oi", "id": "wamid.1"})).status_code == 200
    failing_turns["on"] = True
    with Lines("falai_django.api") as log:
        response = post_raw(client, what, json.dumps({"text": "meu nome é Ana", "id": "wamid.2"}))
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body == {"detail": str(failures.REQUEST_FAILED), "error_id": body["error_id"]}
    assert re.fullmatch(r"[0-9a-f]{12}", body["error_id"])
    assert "CANARY" not in response.content.decode()
    [record] = [r for r in log.records if r.levelno == logging.ERROR]
    assert body["error_id"] in record.getMessage() and SID in record.getMessage()
    assert record.exc_info and CANARY in str(record.exc_info[1])
    failed = TurnRecord.objects.get(input_key="wamid.2")
    assert failed.status == "failed" and failed.error == f"RuntimeError: {CANARY}"  # the operator's run log

    state = client.get(kit.api_url(SID))  # the API's view of the run log: a sentence, not the text
    assert state.status_code == 200
    errors = {turn["input_key"]: turn["error"] for turn in state.json()["turns"]}
    assert errors == {"wamid.1": "", "wamid.2": "the turn failed on the server; the admin's run log and the "
                                                "server log have the details"}
    assert "CANARY" not in state.content.decode()


def test_the_public_turn_error_keeps_reasons_and_hides_exception_text():
    from falai_django.host.inbox import CONFLICT_SENTENCE, INTERNAL_SENTENCE, public_turn_error

    assert public_turn_error("") == ""
    assert public_turn_error("ProviderError: rate limited (retry after 4 s)") == \
        "ProviderError: rate limited (retry after 4 s)"
    assert public_turn_error("waited too long for the earlier inputs of this conversation") == \
        "waited too long for the earlier inputs of this conversation"
    assert public_turn_error('IntegrityError: duplicate key value violates unique constraint "falai_turn_pkey"') \
        == CONFLICT_SENTENCE
    assert public_turn_error("SessionConflictError: expected 3, found 4") == CONFLICT_SENTENCE
    assert public_turn_error(f"psycopg.errors.UndefinedTable: {CANARY}") == INTERNAL_SENTENCE
    assert public_turn_error(f"KeyError: {CANARY}") == INTERNAL_SENTENCE


def test_the_playground_answers_a_failing_event_with_an_error_id(admin_client, failing_turns):
    from falai_django.api import failures

    failing_turns["on"] = True
    with Lines("falai_django.api") as log:
        response = admin_client.post(reverse("falai:playground-event"), {"event": "pago", "payload": "{}"})
    assert response.status_code == 500
    body = response.json()
    assert body == {"error": str(failures.REQUEST_FAILED), "error_id": body["error_id"]}
    assert "CANARY" not in response.content.decode()
    [record] = [r for r in log.records if r.levelno == logging.ERROR]
    assert body["error_id"] in record.getMessage() and CANARY in str(record.exc_info[1])
    state = admin_client.get(reverse("falai:playground-state"))
    assert state.status_code == 200 and "CANARY" not in state.content.decode()
