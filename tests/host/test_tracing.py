"""OpenTelemetry traces: a `falai.turn` span per turn, a GenAI `chat` span per model call under it,
a `falai.send` span per send; no customer text on any span, the conversation id only when asked.
Spans are read with the SDK's in-memory exporter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from falai_django import host
from falai_django.engine.errors import ProviderError
from falai_django.models import History, TurnRecord
from falai_django.observe import tracing
from falai_django.testing import mock_provider

from . import agents, senders
from .helpers import conflict_once

pytestmark = pytest.mark.django_db(transaction=True)

CUSTOMER_TEXT = "meu nome é Ana Beatriz Quintela"


@pytest.fixture
def spans(monkeypatch):
    """The spans this test's code ends, as the SDK records them (the project's global provider,
    as a team sets it with `trace.set_tracer_provider`, is this test's own)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    return exporter


def named(exporter, name):
    return [s for s in exporter.get_finished_spans() if s.name == name]


def chat_spans(exporter):
    return [s for s in exporter.get_finished_spans() if s.attributes.get("gen_ai.operation.name") == "chat"]


def every_value(exporter):
    values = []
    for span in exporter.get_finished_spans():
        for value in span.attributes.values():
            values.extend(value if isinstance(value, tuple) else [value])
        values.append(span.name)
        values.append(span.status.description or "")
        values.extend(str(v) for event in span.events for v in (event.attributes or {}).values())
    return [str(v) for v in values]


def counting_agent():
    provider = mock_provider(understand=[agents.understand_reply] * 9, speak=[agents.speak_reply] * 9, usage=True)
    return agents.use(agents.ana(provider=provider, clock=agents.clock()))


def test_a_turn_is_one_span_with_its_model_calls_as_genai_children(spans):
    counting_agent()
    host.handle_message("s1", "oi", id="wamid.1")
    spans.clear()
    result = host.handle_message("s1", CUSTOMER_TEXT, id="wamid.2")
    assert result.status == "done"
    record = TurnRecord.objects.get(input_key="wamid.2")

    [turn] = named(spans, "falai.turn")
    assert turn.attributes["falai.kind"] == "message"
    assert turn.attributes["falai.status"] == "done"
    assert turn.attributes["falai.replays"] == 0
    assert turn.attributes["falai.llm_calls"] == record.llm_calls >= 2  # understood, then spoken
    assert turn.attributes["falai.flow_ids"] == ("triagem",)
    assert turn.status.status_code != StatusCode.ERROR

    chats = chat_spans(spans)
    assert len(chats) == record.llm_calls
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == turn.context.span_id
        assert chat.context.trace_id == turn.context.trace_id
        assert chat.kind == trace.SpanKind.CLIENT
        # the mock provider names its model only in its answer: the span takes it from there
        assert chat.name == "chat mock"
        assert chat.attributes["gen_ai.system"] == "mock"
        assert chat.attributes["gen_ai.request.model"] == "mock"
        assert chat.attributes["gen_ai.response.model"] == "mock"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert turn.start_time <= chat.start_time <= chat.end_time <= turn.end_time
    usage = record.usage
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == usage["promptTokens"]
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == usage["completionTokens"]


def test_a_known_vendors_call_is_named_by_the_conventions(spans):
    provider = mock_provider(understand=[agents.understand_reply] * 9, speak=[agents.speak_reply] * 9, usage=True)
    provider.name, provider.model = "gemini", "gemini-2.5-flash"
    agents.use(agents.ana(provider=provider, clock=agents.clock()))
    host.handle_message("s1", "oi", id="wamid.1")
    [chat, *_] = chat_spans(spans)
    assert chat.name == "chat gemini-2.5-flash"
    assert chat.attributes["gen_ai.system"] == "gcp.gemini"
    assert chat.attributes["gen_ai.request.model"] == "gemini-2.5-flash"


def test_no_span_carries_the_customers_text_or_the_reply_or_by_default_the_conversation_id(spans):
    counting_agent()
    host.handle_message("+5511987654321", "oi", id="wamid.1")
    host.handle_message("+5511987654321", CUSTOMER_TEXT, id="wamid.2")
    from falai_django.host import delivery

    delivery.sweep_unsent(older_than_s=0)
    assert named(spans, "falai.turn") and chat_spans(spans) and named(spans, "falai.send")
    replies = list(History.objects.filter(role="assistant").values_list("content", flat=True))
    assert replies
    for value in every_value(spans):
        assert "Ana Beatriz" not in value and "oi" != value
        assert "5511987654321" not in value
        assert all(reply not in value for reply in replies)
    assert "falai.conversation_id" not in {k for s in spans.get_finished_spans() for k in s.attributes}


