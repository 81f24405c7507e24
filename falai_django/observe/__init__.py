"""What operators see: metrics summed across processes, and log lines that name the conversation.

- `context`: the conversation and turn this thread works for (`turn_scope`, `scope_for`).
- `logs`: the record factory that puts their ids on every log record, and a `Formatter`.
- `metrics`: counters and histograms each process adds to the database (`inc`, `observe`, `flush`).
- `exposition`: `GET <app>/metrics`'s Prometheus text (`render`).
- `heartbeat`: long-running processes say they are alive (`beat`).
- `tracing`: OpenTelemetry spans per turn, model call and send (a no-op without an SDK).

`install()` (the app's `ready`) hooks them up once per process.
"""

from __future__ import annotations


def install() -> None:
    from falai_django.llm.calling import observe_calls, trace_calls
    from falai_django.observe import context, logs, metrics, tracing

    logs.install()
    observe_calls(context.model_called)
    observe_calls(metrics.model_called)
    trace_calls(tracing.model_call_span)
