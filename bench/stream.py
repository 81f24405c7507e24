"""Streaming latency: from the turn's start to its first customer-visible delta.

Writes bench/results/stream.json:

- `first_delta_ms` (target <= 5 ms): median time from `agent.turn_stream(...)` being called to
  the turn yielding its first delta, through the engine with the scripted zero-latency
  `mock_provider` (understand answered, then the speak reply streamed in 7-character chunks, no
  network): everything the engine does before the customer sees text (set-up, understand, flow
  advance, prompt building, the streamed speak call, the envelope decoder). `_p95`, `_max` too.
- `first_delta_ms_over_fake_gemini`: the same, turn start -> first delta, through the real
  `GeminiProvider` (google-genai client) against a fake Gemini server on loopback
  (tests/providers/fake_gemini.py: the understand call answered at once, the speak envelope
  streamed in 20 SSE chunks, no gaps): the engine plus the provider's HTTP work for two calls.
- `decoder_first_delta_ms`: the provider alone, from the fake server writing the first chunk to
  the `StreamingMessageDecoder` yielding the first non-empty delta (what `first_delta_ms` used to
  measure: "first delta after its chunk"); `decoder_first_delta_ms_p95`, `_max`.
- `provider_decoder_cpu_ms_per_streamed_reply`: CPU time of the consuming thread (client,
  SDK, provider fold and decoder; the server thread excluded) per streamed reply.
- `engine_ms_per_streamed_turn`: the engine's own CPU (this thread's `time.thread_time`) for
  one `agent.turn_stream` turn that streams a speak reply from `mock_provider` (no network),
  median; `engine_wall_ms_per_streamed_turn` is the same turn's wall time.
- `turn_stream_ms_over_fake_gemini` / `turn_first_delta_ms_over_fake_gemini`: a whole streamed
  turn (whatever calls the engine makes; for this lone catch-all flow, one streamed speak
  call, the understand call answered from the schema if made) through `GeminiProvider` and the fake server
  (20 chunks, no gaps): its wall time, and first speak chunk written -> first turn delta.

- `decoder_first_delta_ms_over_fake_<vendor>` (one row per vendor provider: `openai` on the
  Responses API, `openai_compatible` on chat completions, `anthropic` on the Messages API): the
  same "first text event written -> first decoder delta" through that provider's real SDK
  against its fake server (tests/providers/fake_vendors.py, 20 events, 2 ms gaps): what each
  adapter adds before the customer sees text; `_p95` and
  `provider_decoder_cpu_ms_per_streamed_reply_<vendor>` too.

Run: `.venv/bin/python bench/stream.py [--quick]`; `--vendors` measures only the vendor rows and
merges them into the existing results. `main()` returns the same dict.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from falai_django.llm.streaming import StreamingMessageDecoder  # noqa: E402
from falai_django.llm.types import GenerateInput, GenerateParameters  # noqa: E402
from falai_django.providers.gemini import GeminiProvider  # noqa: E402
from tests.providers.fake_gemini import FakeGemini, Reply  # noqa: E402

MESSAGE_CHARS = 400
CHUNKS = 20
RUNS = 40
WARMUP = 5
CHUNK_GAP_S = 0.002
SCHEMA = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"],
          "additionalProperties": False}


def _message() -> str:
    words = "Oi! Aqui é a Ana, da loja. Posso te ajudar com preços, prazos e entregas. "
    return (words * (MESSAGE_CHARS // len(words) + 1))[:MESSAGE_CHARS]


def _envelope_chunks(message: str) -> list[dict]:
    """20 streamed responses, each carrying 20 characters of the message (the first also opens the object)."""
    size = MESSAGE_CHARS // CHUNKS
    pieces = [json.dumps(message[i : i + size], ensure_ascii=False)[1:-1] for i in range(0, MESSAGE_CHARS, size)]
    pieces[0] = '{"message": "' + pieces[0]
    pieces[-1] = pieces[-1] + '"}'
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}]} for p in pieces]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    chunks[-1]["usageMetadata"] = {"promptTokenCount": 900, "candidatesTokenCount": 110}
    return chunks


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure_provider(runs: int = RUNS) -> dict:
    message = _message()
    chunks = _envelope_chunks(message)
    request = GenerateInput(prompt="oi", system="Você é Ana.",
                            parameters=GenerateParameters(json_schema=SCHEMA, schema_name="speak"))
    server = FakeGemini()
    provider = GeminiProvider(api_key="bench", base_url=server.base_url, retries=0)
    first_delta: list[float] = []
    cpu: list[float] = []
    try:
        for run in range(WARMUP + runs):
            server.push(Reply(chunks=chunks, chunk_delay_s=CHUNK_GAP_S))
            decoder = StreamingMessageDecoder()
            seen_at = None
            text = []
            cpu_start = time.thread_time()
            for chunk in provider.generate_message_stream(request):
                _, delta = decoder.push(chunk.accumulated)
                if delta:
                    if seen_at is None:
                        seen_at = time.perf_counter()
                    text.append(delta)
            cpu_used = time.thread_time() - cpu_start
            assert "".join(text) == message, "the deltas must rebuild the message"
            if run >= WARMUP:
                first_delta.append((seen_at - server.first_chunk_at[-1]) * 1000)
                cpu.append(cpu_used * 1000)
    finally:
        provider.close()
        server.close()
    return {
        "decoder_first_delta_ms": round(statistics.median(first_delta), 3),
        "decoder_first_delta_ms_p95": round(_percentile(first_delta, 0.95), 3),
        "decoder_first_delta_ms_max": round(max(first_delta), 3),
        "provider_decoder_cpu_ms_per_streamed_reply": round(statistics.median(cpu), 3),
    }


def measure_engine(runs: int = RUNS) -> dict:
    """Median CPU ms (this thread) and wall ms of one streamed turn through agent.turn_stream with
    mock_provider."""
    from falai_django import falai
    from falai_django.testing import fake_clock, mock_provider

    message = _message()
    samples: list[float] = []
    cpu: list[float] = []
    first: list[float] = []
    for run in range(WARMUP + runs):
        provider = mock_provider(understand=[{"flows": {"atendimento": 100}}], speak=[{"message": message}])
        f = falai().fields({})
        agent = f.agent(
            name="Ana",
            provider=provider,
            flows=[f.flow({"id": "atendimento", "name": "Atendimento", "on": [{"message": []}],
                           "steps": [{"id": "responder", "prompt": "Responda com educação."}]})],
            clock=fake_clock("2026-09-20T10:00:00Z"),
        )
        start, cpu_start = time.perf_counter(), time.thread_time()
        deltas, result, seen_at = [], None, None
        for item in agent.turn_stream(session_id="5511999990000", message="oi", id=f"m{run}", session=None,
                                      history=[]):
            if item.get("done"):
                result = item["result"]
            else:
                if seen_at is None and item["delta"]:
                    seen_at = time.perf_counter()
                deltas.append(item["delta"])
        cpu_used = (time.thread_time() - cpu_start) * 1000
        elapsed = (time.perf_counter() - start) * 1000
        if result is None or "".join(deltas) != message:
            raise RuntimeError("turn_stream did not stream the scripted speak reply")
        if run >= WARMUP:
            samples.append(elapsed)
            cpu.append(cpu_used)
            first.append((seen_at - start) * 1000)
    return {"first_delta_ms": round(statistics.median(first), 3),
            "first_delta_ms_p95": round(_percentile(first, 0.95), 3),
            "first_delta_ms_max": round(max(first), 3),
            "engine_ms_per_streamed_turn": round(statistics.median(cpu), 3),
            "engine_wall_ms_per_streamed_turn": round(statistics.median(samples), 3)}


def measure_turn_over_gemini(runs: int = RUNS) -> dict:
    """A whole streamed turn through GeminiProvider and the fake server (speak streamed, understand answered)."""
    from falai_django import falai
    from falai_django.testing import fake_clock
    from tests.providers.fake_gemini import text_chunks

    message = _message()
    speak_chunks = _envelope_chunks(message)
    understand = text_chunks(json.dumps({"flows": {"atendimento": 100}}), 1)

    def respond(recorded) -> Reply:
        schema = recorded.body.get("generationConfig", {}).get("responseJsonSchema") or {}
        return Reply(chunks=speak_chunks if "message" in schema.get("properties", {}) else understand)

    server = FakeGemini(responder=respond)
    provider = GeminiProvider(api_key="bench", base_url=server.base_url, retries=0)
    f = falai().fields({})
    agent = f.agent(
        name="Ana", provider=provider, clock=fake_clock("2026-09-20T10:00:00Z"),
        flows=[f.flow({"id": "atendimento", "name": "Atendimento", "on": [{"message": []}],
                       "steps": [{"id": "responder", "prompt": "Responda com educação."}]})],
    )
    wall: list[float] = []
    first: list[float] = []
    from_start: list[float] = []
    try:
        for run in range(WARMUP + runs):
            start = time.perf_counter()
            seen_at, deltas = None, []
            for item in agent.turn_stream(session_id="5511999990000", message="oi", id=f"g{run}", session=None,
                                          history=[]):
                if "delta" in item:
                    seen_at = seen_at or time.perf_counter()
                    deltas.append(item["delta"])
            elapsed = (time.perf_counter() - start) * 1000
            if "".join(deltas) != message:
                raise RuntimeError("turn_stream over Gemini did not stream the speak reply")
            if run >= WARMUP:
                wall.append(elapsed)
                first.append((seen_at - server.first_chunk_at[-1]) * 1000)
                from_start.append((seen_at - start) * 1000)
    finally:
        provider.close()
        server.close()
    return {
        "turn_stream_ms_over_fake_gemini": round(statistics.median(wall), 3),
        "turn_first_delta_ms_over_fake_gemini": round(statistics.median(first), 3),
        "first_delta_ms_over_fake_gemini": round(statistics.median(from_start), 3),
        "first_delta_ms_over_fake_gemini_p95": round(_percentile(from_start, 0.95), 3),
    }


VENDORS = ("openai", "openai_compatible", "anthropic")


def _vendor_case(name: str, server, message: str):
    """(provider, events, index of the first event carrying text) for one vendor row."""
    from falai_django import AnthropicProvider, OpenAICompatibleProvider, OpenAIProvider
    from tests.providers import fake_vendors as fv

    text = json.dumps({"message": message}, ensure_ascii=False)
    if name == "openai":
        provider = OpenAIProvider(api_key="bench", model="gpt-4.1-mini", base_url=server.url("/v1"), retries=0)
        events = fv.responses_text(text, CHUNKS, usage=fv.responses_usage(900, 110))
        kind = "response.output_text.delta"
    elif name == "openai_compatible":
        provider = OpenAICompatibleProvider(api_key="bench", model="llama3.3", base_url=server.url("/v1"),
                                            retries=0)
        events = fv.chat_text(text, CHUNKS, usage=fv.chat_usage(900, 110))
        kind = None
    else:
        provider = AnthropicProvider(api_key="bench", model="claude-sonnet-4-5", base_url=server.url(""),
                                     retries=0)
        events = fv.anthropic_text(text, CHUNKS, input_tokens=900, output_tokens=110)
        kind = "content_block_delta"
    first_text = next(i for i, (event, data) in enumerate(events)
                      if (event == kind if kind else isinstance(data, dict) and data.get("choices")
                          and data["choices"][0]["delta"].get("content")))
    return provider, events, first_text


def measure_vendors(runs: int = RUNS) -> dict:
    """One row per vendor provider: its fake server writing the first text event -> the decoder's first delta."""
    from tests.providers.fake_vendors import FakeVendor
    from tests.providers.fake_vendors import Reply as VendorReply

    message = _message()
    request = GenerateInput(prompt="oi", system="Você é Ana.",
                            parameters=GenerateParameters(json_schema=SCHEMA, schema_name="speak"))
    results: dict = {}
    for name in VENDORS:
        server = FakeVendor()
        provider, events, mark = _vendor_case(name, server, message)
        first_delta: list[float] = []
        cpu: list[float] = []
        try:
            for run in range(WARMUP + runs):
                server.push(VendorReply(events=events, chunk_delay_s=CHUNK_GAP_S, mark=mark))
                decoder = StreamingMessageDecoder()
                seen_at = None
                text = []
                cpu_start = time.thread_time()
                for chunk in provider.generate_message_stream(request):
                    _, delta = decoder.push(chunk.accumulated)
                    if delta:
                        if seen_at is None:
                            seen_at = time.perf_counter()
                        text.append(delta)
                cpu_used = time.thread_time() - cpu_start
                assert "".join(text) == message, f"{name}: the deltas must rebuild the message"
                if run >= WARMUP:
                    first_delta.append((seen_at - server.first_chunk_at[-1]) * 1000)
                    cpu.append(cpu_used * 1000)
        finally:
            provider.close()
            server.close()
        results[f"decoder_first_delta_ms_over_fake_{name}"] = round(statistics.median(first_delta), 3)
        results[f"decoder_first_delta_ms_over_fake_{name}_p95"] = round(_percentile(first_delta, 0.95), 3)
        results[f"provider_decoder_cpu_ms_per_streamed_reply_{name}"] = round(statistics.median(cpu), 3)
    return results


