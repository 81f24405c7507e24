"""What the admin's Operations page shows, read from the database as plain data (`report`), and
its charts as SVG drawn on the server (`tokens_svg`, `latency_svg`).

Everything here is read at request time from the tables every process writes, like the metrics'
gauges: the outbox and wakes (the backlog), the dispatcher's heartbeat, the run log (turns in the
last hour and day), the daily totals (`models.DailyTotal`: model calls, latency and tokens by
model per day), and the transcript's failed sends. `FALAI["MODEL_PRICES"]` turns tokens into
money per day and per conversation.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from html import escape
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from falai_django import conf
from falai_django.observe import metrics
from falai_django.observe.heartbeat import DISPATCHER
from falai_django.observe.prices import parse_prices

DAYS = 14  # days of model figures on the page
HEARTBEAT_LATE_S = 10.0  # a live dispatcher beats every 2 s; one silent this long is news
WINDOWS = (("hour", timedelta(hours=1)), ("day", timedelta(days=1)))
TURN_STATUSES = ("done", "unchanged", "retry", "failed", "received")
FAILED_SENDS_SINCE = timedelta(days=7)


@dataclass
class ModelDay:
    """One model's figures for one day."""

    day: date
    provider: str
    model: str
    calls: int = 0
    errors: int = 0
    p50: float | None = None
    p95: float | None = None
    prompt: int = 0  # every input token, the cached ones among them
    cached: int = 0
    completion: int = 0
    cost: float | None = None  # None: no price for this model

    @property
    def tokens(self) -> int:
        return self.prompt + self.completion


@dataclass
class Day:
    """One day's totals over every model."""

    day: date
    calls: int = 0
    tokens: int = 0
    cost: float | None = None
    conversations: int = 0  # conversations with a model call that day

    @property
    def cost_per_conversation(self) -> float | None:
        if self.cost is None or not self.conversations:
            return None
        return self.cost / self.conversations


@dataclass
class Report:
    now: datetime
    outbox_pending: int
    oldest_unsent: dict[str, Any] | None  # {"conversation", "at", "age_s"}
    wakes_overdue: int
    oldest_overdue: dict[str, Any] | None
    heartbeat: dict[str, Any] | None  # {"at", "age_s", "host", "pid", "late"}
    turns: dict[str, dict[str, int]]  # window -> status -> count, with "total" and "failures"
    model_days: list[ModelDay]
    days: list[Day]
    models: list[str]
    failed_sends: list[dict[str, Any]]  # {"channel", "stage", "code", "example", "count", "last"}
    priced: bool
    unpriced_models: list[str] = field(default_factory=list)
    # A channel's delivery statuses kept until their message's send is recorded (host.statuses).
    statuses_waiting: int = 0
    oldest_status_s: float | None = None


