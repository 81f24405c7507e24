"""A FlowSpec as an SVG picture, drawn on the server (no external service, no JavaScript).

Triggers sit on top, steps are boxes in order, the fall-through to the next step is a straight
arrow down, and every other `then`, `else` and branch target is a labelled arrow on the right.
A target that is another flow or `end` gets its own small box at the bottom.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.html import escape

BOX_W, BOX_H, GAP, LEFT, TOP = 300, 46, 34, 24, 20
TRIGGER_H = 34


def _target(next_: Any) -> tuple[str, str] | None:
    """("step", id) / ("end", "end") / ("flow", id) of a `then`/`else` value, or None."""
    if next_ is None:
        return None
    if isinstance(next_, str):
        return ("end", "end") if next_ == "end" else ("step", next_)
    if isinstance(next_, Mapping):
        if isinstance(next_.get("flow"), str):
            return ("flow", next_["flow"])
        if isinstance(next_.get("step"), str):
            return ("end", "end") if next_["step"] == "end" else ("step", next_["step"])
    return None


def _kind(step: Mapping[str, Any]) -> str:
    if step.get("kind"):
        return str(step["kind"])
    for key in ("say", "do", "wait", "if"):
        if key in step:
            return "waitEvent" if key == "wait" and isinstance(step["wait"], Mapping) else key
    return "collect" if step.get("collect") else "prompt"


def _summary(step: Mapping[str, Any]) -> str:
    kind = _kind(step)
    if kind == "collect":
        return "collect " + ", ".join(str(c) for c in step.get("collect") or ())
    if kind == "say":
        return str(step.get("say") or "")
    if kind == "do":
        return "do " + str(step.get("do"))
    if kind == "wait":
        return "wait " + str(step.get("wait"))
    if kind == "waitEvent":
        wait = step.get("wait") or {}
        return f"wait for {wait.get('event')}" + (f" (up to {wait['upTo']})" if wait.get("upTo") else "")
    if kind == "if":
        return "if " + ", ".join(sorted(step.get("if") or {})) if isinstance(step.get("if"), Mapping) else "if"
    return str(step.get("prompt") or "")


def _cut(text: str, n: int = 42) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _trigger_text(trigger: Any) -> str:
    if not isinstance(trigger, Mapping):
        return "?"
    for kind in ("message", "mention", "silence", "event", "after"):
        if kind in trigger:
            value = trigger[kind]
            if kind in ("message", "mention"):
                return f"{kind}: " + (", ".join(map(str, value)) if value else "anything")
            return f"{kind}: {value}"
    return "trigger"


def flow_svg(spec: Any) -> str:
    """The picture of `spec` (any JSON; what cannot be read is drawn as far as it goes)."""
    spec = spec if isinstance(spec, Mapping) else {}
    steps = [s for s in (spec.get("steps") or []) if isinstance(s, Mapping)] if isinstance(
        spec.get("steps"), list) else []
    triggers = spec.get("on") if isinstance(spec.get("on"), list) else []
    index = {str(s.get("id")): i for i, s in enumerate(steps)}
    steps_top = TOP + (TRIGGER_H + GAP if triggers else 0)
    y_of = lambda i: steps_top + i * (BOX_H + GAP)  # noqa: E731

    # The edges: fall-through (down), and the jumps (right side).
    jumps: list[tuple[int, tuple[str, str], str]] = []
    falls: list[int] = []
    for i, step in enumerate(steps):
        then = _target(step.get("then"))
        if then is None:
            falls.append(i)
        else:
            jumps.append((i, then, "then"))
        if "else" in step:
            if (target := _target(step.get("else"))) is not None:
                jumps.append((i, target, "else"))
        for n, branch in enumerate(step.get("branches") or []):
            if isinstance(branch, Mapping) and (target := _target(branch.get("then"))) is not None:
                jumps.append((i, target, f"branch {n + 1}"))
    outside = sorted({t for _, t, _ in jumps if t[0] != "step" or t[1] not in index} | (
        {("end", "end")} if falls and falls[-1] == len(steps) - 1 else set()))
    out_top = y_of(len(steps))
    out_x = {t: LEFT + k * 160 for k, t in enumerate(outside)}
    width = max(LEFT * 2 + BOX_W + 40 + 22 * len(jumps) + 120, LEFT * 2 + 160 * max(1, len(outside)),
                LEFT * 2 + 210 * max(1, len(triggers)))
    height = out_top + (BOX_H + TOP if outside else 0)

    parts: list[str] = []
    for k, trigger in enumerate(triggers):
        x = LEFT + k * 210
        parts.append(f'<g class="trigger"><rect x="{x}" y="{TOP}" width="200" height="{TRIGGER_H}" rx="17" '
                     f'fill="#fff7e0" stroke="#c9a227"/><text x="{x + 100}" y="{TOP + 21}" text-anchor="middle">'
                     f"{escape(_cut(_trigger_text(trigger), 30))}</text></g>")
    if triggers and steps:
        parts.append(f'<line class="edge" x1="{LEFT + BOX_W / 2}" y1="{TOP + TRIGGER_H}" x2="{LEFT + BOX_W / 2}" '
                     f'y2="{steps_top}" marker-end="url(#arrow)"/>')
    for i, step in enumerate(steps):
        y = y_of(i)
        parts.append(
            f'<g class="step" data-step="{escape(str(step.get("id")))}"><rect x="{LEFT}" y="{y}" width="{BOX_W}" '
            f'height="{BOX_H}" rx="6" fill="#eef4fb" stroke="#417690"/>'
            f'<text x="{LEFT + 10}" y="{y + 18}" font-weight="bold">{escape(_cut(str(step.get("id")), 24))}'
            f'<tspan font-weight="normal" fill="#666"> · {escape(_kind(step))}</tspan></text>'
            f'<text x="{LEFT + 10}" y="{y + 36}" fill="#333">{escape(_cut(_summary(step)))}</text></g>')
    for i in falls:
        y1 = y_of(i) + BOX_H
        if i + 1 < len(steps):
            parts.append(f'<line class="edge" x1="{LEFT + BOX_W / 2}" y1="{y1}" x2="{LEFT + BOX_W / 2}" '
                         f'y2="{y_of(i + 1)}" marker-end="url(#arrow)"/>')
        else:
            x = out_x[("end", "end")] + 70
            parts.append(f'<path class="edge" d="M{LEFT + BOX_W / 2},{y1} L{x},{out_top}" fill="none" '
                         f'marker-end="url(#arrow)"/>')
    for lane, (i, target, label) in enumerate(jumps):
        x0, y0 = LEFT + BOX_W, y_of(i) + BOX_H / 2
        lane_x = LEFT + BOX_W + 30 + lane * 22
        if target[0] == "step" and target[1] in index:
            y1 = y_of(index[target[1]]) + BOX_H / 2 + 6
            d = f"M{x0},{y0} L{lane_x},{y0} L{lane_x},{y1} L{x0 + 2},{y1}"
        else:
            tx = out_x[target] + 70
            d = f"M{x0},{y0} L{lane_x},{y0} L{lane_x},{out_top - 12} L{tx},{out_top - 12} L{tx},{out_top}"
        color = "#b03a2e" if label == "else" else "#417690"
        parts.append(f'<path class="edge jump" data-label="{escape(label)}" d="{d}" fill="none" stroke="{color}" '
                     f'marker-end="url(#arrow)"/><text x="{lane_x + 3}" y="{y0 - 4}" font-size="11" '
                     f'fill="{color}">{escape(label)}</text>')
    for target in outside:
        x = out_x[target]
        text = "end" if target[0] == "end" else (f"flow {target[1]}" if target[0] == "flow" else
                                                  f"missing step {target[1]}")
        fill = "#f0f0f0" if target[0] == "end" else ("#eaf7ea" if target[0] == "flow" else "#fde8e8")
        parts.append(f'<g class="target"><rect x="{x}" y="{out_top}" width="140" height="{BOX_H - 10}" rx="18" '
                     f'fill="{fill}" stroke="#888"/><text x="{x + 70}" y="{out_top + 22}" text-anchor="middle">'
                     f"{escape(_cut(text, 20))}</text></g>")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="falai-flowchart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" '
        f'aria-label="{escape(str(spec.get("id") or "flow"))}">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>'
        '<style>.edge{stroke:#555;stroke-width:1.4}</style>' + "".join(parts) + "</svg>"
    )