def main() -> dict:
    from bench.hostbench import quick

    runs = 10 if quick() else RUNS
    results = {"message_chars": MESSAGE_CHARS, "chunks": CHUNKS, "runs": runs, **measure_provider(runs)}
    results.update(measure_engine(runs))  # a broken turn_stream fails the bench: no stand-in figure
    results["engine_ms_per_streamed_turn_source"] = "agent.turn_stream with mock_provider, median thread CPU ms"
    try:
        results.update(measure_turn_over_gemini(runs))
    except Exception as exc:  # reported, never fatal: the provider figures above stand on their own
        results["turn_over_fake_gemini_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    results.update(measure_vendors(runs))
    out = ROOT / "bench" / "results" / "stream.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print_table(results)
    return results


def print_table(r: dict) -> None:
    rows = [
        ("turn start -> first delta, engine + scripted provider", "first_delta_ms", "≤ 5 ms"),
        ("  p95", "first_delta_ms_p95", ""),
        ("turn start -> first delta, GeminiProvider + fake server", "first_delta_ms_over_fake_gemini", ""),
        ("first chunk -> first delta, provider + decoder only", "decoder_first_delta_ms", ""),
        ("engine CPU ms per streamed turn", "engine_ms_per_streamed_turn", ""),
        *((f"  first text -> first delta, {name} adapter + decoder", f"decoder_first_delta_ms_over_fake_{name}",
           "") for name in VENDORS),
    ]
    for label, key, target in rows:
        print(f"{label:<58}{r.get(key, '-')!s:>10}  {target}")
    if "turn_over_fake_gemini_error" in r:
        print(f"over fake Gemini: {r['turn_over_fake_gemini_error']}")


if __name__ == "__main__":
    import os

    if "--quick" in sys.argv:
        os.environ["FALAI_BENCH_QUICK"] = "1"
    if "--vendors" in sys.argv:  # only the vendor rows, merged into the existing results
        from bench.hostbench import quick

        path = ROOT / "bench" / "results" / "stream.json"
        merged = {**(json.loads(path.read_text()) if path.exists() else {}),
                  **measure_vendors(10 if quick() else RUNS)}
        path.write_text(json.dumps(merged, indent=2) + "\n")
        print_table(merged)
    else:
        main()