def report(using: str | None = None, now: datetime | None = None, days: int = DAYS) -> Report:
    """The page's figures, read now."""
    from falai_django.models import DailyTotal, EarlyStatus, Heartbeat, History, TurnRecord, Wake

    alias = using or metrics.db_alias()
    now = now or timezone.now()

    pending = History.objects.using(alias).pending_sends()
    first = pending.order_by("at", "id").values("conversation_id", "at").first()
    oldest_unsent = None if first is None else {
        "conversation": first["conversation_id"], "at": first["at"],
        "age_s": max(0.0, (now - first["at"]).total_seconds())}

    overdue = Wake.objects.using(alias).overdue(now)
    first_wake = overdue.order_by("at", "id").values("conversation_id", "at", "key").first()
    oldest_overdue = None if first_wake is None else {
        "conversation": first_wake["conversation_id"], "at": first_wake["at"], "key": first_wake["key"],
        "age_s": max(0.0, (now - first_wake["at"]).total_seconds())}

    beat = Heartbeat.objects.using(alias).filter(process=DISPATCHER).values("at", "host", "pid").first()
    heartbeat = None
    if beat is not None:
        age = max(0.0, (now - beat["at"]).total_seconds())
        heartbeat = {**beat, "age_s": age, "late": age > HEARTBEAT_LATE_S}

    turns: dict[str, dict[str, int]] = {}
    for window, span in WINDOWS:
        counts = dict(TurnRecord.objects.using(alias).filter(received_at__gte=now - span)
                      .values_list("status").annotate(n=Count("id")).values_list("status", "n"))
        row = {status: int(counts.get(status, 0)) for status in TURN_STATUSES}
        row["total"] = sum(row.values())
        row["failures"] = row["failed"] + row["retry"]
        turns[window] = row

    today = timezone.localdate(now) if timezone.is_aware(now) else now.date()
    first_day = today - timedelta(days=days - 1)
    prices = model_prices()
    model_days = _model_days(DailyTotal.objects.using(alias).filter(day__gte=first_day, day__lte=today), prices)
    conversations = _conversations_by_day(TurnRecord.objects.using(alias), first_day, now)
    day_rows = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        mine = [m for m in model_days if m.day == day]
        costs = [m.cost for m in mine if m.cost is not None]
        day_rows.append(Day(day=day, calls=sum(m.calls for m in mine), tokens=sum(m.tokens for m in mine),
                            cost=sum(costs) if prices and costs else (0.0 if prices and not mine else None),
                            conversations=conversations.get(day, 0)))
    models = sorted({m.model or m.provider for m in model_days})
    unpriced = sorted({m.model for m in model_days if prices and m.cost is None})

    kept = EarlyStatus.objects.using(alias).order_by("id").values_list("received_at", flat=True).first()
    statuses_waiting = EarlyStatus.objects.using(alias).count() if kept else 0

    return Report(now=now, outbox_pending=pending.count() if first else 0, oldest_unsent=oldest_unsent,
                  wakes_overdue=overdue.count() if first_wake else 0, oldest_overdue=oldest_overdue, heartbeat=heartbeat,
                  turns=turns, model_days=model_days, days=day_rows, models=models,
                  failed_sends=failed_sends(alias, now), priced=bool(prices), unpriced_models=unpriced,
                  statuses_waiting=statuses_waiting,
                  oldest_status_s=max(0.0, (now - kept).total_seconds()) if kept else None)


# ---------------------------------------------------------------------------------------------
# Model figures by day
# ---------------------------------------------------------------------------------------------


def _model_days(rows: Any, prices: Mapping[str, Mapping[str, float]]) -> list[ModelDay]:
    found: dict[tuple[date, str, str], ModelDay] = {}
    buckets: dict[tuple[date, str, str], dict[float, float]] = defaultdict(dict)
    for day, name, labels, value in rows.values_list("day", "name", "labels", "value"):
        parsed = json.loads(labels) if labels else {}
        key = (day, str(parsed.get("provider", "")), str(parsed.get("model", "")))
        entry = found.setdefault(key, ModelDay(day=key[0], provider=key[1], model=key[2]))
        if name == metrics.DAY_CALLS:
            entry.calls += int(value)
            if parsed.get("result") != "ok":
                entry.errors += int(value)
        elif name == metrics.DAY_TOKENS:
            kind = parsed.get("type")
            if kind in ("prompt", "cached", "completion"):
                setattr(entry, kind, getattr(entry, kind) + int(value))
        elif name == f"{metrics.DAY_SECONDS}_bucket":
            le = parsed.get("le", "+Inf")
            bound = math.inf if le == "+Inf" else float(le)
            buckets[key][bound] = buckets[key].get(bound, 0.0) + value
    for key, entry in found.items():
        if buckets.get(key):
            entry.p50 = quantile(0.5, buckets[key])
            entry.p95 = quantile(0.95, buckets[key])
        entry.cost = cost_of(entry, prices)
    return sorted(found.values(), key=lambda m: (m.day, m.model, m.provider), reverse=False)


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The q-quantile of a histogram given as {upper bound: count in that bucket} (not cumulative),
    interpolated linearly inside its bucket, as Prometheus's histogram_quantile does."""
    total = sum(buckets.values())
    if total <= 0:
        return None
    rank = q * total
    running, lower = 0.0, 0.0
    for bound in sorted(buckets):
        count = buckets[bound]
        if running + count >= rank and count > 0:
            if math.isinf(bound):
                return lower  # beyond the last bound: the best known is that bound
            return lower + (bound - lower) * (rank - running) / count
        running += count
        lower = bound if not math.isinf(bound) else lower
    return lower


def _conversations_by_day(turns: Any, first_day: date, now: datetime) -> dict[date, int]:
    """Conversations with at least one model call, by the local day of their turns."""
    start = datetime.combine(first_day, datetime.min.time())
    if timezone.is_aware(now):
        start = timezone.make_aware(start)
    tz = timezone.get_current_timezone() if timezone.is_aware(now) else None
    rows = (turns.filter(received_at__gte=start, llm_calls__gt=0)
            .annotate(day=TruncDate("received_at", tzinfo=tz)).values("day")
            .annotate(n=Count("conversation_id", distinct=True)).values_list("day", "n"))
    return {day: int(n) for day, n in rows}


