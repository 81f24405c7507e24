"""Flows in git: export the stored flows to a directory, one JSON file per flow, and import them
back, checked, with a report of what changed (`manage.py falai_flows export|import DIR`).

A file holds `{"id", "name", "enabled", "position", "spec"}` (indented, keys sorted, so a diff in
review shows only what changed). An import checks every file first and saves nothing when one is
bad; otherwise it saves each new or changed flow as a new version in one transaction. Stored flows
without a file are reported and left alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from falai_django import jsondepth
from falai_django.engine.spec import to_spec
from falai_django.models import Flow

KEYS = ("name", "enabled", "position", "spec")


def flow_file(flow: Flow) -> dict[str, Any]:
    return {"id": flow.pk, "name": flow.name, "enabled": flow.enabled, "position": flow.position, "spec": flow.spec}


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def export_flows(directory: Path, code_agent: Any = None) -> list[str]:
    """Write one `<id>.json` per stored flow (and, with `code_agent`, per code flow not stored, disabled,
    as a starting point). Returns the file names written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    stored = {f.pk: f for f in Flow.objects.order_by("position", "id")}
    for flow in stored.values():
        (directory / f"{flow.pk}.json").write_text(dump(flow_file(flow)), encoding="utf-8")
        written.append(f"{flow.pk}.json")
    for code_flow in getattr(code_agent, "flows", ()) if code_agent is not None else ():
        if code_flow.id in stored:
            continue
        spec = to_spec(code_flow)
        data = {"id": code_flow.id, "name": code_flow.name or code_flow.id, "enabled": False, "position": 0,
                "spec": spec}
        (directory / f"{code_flow.id}.json").write_text(dump(data), encoding="utf-8")
        written.append(f"{code_flow.id}.json")
    return written


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    changed: list[tuple[str, list[str]]] = field(default_factory=list)  # (id, keys that changed)
    unchanged: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    not_in_directory: list[str] = field(default_factory=list)
    saved: bool = False


def _read(path: Path) -> dict[str, Any]:
    try:
        data = jsondepth.loads(path.read_text(encoding="utf-8"), "the file")  # a ValueError when too deep
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    unknown = set(data) - {"id", *KEYS}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}; a flow file has id, {', '.join(KEYS)}")
    if not isinstance(data.get("id"), str) or not data["id"]:
        raise ValueError("has no id")
    if data["id"] != path.stem:
        raise ValueError(f'its id "{data["id"]}" is not its file name "{path.stem}"')
    if "spec" not in data:
        raise ValueError("has no spec")
    for name, kind in (("name", str), ("enabled", bool), ("position", int)):
        if name in data and (not isinstance(data[name], kind) or (kind is int and isinstance(data[name], bool))):
            raise ValueError(f"{name} must be a {kind.__name__}")
    return data


def import_flows(directory: Path, *, dry_run: bool = False, changed_by: Any = None) -> ImportReport:
    """Check every `*.json` in `directory`; save the new and changed flows unless one is bad."""
    report = ImportReport()
    pending: list[tuple[Flow, str]] = []
    stored = {f.pk: f for f in Flow.objects.all()}
    seen: set[str] = set()
    for path in sorted(directory.glob("*.json")):
        try:
            data = _read(path)
        except ValueError as exc:
            report.errors.append((path.name, str(exc)))
            continue
        seen.add(data["id"])
        current = stored.get(data["id"])
        flow = Flow(id=data["id"]) if current is None else Flow.objects.get(pk=data["id"])
        before = None if current is None else {k: getattr(current, k) for k in KEYS}
        for key in KEYS:
            if key in data:
                setattr(flow, key, data[key])
        try:
            flow.full_clean()
        except ValidationError as exc:
            report.errors.append((path.name, " ".join(m for ms in exc.message_dict.values() for m in ms)))
            continue
        report.warnings.extend((path.name, w) for w in getattr(flow, "spec_warnings", []))
        if before is None:
            report.created.append(flow.pk)
        else:
            diff = [k for k in KEYS if before[k] != getattr(flow, k)]
            if not diff:
                report.unchanged.append(flow.pk)
                continue
            report.changed.append((flow.pk, diff))
        pending.append((flow, path.name))
    report.not_in_directory = sorted(set(stored) - seen)
    if report.errors or dry_run:
        return report
    with transaction.atomic():
        for flow, name in pending:
            flow.save(changed_by=changed_by, note=f"imported from {name}")
    report.saved = True
    return report
