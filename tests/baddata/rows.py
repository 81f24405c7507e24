"""A catalogue of malformed session rows: every one must load as `InvalidSessionError`.

Each entry is `(name, text)` for a row stored under `SID`. The text is what sits in the
`blob` column. `JSON_ONLY` rows are valid JSON, so they fit a `jsonb` column too; `TEXT_ONLY`
rows are not JSON at all and only a text column (Memory, SQLite, Redis) can hold them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

SID = "5511999990000"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-blobs"


def good_blob(session_id: str = SID) -> dict[str, Any]:
    """The spec's v4 fixture under `session_id`: a valid row to break one thing at a time."""
    blob = json.loads((FIXTURES / "v4.json").read_text())
    text = json.dumps(blob).replace(blob["id"], session_id)
    return json.loads(text)


def _with(mutate) -> str:
    blob = copy.deepcopy(good_blob())
    mutate(blob)
    return json.dumps(blob, ensure_ascii=False)


def _set(path: str, value: Any):
    def mutate(blob: dict[str, Any]) -> None:
        target: Any = blob
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = parts[-1]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return mutate


def _drop(path: str):
    def mutate(blob: dict[str, Any]) -> None:
        target: Any = blob
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        del target[parts[-1]]
    return mutate


def legacy_3x(name: str) -> str:
    blob = json.loads((FIXTURES / name).read_text())
    blob["id"] = SID
    return json.dumps(blob, ensure_ascii=False)


TEXT_ONLY: list[tuple[str, str]] = [
    ("not-json", "{not json"),
    ("truncated", json.dumps(good_blob())[:-7]),
    ("empty-text", ""),
    ("python-repr", repr(good_blob())),
    ("nan-version", json.dumps(good_blob()).replace('"version": 3', '"version": NaN')),
]

JSON_ONLY: list[tuple[str, str]] = [
    ("json-null", "null"),
    ("json-list", "[]"),
    ("json-string", json.dumps(json.dumps(good_blob()))),  # the blob double-encoded
    ("json-number", "4"),
    ("empty-object", "{}"),
    ("v-missing", _with(_drop("v"))),
    ("v-3", _with(_set("v", 3))),
    ("v-5", _with(_set("v", 5))),
    ("v-text", _with(_set("v", "4"))),
    ("v-true", _with(_set("v", True))),
    ("v-fraction", _with(_set("v", 4.5))),
    ("v-null", _with(_set("v", None))),
    ("id-mismatch", _with(_set("id", "someone-else"))),
    ("id-missing", _with(_drop("id"))),
    ("id-number", _with(_set("id", 5511999990000))),
    ("version-negative", _with(_set("version", -1))),
    ("version-text", _with(_set("version", "3"))),
    ("version-fraction", _with(_set("version", 3.5))),
    ("data-missing", _with(_drop("data"))),
    ("data-list", _with(_set("data", []))),
    ("runs-object", _with(_set("runs", {}))),
    ("runs-missing", _with(_drop("runs"))),
    ("run-status-bad", _with(_set("runs.0.status", "sleeping"))),
    ("run-status-missing", _with(_drop("runs.0.status"))),
    ("run-status-null", _with(_set("runs.0.status", None))),
    ("run-status-ended", _with(_set("runs.0.status", "ended"))),
    ("run-not-object", _with(_set("runs.0", "triagem#m1"))),
    ("run-trigger-missing", _with(_drop("runs.0.trigger"))),
    ("run-trigger-keyless", _with(_set("runs.0.trigger", {"kind": "message"}))),
    ("run-hop-negative", _with(_set("runs.0.hop", -1))),
    ("run-stepid-number", _with(_set("runs.0.stepId", 7))),
    ("run-outcomes-object", _with(_set("runs.0.outcomes", {}))),
    ("run-asked-list", _with(_set("runs.0.asked", []))),
    ("run-flowid-missing", _with(_drop("runs.0.flowId"))),
    ("run-waiting-text", _with(_set("runs.1.waiting", "soon"))),
    ("claims-list", _with(_set("claims", []))),
    ("claim-without-at", _with(_set("claims", {"triagem:x:": {}}))),
    ("inputs-numbers", _with(_set("inputs", [1, 2]))),
    ("metadata-null", _with(_set("metadata", None))),
    ("history-object", _with(_set("history", {}))),
    ("last-user-at-null", _with(_set("lastUserAt", None))),
    ("last-user-at-number", _with(_set("lastUserAt", 1758362400000))),
    ("3x-ilojista", legacy_3x("ilojista-signals.json")),
    ("3x-prospectar", legacy_3x("prospectar-midflow.json")),
]

ALL_ROWS: list[tuple[str, str]] = TEXT_ONLY + JSON_ONLY

# Rows upstream's `assertSession` loads: it checks nothing below the run keys, so outcome lines,
# `waiting`, the trigger's other keys, counter values and claim values are kept as stored. Each
# must load here too and be written back as it was read.
_LINE = "runs.0.outcomes.0"
UPSTREAM_LOADS: list[tuple[str, str]] = [
    ("outcome-line-wrong-types", _with(_set(f"{_LINE}.kind", 12))),
    ("outcome-line-without-at", _with(_drop(f"{_LINE}.at"))),
    ("outcome-line-without-kind-and-status", _with(lambda b: [_drop(f"{_LINE}.kind")(b), _drop(f"{_LINE}.status")(b)])),
    ("outcome-line-fraction-calls", _with(_set(f"{_LINE}.llmCalls", 1.5))),
    ("outcome-line-detail-object", _with(_set(f"{_LINE}.detail", {"why": "x"}))),
    ("outcome-line-not-an-object", _with(_set("runs.0.outcomes", ["a line", 7]))),
    ("waiting-empty", _with(_set("runs.1.waiting", {}))),
    ("waiting-without-set-at", _with(_drop("runs.1.waiting.setAt"))),
    ("waiting-unknown-key", _with(_set("runs.1.waiting.attempt", 2))),
    ("waiting-until-number", _with(_set("runs.1.waiting.until", 1758448800000))),
    ("trigger-unknown-key", _with(_set("runs.0.trigger.at", "2026-09-20T10:00:00.000Z"))),
    ("counters-not-numbers", _with(lambda b: [_set("runs.0.asked", {"orcamento": "1"})(b),
                                              _set("runs.0.visits", {"quem": None, "porte": [1]})(b)])),
    ("counter-negative", _with(_set("runs.0.visits.quem", -2))),
    ("claim-unknown-key", _with(_set("claims.triagem:" + SID + ":.by", "say-once"))),
]
