"""What operators read: the metrics every process adds to, and the dispatcher's heartbeat.

- `MetricTotal` — one row per counter series (`name`, `labels`), summed across processes: each
  web server, django-q2 worker and dispatcher adds what it counted since its last flush
  (`observe.metrics`), so `GET <app>/metrics` on any web server shows every process's counts with
  nothing shared but the database the conversations live in.
- `DailyTotal` — the same, by day, for the admin's Operations page: model calls, latency and
  tokens by model per day (a Prometheus counter has no calendar; a team's bill does).
- `Heartbeat` — when a long-running process (the dispatcher) last said it was alive.
- `Operations` — no table: the admin's "Operations" page hangs on it (`admin.operations`).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class MetricTotal(models.Model):
    # `labels` is the series' labels as compact JSON with sorted keys ("" for none), so one
    # series is always one row and an upsert can add to it.
    name = models.CharField(_("name"), max_length=200)
    labels = models.CharField(_("labels"), max_length=1000, blank=True, default="")
    value = models.FloatField(_("value"), default=0.0)

    class Meta:
        db_table = "falai_metric"
        verbose_name = _("metric total")
        verbose_name_plural = _("metric totals")
        constraints = [models.UniqueConstraint(fields=["name", "labels"], name="falai_metric_series")]

    def __str__(self) -> str:
        return f"{self.name}{self.labels} {self.value}"


class DailyTotal(models.Model):
    day = models.DateField(_("day"))  # the project's local day (TIME_ZONE) when it was counted
    name = models.CharField(_("name"), max_length=200)
    labels = models.CharField(_("labels"), max_length=1000, blank=True, default="")
    value = models.FloatField(_("value"), default=0.0)

    class Meta:
        db_table = "falai_metric_day"
        verbose_name = _("daily total")
        verbose_name_plural = _("daily totals")
        constraints = [models.UniqueConstraint(fields=["day", "name", "labels"], name="falai_metric_day_series")]

    def __str__(self) -> str:
        return f"{self.day} {self.name}{self.labels} {self.value}"


class Operations(MetricTotal):
    """The admin index's "Operations" entry (a proxy: no table, no rows of its own)."""

    class Meta:
        proxy = True
        verbose_name = _("Operations")
        verbose_name_plural = _("Operations")
        default_permissions = ()


class Heartbeat(models.Model):
    process = models.CharField(_("process"), max_length=64, primary_key=True)
    at = models.DateTimeField(_("last beat"))
    host = models.CharField(_("host"), max_length=255, blank=True, default="")
    pid = models.IntegerField(_("process id"), null=True, blank=True)

    class Meta:
        db_table = "falai_heartbeat"
        verbose_name = _("heartbeat")
        verbose_name_plural = _("heartbeats")

    def __str__(self) -> str:
        return f"{self.process} {self.at:%Y-%m-%d %H:%M:%S}"
