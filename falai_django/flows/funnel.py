"""Where customers drop out: one flow's runs, from the run log (`TurnRecord`).

For the runs of a flow started between two dates (inclusive, by the day their first turn was
received) it counts how many started, reached each step, were asked each field how many times,
hit `max-asks`, and how they ended, plus the median time spent on each step:

- **reached** a step: the run wrote an outcome line on it;
- **asked**: a field's ask count, from the run's `asked` counters (the ended run in the run log,
  else the live run in the saved session): runs asked at least once, and asks in all;
- **ended**: `completed` (reason end, flow or reset), `failed` (reason failed), `abandoned`
  (skipped or replaced, or still live with nothing written for `ABANDONED_AFTER`), `silenced`
  (still live in a conversation a human has now, or its last line was silenced), `in_progress`
  (still live, recently active);
- **time on a step**: from the run's first line on it to its first line on the next step.

`flow_funnel` returns plain JSON-ready data (the API answers it as is); `funnel_svg` draws it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Any

from django.utils import timezone
from django.utils.html import escape

from falai_django.engine.jstime import try_parse_iso
from falai_django.models import Session, TurnRecord

ABANDONED_AFTER = timedelta(hours=24)
ENDINGS = ("completed", "silenced", "failed", "abandoned", "in_progress")
_REASONS = {"end": "completed", "flow": "completed", "reset": "completed", "failed": "failed",
            "skipped": "abandoned", "replaced": "abandoned"}


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _steps_of(spec: Any) -> list[str]:
    steps = spec.get("steps") if isinstance(spec, Mapping) else None
    return [str(s["id"]) for s in steps or () if isinstance(s, Mapping) and "id" in s]


def flow_funnel(flow_id: str, since: date, until: date, *, spec: Any = None,
                now: datetime | None = None) -> dict[str, Any]:
    """The funnel of `flow_id` for runs started from `since` to `until` (dates, inclusive).
    `spec` (the flow's current FlowSpec) orders the steps; steps seen only in the log follow."""
    now = now or timezone.now()
    start, end = _day_start(since), _day_start(until + timedelta(days=1))
    runs: dict[str, dict[str, Any]] = {}
    for conversation_id, started in (TurnRecord.objects.filter(received_at__gte=start, received_at__lt=end)
                                     .exclude(started=[]).values_list("conversation_id", "started").iterator()):
        for item in started or ():
            if isinstance(item, Mapping) and item.get("flowId") == flow_id and item.get("runId") not in runs:
                runs[item["runId"]] = {"conversation": conversation_id, "lines": [], "ended": None}
    conversations = sorted({r["conversation"] for r in runs.values()})
    for chunk in _chunks(conversations, 500):
        rows = (TurnRecord.objects.filter(conversation_id__in=chunk, received_at__gte=start)
                .order_by("id").values_list("outcomes", "ended"))
        for outcomes, ended in rows.iterator():
            for line in outcomes or ():
                if isinstance(line, Mapping) and line.get("runId") in runs:
                    runs[line["runId"]]["lines"].append(line)
            for run in ended or ():
                if isinstance(run, Mapping) and run.get("id") in runs:
                    runs[run["id"]]["ended"] = run
    live, silenced = _live_runs({rid: r["conversation"] for rid, r in runs.items() if r["ended"] is None})

    reached: dict[str, set[str]] = defaultdict(set)
    max_asks: dict[str, set[str]] = defaultdict(set)
    asked_runs: dict[str, int] = defaultdict(int)
    asked_total: dict[str, int] = defaultdict(int)
    durations: dict[str, list[float]] = defaultdict(list)
    endings = dict.fromkeys(ENDINGS, 0)
    for run_id, run in runs.items():
        lines = sorted(run["lines"], key=lambda ln: str(ln.get("at") or ""))
        for line in lines:
            if line.get("stepId"):
                reached[line["stepId"]].add(run_id)
                if line.get("code") == "max-asks":
                    max_asks[line["stepId"]].add(run_id)
        _step_times(lines, durations)
        state = run["ended"] or live.get(run_id) or {}
        for field, count in (state.get("asked") or {}).items():
            if isinstance(count, int) and count > 0:
                asked_runs[field] += 1
                asked_total[field] += count
        endings[_ending(run["ended"], lines, now, run["conversation"] in silenced)] += 1

    order = _steps_of(spec)
    order += sorted(s for s in reached if s not in order)
    return {
        "flow": flow_id,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "started": len(runs),
        "steps": [{
            "id": step,
            "reached": len(reached.get(step, ())),
            "max_asks": len(max_asks.get(step, ())),
            "median_seconds": round(statistics.median(durations[step]), 3) if durations.get(step) else None,
        } for step in order],
        "fields": [{"field": f, "runs": asked_runs[f], "asks": asked_total[f]} for f in sorted(asked_runs)],
        "max_asks": len(set().union(*max_asks.values())) if max_asks else 0,
        "ended": endings,
    }


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _live_runs(conversation_of: Mapping[str, str]) -> tuple[dict[str, Mapping[str, Any]], set[str]]:
    """The runs still in their saved sessions (run id -> the run's JSON), and the conversations
    silenced now (a human has them)."""
    out: dict[str, Mapping[str, Any]] = {}
    silenced: set[str] = set()
    for chunk in _chunks(sorted(set(conversation_of.values())), 500):
        rows = Session.objects.filter(pk__in=chunk).values_list("id", "blob", "silenced_reason")
        for session_id, blob, reason in rows.iterator():
            if reason:
                silenced.add(session_id)
            for run in (blob or {}).get("runs") or () if isinstance(blob, Mapping) else ():
                if isinstance(run, Mapping) and run.get("id") in conversation_of:
                    out[run["id"]] = run
    return out, silenced


def _step_times(lines: list[Mapping[str, Any]], durations: dict[str, list[float]]) -> None:
    """Seconds from the first line on a step to the first line on the next step, per visit."""
    current, entered = None, None
    for line in lines:
        step, at = line.get("stepId"), try_parse_iso(line.get("at"))
        if not step or at is None or step == current:
            continue
        if current is not None and entered is not None:
            durations[current].append(max(0.0, (at - entered).total_seconds()))
        current, entered = step, at


def _ending(ended: Mapping[str, Any] | None, lines: list[Mapping[str, Any]], now: datetime,
            silenced: bool) -> str:
    if ended is not None:
        return _REASONS.get(str(ended.get("reason")), "abandoned")
    last = lines[-1] if lines else None
    if silenced or (last is not None and last.get("code") == "silenced"):
        return "silenced"
    at = try_parse_iso(last.get("at")) if last is not None else None
    if at is None or now - at >= ABANDONED_AFTER:
        return "abandoned"
    return "in_progress"


def report_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The steps as table rows for people: share of the started runs, time as words."""
    started = report["started"] or 0
    return [{
        **step,
        "share": f"{round(100 * step['reached'] / started)}%" if started else "—",
        "median": _duration_words(step["median_seconds"]),
    } for step in report["steps"]]


def _duration_words(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


ENDING_COLORS = {"completed": "#2e7d32", "silenced": "#6a5acd", "failed": "#c62828", "abandoned": "#9e9e9e",
                 "in_progress": "#1e88e5"}


def funnel_svg(report: Mapping[str, Any]) -> str:
    """A horizontal bar per step (runs that reached it), then how the runs ended, as SVG."""
    started = max(1, report["started"])
    bar_w, label_w, row_h = 420, 170, 26
    rows = [("started", report["started"], "#417690", "")]
    rows += [(s["id"], s["reached"], "#79aec8", f"max-asks {s['max_asks']}" if s["max_asks"] else "")
             for s in report["steps"]]
    height = 20 + row_h * (len(rows) + 2) + 20
    parts = []
    y: float
    for i, (label, value, color, note) in enumerate(rows):
        y = 10 + i * row_h
        width = bar_w * value / started
        parts.append(
            f'<g class="bar" data-step="{escape(label)}" data-value="{value}">'
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{width:.1f}" height="{row_h - 8}" fill="{color}"/>'
            f'<text x="{label_w + width + 6:.1f}" y="{y + 16}">{value}'
            + (f' <tspan fill="#c62828">({escape(note)})</tspan>' if note else "") + "</text></g>")
    y = 10 + (len(rows) + 0.5) * row_h
    x = float(label_w)
    parts.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">ended</text>')
    for ending in ENDINGS:
        value = report["ended"].get(ending, 0)
        if not value:
            continue
        width = bar_w * value / started
        parts.append(f'<g class="ending" data-ending="{ending}" data-value="{value}"><rect x="{x:.1f}" y="{y + 3}" '
                     f'width="{width:.1f}" height="{row_h - 8}" fill="{ENDING_COLORS[ending]}"><title>{ending}: '
                     f'{value}</title></rect></g>')
        x += width
    legend_y = y + row_h + 8
    lx = float(label_w)
    for ending in ENDINGS:
        label = f"{ending.replace('_', ' ')} {report['ended'].get(ending, 0)}"
        parts.append(f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" fill="{ENDING_COLORS[ending]}"/>'
                     f'<text x="{lx + 14}" y="{legend_y}" font-size="11">{escape(label)}</text>')
        lx += 14 + 7 * len(label) + 12
    width = max(label_w + bar_w + 120, int(lx) + 10)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="falai-funnel" width="{width}" height="{height + 10}" '
            f'viewBox="0 0 {width} {height + 10}" font-family="sans-serif" font-size="13" role="img" '
            f'aria-label="funnel">' + "".join(parts) + "</svg>")
