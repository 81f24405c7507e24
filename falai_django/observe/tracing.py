"""Traces through the OpenTelemetry API: a span per turn, per model call and per send.

- `falai.turn` — one input through the host (`host.turns`): `falai.kind` and `falai.status` as the
  run log records them, `falai.flow_ids` (the flows the turn started, ended or moved),
  `falai.llm_calls` and `falai.replays` (compare-and-swap conflicts replayed).
- `chat <model>` — each model call, a child of its turn, named and described by the GenAI
  semantic conventions: `gen_ai.operation.name = "chat"`, `gen_ai.system`,
  `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.usage.input_tokens`,
  `gen_ai.usage.output_tokens`; `error.type` when it failed.
- `falai.send` — each message handed to the channel: `falai.channel`, `falai.send.attempt`,
  `falai.send.result` (sent, retry, failed).

What a span never carries: the customer's text, the reply's text, an exception's message (it may
quote either). The conversation id only with `FALAI["TRACE_CONVERSATION_IDS"] = True` (as
`falai.conversation_id`): a trace backend is often readable by more people than the admin.

The OpenTelemetry API is an optional dependency (`pip install falai-django[tracing]`) and does
nothing until the project installs an SDK and sets a tracer provider; without the API this module
is a no-op too. Either way a span costs nearly nothing when nobody records it: attributes are
computed only for a recording span.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from falai_django import conf

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context

try:  # optional: tracing is off without it
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, StatusCode
except ImportError:  # pragma: no cover - exercised by installs without the extra
    trace = None  # type: ignore[assignment]  # the module or None: every reader checks `trace is None` first

logger = logging.getLogger("falai_django.tracing")

TRACER_NAME = "falai_django"
TURN_SPAN = "falai.turn"
SEND_SPAN = "falai.send"

# `gen_ai.system` by the provider's name: the semantic conventions' well-known values where one
# exists; any other provider is named as it names itself.
GEN_AI_SYSTEMS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "deepseek": "deepseek",
}

_tracer_for: tuple[Any, Any] = (None, None)  # (the global provider, its tracer)


def tracer() -> Any:
    """This app's tracer, or None while no SDK records anything (the API's default provider).

    The tracer is asked of the global provider each time it changes, so a provider set after
    this module was first used (or replaced by a test) is the one spans go to."""
    global _tracer_for
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, ProxyTracerProvider | NoOpTracerProvider):
        return None
    cached_provider, cached = _tracer_for
    if cached_provider is not provider:
        from falai_django import __version__

        cached = provider.get_tracer(TRACER_NAME, __version__)
        _tracer_for = (provider, cached)
    return cached


def _conversation(span: Any, conversation_id: str) -> None:
    if conf.get("TRACE_CONVERSATION_IDS"):
        span.set_attribute("falai.conversation_id", str(conversation_id))


# ---------------------------------------------------------------------------------------------
# The turn
# ---------------------------------------------------------------------------------------------


def start_turn(conversation_id: str, kind: str) -> Any:
    """The turn's span, started and not yet current (`activate` makes it current while the turn's
    code runs), or None when nothing records."""
    tracer_ = tracer()
    if tracer_ is None:
        return None
    span = tracer_.start_span(TURN_SPAN, kind=SpanKind.INTERNAL, attributes={"falai.kind": str(kind)})
    _conversation(span, conversation_id)
    return span


class activate:  # noqa: N801 - used as a context manager, like contextlib's
    """`span` is the current span (the parent of what starts inside) until the block ends; it is
    not ended here. (A class, not a generator: it runs around every turn and model call.)"""

    __slots__ = ("span", "token")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.token: Token[Context] | None = None

    def __enter__(self) -> None:
        if self.span is not None:
            self.token = otel_context.attach(trace.set_span_in_context(self.span))

    def __exit__(self, *exc_info: Any) -> None:
        if self.token is not None:
            otel_context.detach(self.token)
            self.token = None


def end_turn(span: Any, *, status: str, replays: int, llm_calls: int, result: Any = None,
             error: BaseException | None = None) -> None:
    """Describe the finished turn on its span and end it. `result` is the engine's `TurnResult`
    (None when the turn was parked or failed)."""
    if span is None:
        return
    try:
        attributes: dict[str, Any] = {"falai.status": str(status), "falai.flow_ids": flow_ids(result),
                                      "falai.llm_calls": int(llm_calls), "falai.replays": int(replays)}
        if error is not None:
            attributes["error.type"] = type(error).__qualname__
        span.set_attributes(attributes)
        if status in ("failed", "retry"):
            span.set_status(StatusCode.ERROR, f"turn {status}")
    except Exception:  # noqa: BLE001 - describing a turn must never break it
        logger.exception("falai tracing: the turn's span could not be described")
    finally:
        span.end()


def flow_ids(result: Any) -> list[str]:
    """The flows a turn touched: runs it started or ended, outcomes it recorded; sorted, unique."""
    if result is None:
        return []
    found: set[str] = set()
    for items in (getattr(result, "started", ()), getattr(result, "ended", ()), getattr(result, "outcomes", ())):
        for item in items or ():
            flow = getattr(item, "flow_id", None)
            if flow:
                found.add(str(flow))
    return sorted(found)


# ---------------------------------------------------------------------------------------------
# Model calls (llm.calling opens one per call)
# ---------------------------------------------------------------------------------------------


class ModelCallSpan:
    """One model call's `chat` span: current while the call (or a stream's chunk) is awaited."""

    def __init__(self, span: Any, requested: str = "") -> None:
        self.span = span
        self.requested = requested  # the model the provider said it would call ("" if it did not)

    def active(self) -> activate:
        return activate(self.span)

    def finish(self, output: Any, error: BaseException | None) -> None:
        from falai_django.llm.types import read_usage

        span = self.span
        try:
            metadata = getattr(output, "metadata", None) or {}
            attributes: dict[str, Any] = {}
            if metadata.get("model"):
                attributes["gen_ai.response.model"] = str(metadata["model"])
                if not self.requested:  # a provider that names its model only in its answer
                    attributes["gen_ai.request.model"] = str(metadata["model"])
                    span.update_name(f"chat {metadata['model']}")
            usage = read_usage(metadata) if error is None else None
            if usage:
                attributes["gen_ai.usage.input_tokens"] = usage["promptTokens"]
                attributes["gen_ai.usage.output_tokens"] = usage["completionTokens"]
            if error is not None:
                attributes["error.type"] = str(getattr(error, "kind", None) or type(error).__qualname__)
                span.set_status(StatusCode.ERROR, type(error).__qualname__)
            span.set_attributes(attributes)
        except Exception:  # noqa: BLE001 - describing a call must never fail it
            logger.exception("falai tracing: a model call's span could not be described")
        finally:
            span.end()


def model_call_span(provider: Any) -> ModelCallSpan | None:
    """`llm.calling`'s span opener: a started `chat` span for a call to `provider`, or None."""
    tracer_ = tracer()
    if tracer_ is None:
        return None
    name = str(getattr(provider, "name", None) or type(provider).__name__)
    model = str(getattr(provider, "model", None) or "")
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.system": GEN_AI_SYSTEMS.get(name, name)}
    if model:
        attributes["gen_ai.request.model"] = model
    span = tracer_.start_span(f"chat {model}" if model else "chat", kind=SpanKind.CLIENT, attributes=attributes)
    return ModelCallSpan(span, model)


