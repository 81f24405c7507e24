"""Blob bench: load + dump of a session holding 10 runs with outcome lines, against plain json.

    .venv/bin/python bench/blob.py

Two measurements, each one load and one dump:

- text: `Session.from_json_text(text)` + `session.to_json_text()` (what a store does with a row)
  against `json.dumps(json.loads(text))`;
- dict: `Session.from_json(d)` + `session.to_json()` against `json.loads(json.dumps(d))`.

`ratio_vs_json` is the larger of the two ratios (target ≤ 3). Also reports `copy_deep`, the
copy every turn makes.

`host_path_ratio_vs_json` (target ≤ 3) is the blob work of the host's real path, row → session →
turn → row, measured in a child process with Django set up (bench settings, database
`falai_bench`) by calling the functions the host calls (looked up in `host_blob_path`):

- read: the blob text exactly as PostgreSQL hands it to the host (`blob::text` of the stored row:
  jsonb's own output form), through the host's reader (`models.sql.read_blob_text`);
- copy: the engine's working copy inside `turn()`: the copy-on-write `state.working_copy` plus
  `copy_run` of the one run a message turn changes (before that engine, `Session.copy_deep`);
- write: what the host does to put the session back into the UPDATE: `stamped` (version + JSON
  text), the store's own preparation of the parameters (today: `save_statement`, or in the older
  ORM path `json.loads` of the text, `derived_columns` and the JSONField's `get_db_prep_save`), and
  the driver's adaptation of those parameters into the statement (`ClientCursor.mogrify`, which is
  what Django's client-side-binding cursor does on execute). A real `DjangoStore.save` on the same
  session is captured once and its blob literal must equal the one timed here, so the timed path
  cannot drift from the real one.

against `json.loads(text)` + `json.dumps(dict)` (compact, non-ASCII kept) of the same blob.
Writes bench/results/blob.json.
"""

from __future__ import annotations

import json
import os
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


def host_blob_path() -> dict[str, Any]:
    """The host's own functions for the blob's round trip, looked up in ONE place (a rename in the
    host shows up here as an ImportError / AttributeError; update this function then).

    Returns `read(text, sid)`, `copy(session)`, `write(session, expected) -> list of SQL literals`
    and `store` (a DjangoStore, for the check against a real save). Needs Django set up."""
    from django.db import connection

    from falai_django.engine.session import Session as EngineSession
    from falai_django.stores.base import stamped
    from falai_django.stores.django import DjangoStore

    try:  # the session row's statements
        from falai_django.models import sql as django_store
    except ImportError:  # before the package was grouped by domain they sat beside the store
        from falai_django.stores import django as django_store

    store = DjangoStore()
    model = store.get_model_class()
    connection.ensure_connection()
    import psycopg

    cursor = psycopg.ClientCursor(connection.connection)

    def adapt(params: list[Any]) -> str:  # what Django's client-side-binding cursor does on execute
        return cursor.mogrify(", ".join(["%s"] * len(params)), params)

    save_statement = getattr(django_store, "save_statement", None)
    if save_statement is not None:  # the statement built from the session and its JSON text

        def prepare(saved: Any, text: str, expected: int) -> list[Any]:
            return save_statement(connection, model, saved, text, expected)[1]
    else:  # the older path: the text decoded again for the JSONField, derived columns from the dict
        field = model._meta.get_field("blob")
        derived_fields = [model._meta.get_field(name) for name in django_store.derived_columns({})]

        def prepare(saved: Any, text: str, expected: int) -> list[Any]:
            blob = json.loads(text)
            derived = django_store.derived_columns(blob)
            return [field.get_db_prep_save(blob, connection),
                    *(f.get_db_prep_save(derived[f.name], connection) for f in derived_fields)]

    def write(session: Any, expected: int) -> str:
        saved, text = stamped(session, expected)
        return adapt(prepare(saved, text, expected))

    try:  # the engine's working copy: copy-on-write (the containers, then each run a turn changes)
        from falai_django.engine.state import copy_run, working_copy

        def copy(session: Any) -> Any:  # a message turn changes one run: the asking one
            working = working_copy(session)
            if working.runs:
                working.runs[0] = copy_run(working.runs[0])
            return working
        copy_api = "working_copy + copy_run of the one run the turn changes"
    except ImportError:  # before the copy-on-write engine: a full deep copy
        copy, copy_api = EngineSession.copy_deep, "Session.copy_deep"

    return {"read": django_store.read_blob_text, "copy": copy, "copy_api": copy_api, "stamp": stamped,
            "prepare": prepare, "adapt": adapt, "write": write, "store": store,
            "write_api": "save_statement" if save_statement is not None else "orm"}