def test_the_conversation_id_is_on_the_spans_when_the_setting_says_so(spans, settings):
    settings.FALAI = {**settings.FALAI, "TRACE_CONVERSATION_IDS": True}
    host.handle_message("s-42", "oi", id="wamid.1")
    [turn] = named(spans, "falai.turn")
    assert turn.attributes["falai.conversation_id"] == "s-42"
    [send] = named(spans, "falai.send")
    assert send.attributes["falai.conversation_id"] == "s-42"


def test_a_send_is_a_span_with_its_channel_and_result(spans):
    senders.fail_next(1)
    host.handle_message("s1", "oi", id="wamid.1")
    [refused] = named(spans, "falai.send")
    assert refused.attributes["falai.channel"] == "record"
    assert refused.attributes["falai.send.result"] == "retry"
    assert refused.attributes["falai.send.attempt"] == 1
    assert refused.attributes["error.type"]
    spans.clear()
    History.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    from falai_django.host import delivery

    delivery.sweep_unsent(older_than_s=0)
    [sent] = named(spans, "falai.send")
    assert sent.attributes["falai.send.result"] == "sent"
    assert sent.attributes["falai.send.attempt"] == 2
    assert sent.status.status_code != StatusCode.ERROR


def test_a_failing_model_marks_its_call_and_the_parked_turn(spans):
    host.handle_message("s1", "oi", id="wamid.1")
    failing = agents.scripted_provider(understand=[ProviderError("mock", "overload", "busy: " + CUSTOMER_TEXT)] * 3)
    agents.use(agents.ana(provider=failing, clock=agents.clock()))
    spans.clear()
    assert host.handle_message("s1", CUSTOMER_TEXT, id="wamid.2").status == "retry"
    [turn] = named(spans, "falai.turn")
    assert turn.attributes["falai.status"] == "retry"
    assert turn.status.status_code == StatusCode.ERROR
    chats = chat_spans(spans)
    assert chats and all(c.attributes["error.type"] == "overload" for c in chats)
    assert all(c.status.status_code == StatusCode.ERROR for c in chats)
    assert turn.attributes["falai.llm_calls"] == len(chats)
    assert not any("Ana Beatriz" in v for v in every_value(spans))  # the error's message stays off


def test_a_replayed_conflict_is_on_the_turns_span(spans, monkeypatch):
    conflict_once(monkeypatch)
    assert host.handle_message("s1", "oi", id="wamid.1").replays == 1
    [turn] = named(spans, "falai.turn")
    assert turn.attributes["falai.replays"] == 1
    assert turn.attributes["falai.status"] == "done"


def test_a_streamed_turn_is_one_span_and_the_readers_code_is_not_inside_it(spans):
    counting_agent()
    seen_by_reader = []
    for _event in host.stream("s1", {"message": "oi", "id": "wamid.1"}):
        seen_by_reader.append(trace.get_current_span().get_span_context().is_valid)
    [turn] = named(spans, "falai.turn")
    assert turn.attributes["falai.status"] == "done"
    assert not any(seen_by_reader)  # between chunks no span of the turn is current
    chats = chat_spans(spans)
    assert chats and all(c.parent.span_id == turn.context.span_id for c in chats)


def test_a_stream_its_reader_abandons_still_ends_its_span(spans):
    counting_agent()
    stream = host.stream("s1", {"message": "oi", "id": "wamid.1"})
    first = next(stream)
    assert not first.get("done")
    stream.close()
    [turn] = named(spans, "falai.turn")
    assert turn.attributes["falai.status"] == "received"  # not finished here: a worker runs it


def test_without_an_sdk_nothing_is_recorded_and_turns_run():
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    assert tracing.tracer() is None
    assert tracing.model_call_span(object()) is None
    assert host.handle_message("s1", "oi", id="wamid.1").status == "done"


def test_a_provider_set_later_is_the_one_spans_go_to(monkeypatch):
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    providers = []
    for exporter in (first, second):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(provider)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: providers[0])
    host.handle_message("s1", "oi", id="wamid.1")
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: providers[1])
    host.handle_message("s2", "oi", id="wamid.1")
    assert len(named(first, "falai.turn")) == 1 and len(named(second, "falai.turn")) == 1