# ---------------------------------------------------------------------------------------------
# Sends
# ---------------------------------------------------------------------------------------------


class SendSpan:
    """One send's span; `result` is set before the block ends."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def result(self, result: str, error: BaseException | None = None) -> None:
        if self.span is None:
            return
        self.span.set_attribute("falai.send.result", result)
        if error is not None:
            self.span.set_attribute("error.type", type(error).__qualname__)
            if result == "failed":
                self.span.set_status(StatusCode.ERROR, type(error).__qualname__)


NO_SEND_SPAN = SendSpan(None)


@contextlib.contextmanager
def send_span(conversation_id: str, channel: str, attempt: int, kind: str | None) -> Iterator[SendSpan]:
    """A `falai.send` span around one message handed to the channel (current inside: a channel
    client's own HTTP spans are its children)."""
    tracer_ = tracer()
    if tracer_ is None:
        yield NO_SEND_SPAN
        return
    attributes: dict[str, Any] = {"falai.channel": channel, "falai.send.attempt": int(attempt)}
    if kind:
        attributes["falai.message.kind"] = str(kind)
    span = tracer_.start_span(SEND_SPAN, kind=SpanKind.CLIENT, attributes=attributes)
    _conversation(span, conversation_id)
    try:
        with activate(span):
            yield SendSpan(span)
    finally:
        span.end()
