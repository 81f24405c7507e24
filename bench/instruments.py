"""Instruments bench: what the metrics and the traces cost the host, in CPU per turn.

    .venv/bin/python bench/instruments.py [--quick]

Two scenarios, each in a child process of its own with the host benches' settings
(`bench.hostbench`: PostgreSQL database `falai_bench`, Ana's triage, the null sender), running
inbound message turns with `host.handle(..., send_inline=True)` and `SEND_HANDOFF = "queue"` so
each turn also makes its send in this process:

- `gemini`: the real `GeminiProvider` (google-genai over HTTP) against the fake Gemini server of
  the tests, run in a process of its own (its CPU is the vendor's, not the host's), answering
  with token counts: what a turn costs the host in production, apart from the model's own time;
- `zero`: the zero-latency scripted provider (answering with token counts too): the smallest
  turn there is, the worst case for the instruments' share.

The instruments' CPU is **timed where it is spent**: every entry point the host calls into them
(`metrics.turn_finished`, `model_called`, `message_sent`; `tracing.start_turn`, `end_turn`,
`model_call_span` and its `finish`, `send_span`, `activate`) is wrapped in a stopwatch reading
this thread's CPU clock (only the outermost call is timed; the stopwatch's own cost, calibrated,
is taken out). The metrics' flush runs in this thread every METRICS_FLUSH_S, as its thread
would, and is timed as the metrics'; the span processor's thread (batching, and encoding each
batch to OTLP protobuf as the OTLP exporters do, then dropping the bytes) is counted as the
traces'. Host CPU per turn is the app process's own (`time.process_time()`, every thread) plus
every `postgres` process's (/proc, `bench.hostbench.cpu`).

The turns run in blocks, three modes taking turns, each first, second and third in as many rounds;
before any block is timed every conversation grows to its steady size (STEADY_TURNS turns, as
bench/host.py does), and before each block the app's tables are vacuumed (outside the measured
time; the shared server may run without autovacuum), so no block pays for the dead rows of the
ones before it:

- `off`: no instrument (the counting calls are no-ops, no model-call observer or span opener);
- `metrics`: the shipped default without an OpenTelemetry SDK (counters, histograms, daily
  totals; the tracing API a no-op);
- `full`: the same plus an OpenTelemetry SDK `TracerProvider` with a `BatchSpanProcessor` (500 ms
  schedule) and the OTLP-encoding exporter: every span is built, ended, batched and encoded.

Per scenario: `instruments_us_per_turn` (`metrics_us_per_turn` + `traces_us_per_turn`, timed in
the `full` blocks), `instruments_share_pct` (of the host CPU per turn in the same block; its
spread over the rounds in `timed_share_pct_min` / `_max`), `instruments_share_client_only_pct`
(of the app process alone), `cpu_ms_per_turn_<mode>` (app + PostgreSQL; `client_cpu_…` and
`server_cpu_…` apart) and, as a cross-check, the A/B figure `ab_instruments_overhead_pct`
((full − off) / off of whole blocks, which the machine's noise of several % blurs), every round in
`rounds`.

The figure: `instruments_share_of_turn_cpu_pct` (the `gemini` scenario's share), target ≤ 5 %;
beside it the worst case, `instruments_share_zero_model_pct` (app + PostgreSQL) and
`instruments_share_zero_model_app_only_pct` (the app process alone).

Writes bench/results/instruments.json; `main()` returns the same dict.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "instruments.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.hostbench import progress, quick  # noqa: E402

MODES = ("off", "metrics", "full")


STEADY_TURNS = 100  # turns per conversation before any block is timed (bench/host.py's)


def _sizes(part: str) -> dict[str, int]:
    if part == "gemini":  # a turn is ~100 ms of the vendor client's CPU: fewer, the figure is coarse
        return {"block": 20, "rounds": 3, "conversations": 3} if quick() else \
            {"block": 60, "rounds": 6, "conversations": 5}
    if quick():
        return {"block": 300, "rounds": 3, "conversations": 10}
    return {"block": 1000, "rounds": 9, "conversations": 20}


def _serve_fake_gemini(conn: Any) -> None:
    """The fake Gemini server, in a process of its own (its CPU is the vendor's, not the host's):
    understand finds nothing, speak asks for the name again; every answer counts tokens."""
    import json

    from tests.providers.fake_gemini import FakeGemini, Reply, text_chunks

    usage = {"promptTokenCount": 900, "cachedContentTokenCount": 300, "candidatesTokenCount": 40,
             "totalTokenCount": 940}
    speak = text_chunks(json.dumps({"message": "Oi! Com quem eu falo?"}), 1, usage=usage)
    understand = text_chunks(json.dumps({}), 1, usage=usage)

    def respond(recorded: Any) -> Any:
        schema = recorded.body.get("generationConfig", {}).get("responseJsonSchema") or {}
        return Reply(chunks=speak if "message" in schema.get("properties", {}) else understand)

    server = FakeGemini(responder=respond)
    server.requests = _Forgetful()  # a long run must not keep every request
    conn.send(server.base_url)
    conn.recv()  # until the bench is done
    server.close()


class _Forgetful(list):
    def append(self, item: Any) -> None:
        return None


class Stopwatch:
    """The CPU time (this thread's) spent inside the instruments' entry points, by kind. Only the
    outermost entry point is timed (a span made inside a timed call is that call's)."""

    def __init__(self) -> None:
        self.spent_ns: dict[str, int] = {}
        self.calls = 0
        self.on = False
        self.depth = 0

    def _start(self) -> int | None:
        self.depth += 1
        return time.thread_time_ns() if self.on and self.depth == 1 else None

    def _stop(self, kind: str, started: int | None) -> None:
        self.depth -= 1
        if started is not None:
            self.spent_ns[kind] = self.spent_ns.get(kind, 0) + time.thread_time_ns() - started
            self.calls += 1

    def wrap(self, kind: str, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = self._start()
            try:
                return function(*args, **kwargs)
            finally:
                self._stop(kind, started)

        return timed

    def wrap_context(self, kind: str, factory: Any) -> Any:
        """A context-manager factory whose making, entering and leaving are timed (not the block)."""
        watch = self

        class Timed:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                started = watch._start()
                try:
                    self.inner = factory(*args, **kwargs)
                finally:
                    watch._stop(kind, started)

            def __enter__(self) -> Any:
                started = watch._start()
                try:
                    return self.inner.__enter__()
                finally:
                    watch._stop(kind, started)

            def __exit__(self, *exc_info: Any) -> Any:
                started = watch._start()
                try:
                    return self.inner.__exit__(*exc_info)
                finally:
                    watch._stop(kind, started)

        return Timed

    def take(self) -> tuple[dict[str, int], int]:
        spent, calls = self.spent_ns, self.calls
        self.spent_ns, self.calls = {}, 0
        return spent, calls


def _wrapper_cost_ns(watch: Stopwatch, n: int = 200_000) -> float:
    """What the stopwatch itself adds to one call (taken out of the figures)."""
    def nothing() -> None:
        return None

    timed = watch.wrap("calibration", nothing)
    watch.on = True
    started = time.thread_time_ns()
    for _ in range(n):
        timed()
    spent = time.thread_time_ns() - started
    plain = time.thread_time_ns()
    for _ in range(n):
        nothing()
    plain = time.thread_time_ns() - plain
    watch.take()
    watch.on = False
    return max(0.0, (spent - plain) / n)


def measure(part: str = "zero") -> dict[str, Any]:
    from bench.hostbench import cpu, setup_django

    sizes = _sizes(part)
    fake = None
    if part == "gemini":  # started before Django: a clean process of its own
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        fake = context.Process(target=_serve_fake_gemini, args=(theirs,), daemon=True)
        fake.start()
        base_url = ours.recv()
    setup_django()
    from django.conf import settings
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from bench.hostbench.agents import ZeroLatencyProvider
    from falai_django import conf, host

    # No NOTIFY hand-off (it would win on PostgreSQL): `send_inline` sends right after the commit,
    # in this process, so a turn's CPU includes its send (and the send's span and counts).
    settings.FALAI = {**settings.FALAI, "SEND_HANDOFF": "queue"}
    conf.clear_cache()
    from falai_django.llm import calling
    from falai_django.observe import context, metrics, tracing

    # The scripted provider answers with token counts, as a vendor's reply does.
    original = ZeroLatencyProvider.generate_message

    def with_usage(self, request):
        out = original(self, request)
        out.metadata = {**(out.metadata or {}), "model": "zero-1", "promptTokens": 900, "cachedInputTokens": 300,
                        "completionTokens": 40}
        return out

    ZeroLatencyProvider.generate_message = with_usage
    if part == "gemini":
        from falai_django.providers.gemini import GeminiProvider

        conf.get_agent().provider = GeminiProvider(api_key="bench", base_url=base_url, retries=0)

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    class DropExporter(SpanExporter):
        """An OTLP exporter without the network: each batch is encoded to OTLP protobuf bytes,
        as the HTTP and gRPC exporters do, and dropped."""

        exported = 0
        encoded_bytes = 0

        def export(self, spans):
            DropExporter.exported += len(spans)
            DropExporter.encoded_bytes += len(encode_spans(spans).SerializeToString())
            return SpanExportResult.SUCCESS

    sdk = TracerProvider()
    processor = BatchSpanProcessor(DropExporter(), schedule_delay_millis=500)
    sdk.add_span_processor(processor)
    default_provider = trace.get_tracer_provider()

    # Every entry point the host calls into the instruments, timed (the host looks each one up on
    # its module or class at call time, so the wrapped one is what runs).
    watch = Stopwatch()
    for name in ("turn_finished", "model_called", "message_sent", "wake_fired"):
        setattr(metrics, name, watch.wrap("metrics", getattr(metrics, name)))
    context.model_called = watch.wrap("metrics", context.model_called)
    for name in ("start_turn", "end_turn", "model_call_span"):
        setattr(tracing, name, watch.wrap("traces", getattr(tracing, name)))
    tracing.send_span = watch.wrap_context("traces", tracing.send_span)
    tracing.ModelCallSpan.finish = watch.wrap("traces", tracing.ModelCallSpan.finish)
    tracing.SendSpan.result = watch.wrap("traces", tracing.SendSpan.result)
    tracing.activate.__enter__ = watch.wrap("traces", tracing.activate.__enter__)
    tracing.activate.__exit__ = watch.wrap("traces", tracing.activate.__exit__)
    wrapper_ns = _wrapper_cost_ns(watch)
    # The metrics' flush runs here, every METRICS_FLUSH_S as its thread would, where it is timed.
    metrics.Flusher.enabled = False
    flush_every = float(conf.get("METRICS_FLUSH_S"))
    last_flush = [time.monotonic()]

    counting = {name: getattr(metrics, name) for name in ("turn_finished", "message_sent", "wake_fired")}

    def quiet(*args: Any, **kwargs: Any) -> None:
        return None

    def set_mode(mode: str) -> None:
        on = mode != "off"
        for name, function in counting.items():
            setattr(metrics, name, function if on else quiet)
        calling._observers[:] = [context.model_called, metrics.model_called] if on else []
        calling.trace_calls(tracing.model_call_span if on else None)
        trace.get_tracer_provider = (lambda: sdk) if mode == "full" else (lambda: default_provider)
        watch.on = mode == "full"

    lanes = [f"instr-{n}" for n in range(sizes["conversations"])]
    for sid in lanes:
        host.handle(sid, {"message": "oi", "id": f"{sid}.0"}, send_inline=True)
    turn_no = [0]

    def vacuum() -> None:
        """What autovacuum does on a running server (the shared one here may run without it): no
        block pays for the dead rows of the ones before it. Outside the measured time."""
        from django.db import connection

        from bench.hostbench import falai_tables

        with connection.cursor() as cursor:
            for table in falai_tables():
                cursor.execute(f"VACUUM (ANALYZE) {table}")

    def run_block(n: int) -> None:
        for _ in range(n):
            i = turn_no[0]
            turn_no[0] += 1
            sid = lanes[i % len(lanes)]
            result = host.handle(sid, {"message": "ainda não", "id": f"{sid}.t{i}"}, send_inline=True)
            assert result.status == "done", result
            if time.monotonic() - last_flush[0] >= flush_every:
                last_flush[0] = time.monotonic()
                flush()

    def flush() -> None:
        if not watch.on:  # metrics only: untimed, as the flusher thread
            metrics.flush()
            return
        started = time.thread_time_ns()
        metrics.flush()
        watch.spent_ns["metrics"] = watch.spent_ns.get("metrics", 0) + time.thread_time_ns() - started

    # Every conversation grows to its steady size first (the session at the spec's caps, the
    # transcript past HISTORY_LIMIT), so a later block does not pay for bigger conversations;
    # every path is warmed on the way (imports, caches, the SDK's first spans).
    for i, mode in enumerate(MODES * 2):
        set_mode(mode)
        run_block(STEADY_TURNS * len(lanes) // (2 * len(MODES)) + (i == 0))
        metrics.flush()
        processor.force_flush()
    grown = turn_no[0]
    watch.take()

    rounds: list[dict[str, float]] = []
    for r in range(sizes["rounds"]):
        figures: dict[str, float] = {}
        for mode in MODES[r % 3:] + MODES[:r % 3]:  # each mode runs first, second and third alike
            vacuum()
            set_mode(mode)
            before = cpu.snapshot({os.getpid()})
            cpu0, wall0, main0, cpu0_ns = time.process_time(), time.perf_counter(), time.thread_time_ns(), time.process_time_ns()
            run_block(sizes["block"])
            if mode != "off":
                flush()  # the block's last counts
            if mode == "full":
                processor.force_flush()  # the block's last spans, exported by the processor's thread
                # Every other thread of this process is the span processor's (the flusher's is off):
                # its batching and encoding count as the traces'.
                others = (time.process_time_ns() - cpu0_ns) - (time.thread_time_ns() - main0)
                watch.spent_ns["traces"] = watch.spent_ns.get("traces", 0) + max(0, others)
            client = (time.process_time() - cpu0) * 1000 / sizes["block"]
            server = cpu.usage(before, cpu.snapshot({os.getpid()}), sizes["block"]).get("server_cpu_ms_per_turn")
            figures[f"client_cpu_ms_per_turn_{mode}"] = client
            figures[f"server_cpu_ms_per_turn_{mode}"] = server if server is not None else math.nan
            figures[f"cpu_ms_per_turn_{mode}"] = client + (server or 0.0)
            figures[f"wall_ms_per_turn_{mode}"] = (time.perf_counter() - wall0) * 1000 / sizes["block"]
            if mode == "full":
                spent, calls = watch.take()
                per_turn = {kind: (ns - wrapper_ns * calls * ns / max(1, sum(spent.values()))) / 1000 / sizes["block"]
                            for kind, ns in spent.items()}
                figures["timed_metrics_us_per_turn"] = per_turn.get("metrics", 0.0)
                figures["timed_traces_us_per_turn"] = per_turn.get("traces", 0.0)
                figures["timed_instruments_us_per_turn"] = sum(per_turn.values())
                figures["timed_share_pct"] = 100 * figures["timed_instruments_us_per_turn"] / 1000 / (client + (server or 0))
                figures["timed_share_client_only_pct"] = 100 * figures["timed_instruments_us_per_turn"] / 1000 / client
        for name, prefix in (("", "cpu_ms_per_turn_"), ("_client_only", "client_cpu_ms_per_turn_")):
            off = figures[f"{prefix}off"]
            figures[f"metrics_overhead_pct{name}"] = 100 * (figures[f"{prefix}metrics"] - off) / off
            figures[f"instruments_overhead_pct{name}"] = 100 * (figures[f"{prefix}full"] - off) / off
        rounds.append({k: round(v, 4) for k, v in figures.items()})
        progress(f"instruments {part} round {r + 1}: {figures['cpu_ms_per_turn_full']:.3f} ms host CPU per turn "
                 f"({figures['client_cpu_ms_per_turn_full']:.3f} app); instruments timed "
                 f"{figures['timed_instruments_us_per_turn']:.1f} µs = {figures['timed_share_pct']:.2f} % "
                 f"(A/B: off {figures['cpu_ms_per_turn_off']:.3f} ms, +{figures['instruments_overhead_pct']:.1f} %)")
    set_mode("metrics")
    processor.shutdown()
    if fake is not None:
        ours.send("done")
        fake.join(timeout=10)

    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in rounds), 4)

    def spread(key: str) -> dict[str, float]:
        values = [r[key] for r in rounds]
        return {f"{key}_min": round(min(values), 3), f"{key}_max": round(max(values), 3)}

    return {
        "provider": type(conf.get_agent().provider).__name__,
        "turns_per_block": sizes["block"],
        "conversations": len(lanes),
        "steady_turns": grown,
        "rounds_run": sizes["rounds"],
        "stopwatch_ns_per_call": round(wrapper_ns, 1),
        **{f"{kind}_ms_per_turn_{mode}": median(f"{kind}_ms_per_turn_{mode}")
           for kind in ("cpu", "client_cpu", "server_cpu", "wall") for mode in MODES},
        "instruments_us_per_turn": median("timed_instruments_us_per_turn"),
        "metrics_us_per_turn": median("timed_metrics_us_per_turn"),
        "traces_us_per_turn": median("timed_traces_us_per_turn"),
        "instruments_share_pct": median("timed_share_pct"),
        **spread("timed_share_pct"),
        "instruments_share_client_only_pct": median("timed_share_client_only_pct"),
        **spread("timed_share_client_only_pct"),
        "ab_metrics_overhead_pct": median("metrics_overhead_pct"),
        "ab_instruments_overhead_pct": median("instruments_overhead_pct"),
        **spread("instruments_overhead_pct"),
        "ab_instruments_overhead_pct_client_only": median("instruments_overhead_pct_client_only"),
        "spans_exported": DropExporter.exported,
        "otlp_bytes_per_span": round(DropExporter.encoded_bytes / max(1, DropExporter.exported), 1),
        "rounds": rounds,
    }


SCENARIOS = ("zero", "gemini")


def main() -> dict[str, Any]:
    from bench.hostbench import run_child, write_result

    result: dict[str, Any] = {"database": "postgresql", "quick": quick(), "errors": {}}
    for scenario in SCENARIOS:
        try:
            result[scenario] = run_child(Path(__file__).resolve(), part=scenario)
        except Exception as exc:  # noqa: BLE001 - reported; the other scenario still runs
            result["errors"][scenario] = str(exc)[-2000:]
    summarize(result)
    write_result(RESULTS, result)
    print_table(result)
    return result


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """The top-level figures from the two scenarios' results (in place)."""
    zero, gemini = result.get("zero", {}), result.get("gemini", {})
    if zero:
        result["instruments_us_per_turn_zero_model"] = zero["instruments_us_per_turn"]
        result["instruments_share_zero_model_pct"] = zero["instruments_share_pct"]
        result["instruments_share_zero_model_app_only_pct"] = zero["instruments_share_client_only_pct"]
    if gemini:
        result["turn_cpu_ms_gemini"] = gemini["cpu_ms_per_turn_full"]
        result["instruments_us_per_turn"] = gemini["instruments_us_per_turn"]
        result["instruments_share_of_turn_cpu_pct"] = gemini["instruments_share_pct"]
    return result


def print_table(result: dict[str, Any]) -> None:
    for scenario in SCENARIOS:
        if scenario in result:
            print(f"-- {scenario}: {result[scenario].get('provider')}")
            _print_scenario(result[scenario])
    print("-- the figure")
    for label, key, target in (
        ("host CPU per turn with GeminiProvider over HTTP (ms)", "turn_cpu_ms_gemini", ""),
        ("  of which the instruments' (µs)", "instruments_us_per_turn", ""),
        ("instruments' share of host CPU per turn (%)", "instruments_share_of_turn_cpu_pct", "≤ 5"),
        ("with a zero-latency model: the instruments' CPU per turn (µs)", "instruments_us_per_turn_zero_model", ""),
        ("  with a zero-latency model: app + PostgreSQL (%)", "instruments_share_zero_model_pct", ""),
        ("  with a zero-latency model: the app process alone (%)", "instruments_share_zero_model_app_only_pct", ""),
    ):
        print(f"{label:<58}{result.get(key, '-')!s:>20}  {target}")
    for name, error in result.get("errors", {}).items():
        print(f"{name} FAILED: {error.strip().splitlines()[-1] if error.strip() else '?'}")


def _print_scenario(r: dict[str, Any]) -> None:
    rows = [
        ("host CPU per turn, instruments on: app + PostgreSQL (ms)",
         f"{r.get('client_cpu_ms_per_turn_full')} + {r.get('server_cpu_ms_per_turn_full')}", ""),
        ("instruments' CPU per turn, timed: metrics + traces (µs)",
         f"{r.get('metrics_us_per_turn')} + {r.get('traces_us_per_turn')}", ""),
        ("  their share of host CPU per turn (%)", r.get("instruments_share_pct"), ""),
        ("  spread over the rounds (min / max %)",
         f"{r.get('timed_share_pct_min')} / {r.get('timed_share_pct_max')}", ""),
        ("  their share of the app process's CPU alone (%)", r.get("instruments_share_client_only_pct"), ""),
        ("A/B blocks, all off vs all on: host CPU +%", r.get("ab_instruments_overhead_pct"), ""),
        ("  spread over the rounds (min / max %)",
         f"{r.get('instruments_overhead_pct_min')} / {r.get('instruments_overhead_pct_max')}", ""),
    ]
    for label, value, target in rows:
        print(f"{label:<58}{value!s:>20}  {target}")


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main)