# ---------------------------------------------------------------------------------------------
# Money
# ---------------------------------------------------------------------------------------------


def model_prices() -> dict[str, dict[str, float]]:
    """`FALAI["MODEL_PRICES"]` as {model: {"input", "cached_input", "output"}} per million tokens
    (`observe.prices`; a malformed entry is left out, and `manage.py check` names it)."""
    return parse_prices(conf.get("MODEL_PRICES"))


def price_for(model: str, prices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The price of `model`: its own entry, else the longest name it starts with (a dated model
    such as "gemini-2.5-flash-001" takes "gemini-2.5-flash"'s)."""
    if model in prices:
        return prices[model]
    best = max((name for name in prices if name and model.startswith(name)), key=len, default=None)
    return prices[best] if best is not None else None


def cost_of(entry: ModelDay, prices: Mapping[str, Mapping[str, float]]) -> float | None:
    price = price_for(entry.model, prices) if prices else None
    if price is None:
        return None
    cached = min(entry.cached, entry.prompt)  # the input count includes the cached tokens
    return ((entry.prompt - cached) * price["input"] + cached * price["cached_input"]
            + entry.completion * price["output"]) / 1_000_000


# ---------------------------------------------------------------------------------------------
# Failed sends
# ---------------------------------------------------------------------------------------------

_CODE = re.compile(r"^\s*(\d{2,})\b\s*(.*)$", re.S)  # a channel's numeric code first ("131047 Re-engagement…")
_TYPE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Timeout)\w*):\s*(.*)$", re.S)  # "TimeoutError: …"


def error_code(text: str) -> tuple[str, str]:
    """(code, title) of a stored send error: the channel's numeric code, else the exception's
    name, else "" (and the text as the title)."""
    text = (text or "").strip()
    for pattern in (_CODE, _TYPE):
        match = pattern.match(text)
        if match:
            title = match.group(2).split(":", 1)[0].strip()
            return match.group(1), title[:120]
    return "", text.split(":", 1)[0][:120]


def failed_sends(alias: str, now: datetime, since: timedelta = FAILED_SENDS_SINCE) -> list[dict[str, Any]]:
    """Replies that failed in the last `since`, by channel, stage and code: refused when sent (the
    channel answered an error, for good or after every retry) or not delivered (the channel's
    later status). Newest first within equal counts."""
    from falai_django.models import History

    channel = metrics.configured_channel() or "custom"
    cutoff = now - since
    rows = History.objects.using(alias).filter(
        Q(send_status=History.SendStatus.FAILED) | Q(delivery_status=History.DeliveryStatus.FAILED),
        at__gte=cutoff).values_list("send_status", "send_error", "at")
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for send_status, error, at in rows.iterator():
        stage = "refused" if send_status == History.SendStatus.FAILED else "not delivered"
        code, title = error_code(error)
        group = groups.setdefault((stage, code or title), {"channel": channel, "stage": stage, "code": code,
                                                          "example": title, "count": 0, "last": at})
        group["count"] += 1
        if at > group["last"]:
            group["last"] = at
    return sorted(groups.values(), key=lambda g: (-g["count"], g["stage"], g["code"]))


# ---------------------------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------------------------

PALETTE = ("#417690", "#79aec8", "#e0a030", "#5b8c3a", "#b85c8e", "#8c6d31", "#6b6ecf", "#c62828")


def _colors(models: list[str]) -> dict[str, str]:
    return {model: PALETTE[i % len(PALETTE)] for i, model in enumerate(models)}


def _legend(models: list[str], colors: Mapping[str, str], x0: float, y: float) -> tuple[list[str], float]:
    parts, x = [], x0
    for model in models:
        parts.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{colors[model]}"/>'
                     f'<text x="{x + 14:.1f}" y="{y}" font-size="11">{escape(model)}</text>')
        x += 14 + 7 * len(model) + 14
    return parts, x


def _svg(width: float, height: float, label: str, parts: list[str], css_class: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{css_class}" width="{int(width)}" '
            f'height="{int(height)}" viewBox="0 0 {int(width)} {int(height)}" font-family="sans-serif" '
            f'font-size="12" role="img" aria-label="{escape(label)}">' + "".join(parts) + "</svg>")


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