def measure_host_path(number: int, repeat: int) -> dict[str, Any]:
    """In a child process with Django set up: the host path's blob work vs json (see the module doc)."""
    from bench.hostbench import setup_django

    setup_django(truncate=False)
    from django.db import connection

    path = host_blob_path()
    blob = session_blob()
    sid = blob["id"]
    session = Session.from_json(blob, sid)
    store = path["store"]
    model = store.get_model_class()
    model.objects.filter(pk=sid).delete()
    stored = store.save(session.model_copy(update={"version": 0}), 0)
    with connection.cursor() as cur:  # the row's text as PostgreSQL hands it over
        cur.execute(f"SELECT {connection.ops.quote_name('blob')}::text FROM "
                    f"{connection.ops.quote_name(model._meta.db_table)} WHERE id = %s", [sid])
        text = cur.fetchone()[0]

    # The check: a real save sends the same blob literal the timed `write` builds.
    captured: list[tuple[str, Any]] = []

    def capture(execute, sql, params, many, context):
        captured.append((sql, params))
        return execute(sql, params, many, context)

    loaded = path["read"](text, sid)
    with connection.execute_wrapper(capture):
        store.save(loaded, stored.version)
    import psycopg

    real = psycopg.ClientCursor(connection.connection).mogrify(*captured[0])
    timed_literals = path["write"](loaded, stored.version)
    blob_literal = max(timed_literals.split(", "), key=len)
    if blob_literal not in real:
        raise RuntimeError("host_blob_path() no longer matches what DjangoStore.save sends: update it")
    model.objects.filter(pk=sid).delete()

    d = json.loads(text)
    read, copy, write = path["read"], path["copy"], path["write"]
    working = read(text, sid)
    saved, saved_text = path["stamp"](working, 17)
    params = path["prepare"](saved, saved_text, 17)
    cases = {
        "read": lambda: read(text, sid),
        "copy": lambda: copy(working),
        "write": lambda: write(working, 17),
        "write_stamp": lambda: path["stamp"](working, 17),
        "write_prepare": lambda: path["prepare"](saved, saved_text, 17),
        "write_adapt": lambda: path["adapt"](params),
        "host_path": lambda: write(copy(read(text, sid)), 17),
        "json_loads": lambda: json.loads(text),
        "json_dumps": lambda: json.dumps(d, separators=(",", ":"), ensure_ascii=False),
        "json_round_trip": lambda: json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False),
    }
    for fn in cases.values():
        for _ in range(20):
            fn()
    best = {name: timed(fn, number, repeat)[0] for name, fn in cases.items()}
    return {
        "host_path_ratio_vs_json": round(best["host_path"] / best["json_round_trip"], 3),
        "host_path_us": round(best["host_path"], 1),
        "host_path_json_us": round(best["json_round_trip"], 1),
        "host_path_parts_us": {k: round(best[k], 1) for k in (
            "read", "copy", "write", "write_stamp", "write_prepare", "write_adapt", "json_loads", "json_dumps")},
        "host_path_row_text_bytes": len(text.encode()),
        "host_path_write_api": path["write_api"],
        "host_path_copy_api": path["copy_api"],
    }


def _sizes() -> tuple[int, int]:
    from bench.hostbench import quick

    return (60, 5) if quick() else (300, 15)


def main(number: int | None = None, repeat: int | None = None) -> dict[str, Any]:
    number, repeat = (number, repeat) if number and repeat else _sizes()
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
    from bench.hostbench import run_child

    result.update(run_child(Path(__file__).resolve(), part="host"))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
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
    parts = result["host_path_parts_us"]
    print(f"host path (row text {result['host_path_row_text_bytes']} bytes): read {parts['read']} + copy "
          f"{parts['copy']} + write {parts['write']} µs (stamp {parts['write_stamp']}, prepare "
          f"{parts['write_prepare']}, adapt {parts['write_adapt']}) -> {result['host_path_us']} µs vs json loads+dumps "
          f"{result['host_path_json_us']} µs = {result['host_path_ratio_vs_json']:.2f}x (target ≤ 3x)")


if __name__ == "__main__":
    if "--quick" in sys.argv:
        os.environ["FALAI_BENCH_QUICK"] = "1"
    if "--measure" in sys.argv:
        print(json.dumps(measure_host_path(*_sizes())))
    else:
        main()
        print(f"wrote {RESULTS.relative_to(ROOT)}")
