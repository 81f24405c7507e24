"""Blob bench: load + dump of a session holding 10 runs with outcome lines, against plain json.

    .venv/bin/python bench/blob.py

Two measurements, each one load and one dump:

- text: `Session.from_json_text(text)` + `session.to_json_text()` (what a store does with a row)
  against `json.dumps(json.loads(text))`;
- dict: `Session.from_json(d)` + `session.to_json()` against `json.loads(json.dumps(d))`.

`ratio_vs_json` is the larger of the two ratios (target ≤ 3). Also reports `copy_deep`, the
copy every turn makes. Writes bench/results/blob.json.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from falai_django.engine.session import Session  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "blob.json"
TARGET_RATIO = 3.0


def session_blob(runs: int = 10, lines: int = 10) -> dict[str, Any]:
    """A realistic big session: `runs` live runs, each with `lines` outcome lines, claims, data."""
    sid = "5511999990000"
    blob: dict[str, Any] = {
        "id": sid, "v": 4, "version": 17,
        "data": {"nome": "João da Silva", "empresa": "Padaria Estrela", "tamanho": "11-50", "confirmado": True,
                 "interesses": ["cardápio digital", "delivery"], "endereco": None, "orcamento": 1500.5},
        "runs": [], "claims": {}, "inputs": [f"wamid.HBgL{i:04d}" for i in range(50)],
        "lastUserAt": "2026-09-20T10:02:00.000Z", "lastAssistantAt": "2026-09-20T10:02:05.000Z",
        "metadata": {"workspaceId": "ws_demo", "channel": "whatsapp"},
    }
    for r in range(runs):
        run_id = f"flow{r}#wamid.HBgL{r:04d}"
        run: dict[str, Any] = {
            "id": run_id, "flowId": f"flow{r}", "anchor": sid, "dedupeKey": f"flow{r}:{sid}:",
            "stepId": "porte", "status": "waiting" if r % 2 else "suspended",
            "trigger": {"kind": "event", "key": f"stage:{r}", "payload": {"stage": r, "lead": {"id": 456}}},
            "input": {"stage": r, "lead": {"id": 456}}, "hop": 0, "startedAt": "2026-09-20T10:00:00.000Z",
            "asked": {"tamanho": 1, "nome": 2}, "visits": {"quem": 1, "porte": 2, "w1": 1},
            "outcomes": [],
        }
        if r % 2:
            run["waiting"] = {"kind": "timer", "key": f"{run_id}:w1:1758448800000",
                              "until": "2026-09-21T11:00:00.000Z", "setAt": "2026-09-20T11:00:00.000Z"}
        else:
            run["suspendedAt"] = "2026-09-20T10:01:00.000Z"
        for i in range(lines):
            line = {"runId": run_id, "flowId": f"flow{r}", "stepId": "quem", "key": f"{run_id}:quem:{i + 1}",
                    "kind": "collect", "status": "ok", "at": "2026-09-20T10:00:01.000Z"}
            if i % 3 == 0:
                line["llmCalls"] = 1
            elif i % 3 == 1:
                line.update(code="max-asks", message="The field was skipped after the most asks allowed.",
                            detail="tamanho")
            else:
                line.update(kind="wait", status="waiting", until="2026-09-21T11:00:00.000Z")
            run["outcomes"].append(line)
        blob["runs"].append(run)
        blob["claims"][run["dedupeKey"]] = {"at": "2026-09-20T10:00:00.000Z"}
    return blob


def timed(fn, number: int, repeat: int) -> tuple[float, float]:
    """(best, median) µs per call over `repeat` batches of `number` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return min(samples), statistics.median(samples)


def main(number: int = 300, repeat: int = 15) -> dict[str, Any]:
    blob = session_blob()
    text = json.dumps(blob, separators=(",", ":"), ensure_ascii=False)
    sid = blob["id"]
    session = Session.from_json_text(text, sid)
    assert session.to_json() == blob, "the bench session must round-trip exactly"

    cases = {
        "json_text": lambda: json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False),
        "session_text": lambda: Session.from_json_text(text, sid).to_json_text(),
        "json_dict": lambda: json.loads(json.dumps(blob)),
        "session_dict": lambda: Session.from_json(blob, sid).to_json(),
        "copy_deep": session.copy_deep,
        "model_copy_deep": lambda: session.model_copy(deep=True),
    }
    for fn in cases.values():  # warm up
        for _ in range(20):
            fn()
    measured = {name: timed(fn, number, repeat) for name, fn in cases.items()}
    best = {name: m[0] for name, m in measured.items()}
    text_ratio = best["session_text"] / best["json_text"]
    dict_ratio = best["session_dict"] / best["json_dict"]
    result = {
        "bench": "blob",
        "runs": len(blob["runs"]),
        "outcome_lines": sum(len(r["outcomes"]) for r in blob["runs"]),
        "blob_bytes": len(text.encode()),
        "session_us": round(best["session_text"], 1),
        "json_us": round(best["json_text"], 1),
        "ratio_vs_json": round(max(text_ratio, dict_ratio), 3),
        "text_ratio": round(text_ratio, 3),
        "dict_ratio": round(dict_ratio, 3),
        "session_dict_us": round(best["session_dict"], 1),
        "json_dict_us": round(best["json_dict"], 1),
        "copy_deep_us": round(best["copy_deep"], 1),
        "model_copy_deep_us": round(best["model_copy_deep"], 1),
        "median_us": {name: round(m[1], 1) for name, m in measured.items()},
        "target_ratio": TARGET_RATIO,
        "meets_target": max(text_ratio, dict_ratio) <= TARGET_RATIO,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


def print_table(result: dict[str, Any]) -> None:
    print(f"session blob: {result['runs']} runs, {result['outcome_lines']} outcome lines, "
          f"{result['blob_bytes']} bytes")
    print(f"{'case':<34}{'best µs':>10}{'median µs':>12}")
    rows = [("Session text load+dump", "session_text"), ("json text loads+dumps", "json_text"),
            ("Session dict from_json+to_json", "session_dict"), ("json.loads(json.dumps(d))", "json_dict"),
            ("session.copy_deep()", "copy_deep"), ("model_copy(deep=True)", "model_copy_deep")]
    best = {"session_text": result["session_us"], "json_text": result["json_us"],
            "session_dict": result["session_dict_us"], "json_dict": result["json_dict_us"],
            "copy_deep": result["copy_deep_us"], "model_copy_deep": result["model_copy_deep_us"]}
    for label, key in rows:
        print(f"{label:<34}{best[key]:>10.1f}{result['median_us'][key]:>12.1f}")
    print(f"ratio vs json: text {result['text_ratio']:.2f}x, dict {result['dict_ratio']:.2f}x "
          f"-> {result['ratio_vs_json']:.2f}x (target ≤ {result['target_ratio']:.0f}x: "
          f"{'met' if result['meets_target'] else 'MISSED'})")


if __name__ == "__main__":
    print_table(main())
    print(f"wrote {RESULTS.relative_to(ROOT)}")