def _short(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


# Both charts: a slot per day, a y axis from 0 to a round peak with three ticks, the days under
# the slots, the models' legend.
_LEFT, _TOP, _PLOT_H, _SLOT, _GAP = 60, 14, 160, 30, 12


def _day_chart(rep: Report, peak: float, tick_text: Any, marks: Any, label: str, css_class: str) -> str:
    """`marks(day, x, y_of)` draws one day's marks in its slot (`x` its left edge, `y_of(v)` the
    height of value v); `tick_text(v)` labels the axis."""
    bottom = _TOP + _PLOT_H
    width = _LEFT + len(rep.days) * (_SLOT + _GAP) + 20

    def y_of(value: float) -> float:
        return bottom - _PLOT_H * value / peak

    parts = [f'<line x1="{_LEFT}" y1="{bottom}" x2="{width - 10}" y2="{bottom}" stroke="#999"/>']
    for tick in (0.0, 0.5, 1.0):
        y = y_of(peak * tick)
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#666">{tick_text(peak * tick)}'
                     f'</text><line x1="{_LEFT}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#eee"/>')
    for i, day in enumerate(rep.days):
        x = _LEFT + i * (_SLOT + _GAP) + _GAP / 2
        parts += marks(day, x, y_of)
        parts.append(f'<text x="{x + _SLOT / 2:.1f}" y="{bottom + 14}" text-anchor="middle" '
                     f'font-size="10" fill="#666">{day.day:%d/%m}</text>')
    legend, right = _legend(rep.models, _colors(rep.models), _LEFT, bottom + 34)
    return _svg(max(width, right + 10), bottom + 44, label, parts + legend, css_class)


def tokens_svg(rep: Report) -> str:
    """Tokens per day, a bar per day stacked by model (input and output together)."""
    colors = _colors(rep.models)

    def marks(day: Day, x: float, y_of: Any) -> list[str]:
        parts, below = [], 0
        for entry in (m for m in rep.model_days if m.day == day.day and m.tokens):
            model = entry.model or entry.provider
            top, bottom = y_of(below + entry.tokens), y_of(below)
            below += entry.tokens
            parts.append(f'<rect class="tokens" data-day="{day.day.isoformat()}" data-model="{escape(model)}" '
                         f'data-value="{entry.tokens}" x="{x:.1f}" y="{top:.1f}" width="{_SLOT}" '
                         f'height="{bottom - top:.1f}" fill="{colors[model]}"><title>{day.day:%d %b} '
                         f'{escape(model)}: {entry.tokens} tokens ({entry.prompt} in, {entry.cached} cached, '
                         f'{entry.completion} out)</title></rect>')
        return parts

    peak = _nice_max(max((d.tokens for d in rep.days), default=0))
    return _day_chart(rep, peak, _short, marks, "tokens by model per day", "falai-tokens")


def latency_svg(rep: Report) -> str:
    """Model latency per day: p50 (dot) and p95 (the top of the line) for each model."""
    colors = _colors(rep.models)

    def marks(day: Day, x0: float, y_of: Any) -> list[str]:
        mine = [m for m in rep.model_days if m.day == day.day and m.p50 is not None]
        parts = []
        for j, entry in enumerate(mine):
            model = entry.model or entry.provider
            x = x0 + (j + 1) * _SLOT / (len(mine) + 1)
            y50, y95 = y_of(entry.p50 or 0), y_of(entry.p95 or 0)
            parts.append(f'<g class="latency" data-day="{day.day.isoformat()}" data-model="{escape(model)}" '
                         f'data-p50="{entry.p50:.3f}" data-p95="{entry.p95:.3f}">'
                         f'<line x1="{x:.1f}" y1="{y50:.1f}" x2="{x:.1f}" y2="{y95:.1f}" stroke="{colors[model]}" '
                         f'stroke-width="3"/><circle cx="{x:.1f}" cy="{y50:.1f}" r="4" fill="{colors[model]}"/>'
                         f'<title>{day.day:%d %b} {escape(model)}: p50 {entry.p50:.2f} s, p95 {entry.p95:.2f} s '
                         f'({entry.calls} calls)</title></g>')
        return parts

    peak = _nice_max(max((m.p95 or 0 for m in rep.model_days), default=0))
    return _day_chart(rep, peak, lambda v: f"{v:.3g} s", marks, "model latency p50 and p95 per day",
                      "falai-latency")
