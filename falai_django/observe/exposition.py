"""`GET <app>/metrics`'s text: the summed counters, and gauges read from the conversations' tables.

Counters and histograms come from `models.MetricTotal` (every process's counts, `metrics`); the
gauges are asked of the database at scrape time, so they are true whichever process did the work
and whether or not any process is still alive to count it:

- `falai_outbox_pending`, `falai_outbox_oldest_pending_seconds`: replies written and not sent yet;
- `falai_wakes_overdue`, `falai_wakes_oldest_overdue_seconds`: wakes past their time, not fired;
- `falai_dispatcher_heartbeat_age_seconds`: since the dispatcher last beat (+Inf before any beat);
- `falai_conversations{state}`: conversations asking, waiting, silenced, and with a human.

Every named metric is in every scrape: the counters' series a fresh install has not counted yet
(each kind and status, the running agent's provider and model, the sender's channel) are 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import exposition as prometheus_exposition
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from falai_django.observe import metrics
from falai_django.observe.heartbeat import DISPATCHER

CONVERSATION_STATES = ("asking", "waiting", "silenced", "human")
SEND_RESULTS = ("sent", "retry", "failed")
TOKEN_TYPES = ("prompt", "cached", "completion")

GAUGES: dict[str, str] = {
    "falai_outbox_pending": "Replies written and not sent yet.",
    "falai_outbox_oldest_pending_seconds": "Age of the oldest reply not sent yet (0 when none).",
    "falai_wakes_overdue": "Wakes past their due time that have not fired.",
    "falai_wakes_oldest_overdue_seconds": "How far past its due time the oldest unfired wake is (0 when none).",
    "falai_dispatcher_heartbeat_age_seconds": "Seconds since the dispatcher last beat (+Inf if it never has).",
    "falai_conversations": "Conversations by state: asking, waiting, silenced, human (with a person).",
}


# The classic text format every Prometheus reads (the newer "1.0.0" only matters for UTF-8 names).
PLAIN_TEXT = getattr(prometheus_exposition, "CONTENT_TYPE_PLAIN_0_0_4", prometheus_exposition.CONTENT_TYPE_LATEST)


def render(using: str | None = None, accept: str | None = None) -> tuple[bytes, str]:
    """The exposition and its content type: OpenMetrics when `accept` (the request's Accept
    header) asks for it, as Prometheus does, else the classic text format. This process's own
    counts are written first."""
    alias = using or metrics.db_alias()
    metrics.flush(alias)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(_stored(alias), _gauges(alias), _seeds()))
    if accept and "application/openmetrics-text" in accept:
        encoder, content_type = prometheus_exposition.choose_encoder(accept)
        return encoder(registry), content_type
    return prometheus_exposition.generate_latest(registry), PLAIN_TEXT


def _stored(alias: str) -> list[tuple[str, str, float]]:
    from falai_django.models import MetricTotal

    return list(MetricTotal.objects.using(alias).values_list("name", "labels", "value"))


def _gauges(alias: str) -> dict[str, Any]:
    from django.db.models import Count, Min, Q
    from django.utils import timezone

    from falai_django import conf
    from falai_django.models import Heartbeat, History, Wake

    now = timezone.now()
    outbox = History.objects.using(alias).pending_sends().order_by().aggregate(n=Count("id"), oldest=Min("at"))
    wakes = Wake.objects.using(alias).overdue(now).aggregate(n=Count("id"), oldest=Min("at"))
    beat = Heartbeat.objects.using(alias).filter(process=DISPATCHER).values_list("at", flat=True).first()
    sessions = conf.get_store().get_model_class().objects.using(alias)
    states = sessions.aggregate(
        asking=Count("pk", filter=Q(asking_flow__isnull=False)),
        waiting=Count("pk", filter=Q(waiting_until__isnull=False)),
        silenced=Count("pk", filter=Q(silenced_reason__isnull=False)),
        human=Count("pk", filter=Q(human_owner__isnull=False)),
    )

    def age(at: Any) -> float:
        return max(0.0, (now - at).total_seconds()) if at is not None else 0.0

    return {
        "falai_outbox_pending": outbox["n"],
        "falai_outbox_oldest_pending_seconds": age(outbox["oldest"]),
        "falai_wakes_overdue": wakes["n"],
        "falai_wakes_oldest_overdue_seconds": age(wakes["oldest"]),
        "falai_dispatcher_heartbeat_age_seconds": age(beat) if beat is not None else math.inf,
        "falai_conversations": {state: states[state] for state in CONVERSATION_STATES},
    }


def _seeds() -> dict[str, list[dict[str, str]]]:
    """The series shown as 0 before anything was counted in them."""
    from falai_django import conf
    from falai_django.models import TurnRecord

    statuses = [s for s in TurnRecord.Status.values if s != TurnRecord.Status.RECEIVED]
    seeds: dict[str, list[dict[str, str]]] = {
        "falai_turns_total": [{"kind": k, "status": s} for k in TurnRecord.Kind.values for s in statuses],
        "falai_turn_replays_total": [{}],
        "falai_turn_duration_seconds": [{}],
        "falai_wake_lateness_seconds": [{}],
        "falai_replay_runs_total": [{"result": "done"}, {"result": "failed"}],
        "falai_erasures_total": [{"result": "erased"}, {"result": "busy"}],
        "falai_purged_rows_total": [{"kind": k} for k in ("run_log", "transcript", "wakes", "desk")],
    }
    channel = metrics.configured_channel()
    if channel:
        seeds["falai_sends_total"] = [{"channel": channel, "result": r} for r in SEND_RESULTS]
    try:
        provider = getattr(conf.get_agent(), "provider", None)
    except Exception:  # noqa: BLE001 - likewise an agent that does not build
        provider = None
    if provider is not None:
        who = {"provider": str(getattr(provider, "name", None) or type(provider).__name__),
               "model": str(getattr(provider, "model", None) or "")}
        seeds["falai_llm_calls_total"] = [{**who, "result": "ok"}]
        seeds["falai_llm_call_duration_seconds"] = [who]
        seeds["falai_llm_tokens_total"] = [{**who, "type": t} for t in TOKEN_TYPES]
    return seeds


class _Snapshot:
    """A prometheus_client collector over one scrape's rows."""

    def __init__(self, stored: Iterable[tuple[str, str, float]], gauges: dict[str, Any],
                 seeds: dict[str, list[dict[str, str]]]) -> None:
        self.rows: dict[str, dict[str, float]] = {}
        for name, labels, value in stored:
            self.rows.setdefault(name, {})[labels] = value
        self.gauges = gauges
        self.seeds = seeds

    def collect(self) -> Iterator[Metric]:
        for name, (help_text, label_names) in metrics.COUNTERS.items():
            family = CounterMetricFamily(name, help_text, labels=label_names)
            for labels, value in self._series(name, name, label_names):
                family.add_metric(labels, value)
            yield family
        for name, (help_text, label_names, bounds) in metrics.HISTOGRAMS.items():
            histogram = HistogramMetricFamily(name, help_text, labels=label_names)
            for labels, total in self._series(name, f"{name}_sum", label_names):
                buckets, running = [], 0.0
                for bound in (*bounds, math.inf):
                    le = floatToGoString(bound)
                    bucket_labels = dict(zip(label_names, labels, strict=True), le=le)
                    running += self.rows.get(f"{name}_bucket", {}).get(metrics.series_key(bucket_labels), 0.0)
                    buckets.append((le, running))
                histogram.add_metric(labels, buckets, sum_value=total)
            yield histogram
        for name, help_text in GAUGES.items():
            value = self.gauges[name]
            if isinstance(value, dict):
                gauge = GaugeMetricFamily(name, help_text, labels=["state"])
                for state, count in value.items():
                    gauge.add_metric([state], count)
            else:
                gauge = GaugeMetricFamily(name, help_text, value=value)
            yield gauge

    def _series(self, name: str, stored_as: str, label_names: tuple[str, ...]) -> list[tuple[list[str], float]]:
        """A family's series: what was counted, and its seeds at 0, in a stable order."""
        found: dict[tuple[str, ...], float] = {}
        for seed in self.seeds.get(name, []):
            found[tuple(seed.get(label, "") for label in label_names)] = 0.0
        for labels, value in self.rows.get(stored_as, {}).items():
            parsed = json.loads(labels) if labels else {}
            found[tuple(str(parsed.get(label, "")) for label in label_names)] = value
        return [(list(labels), value) for labels, value in sorted(found.items())]
