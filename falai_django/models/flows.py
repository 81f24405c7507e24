"""Flows stored as data (migration 0006_flows): `Flow`, a FlowSpec the running agent adds to the
code agent's flows, and `FlowVersion`, every saved version of it.

The model imports no domain and reads no setting. Checking a spec (its nesting bound, then
against the agent) and resetting the running agent after a save belong to the flows domain
(`flows.saving`): `Flow.clean` sends `checking_spec`, whose receiver there raises the
`ValidationError`, and the domain listens to `post_save` and `post_delete` for the reset.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.dispatch import Signal
from django.utils.translation import gettext_lazy as _

# Sent by `Flow.clean` (and so by every `full_clean` and every `save`) with the flow as
# `instance`. A receiver checks the spec and raises `ValidationError` to refuse it; the app's
# `ready()` connects the flows domain's (`flows.saving.check`).
checking_spec = Signal()


class Flow(models.Model):
    """A flow stored as data: a FlowSpec (`spec`) the running agent adds to the code agent's
    flows when `enabled` (replacing a code flow with the same id). Every save is checked against
    the agent's registries (`clean` sends `checking_spec`, answered by `flows.saving`), bumps
    `version` and keeps a `FlowVersion`."""

    id = models.SlugField(_("id"), max_length=255, primary_key=True,
                          help_text=_("The flow's id: sessions find their flow by it. The spec's id must match."))
    name = models.CharField(_("name"), max_length=255, blank=True, default="")
    enabled = models.BooleanField(_("enabled"), default=False,
                                  help_text=_("Run this flow. A disabled flow is a draft."))
    position = models.IntegerField(_("position"), default=0,
                                   help_text=_("Order among the added flows (lower first); a flow that replaces a "
                                               "code flow takes that flow's place."))
    spec = models.JSONField(_("spec"), help_text=_("The FlowSpec, as JSON."))
    version = models.IntegerField(_("version"), default=0, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("changed by"), null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+", editable=False)
    # Not a column: the spec check's warnings, set by flows.saving when the flow is cleaned (unset
    # before that; only the annotation, no class attribute).
    spec_warnings: list[str]

    class Meta:
        db_table = "falai_flow"
        ordering = ["position", "id"]
        verbose_name = _("flow")
        verbose_name_plural = _("flows")

    def __str__(self) -> str:
        return self.name or self.id

    def spec_name(self) -> str | None:
        """The spec's own `name` (cut to the column's length), or None when it has none."""
        name = self.spec.get("name") if isinstance(self.spec, dict) else None
        return name[:255] if isinstance(name, str) else None

    def clean(self) -> None:
        """Check the spec: its nesting, then against the agent's registries and the other flows
        (`checking_spec`'s receiver). Raises `ValidationError` on the spec field, naming the flow
        and the step; the warnings are kept on `self.spec_warnings`."""
        from django.core.exceptions import ImproperlyConfigured

        super().clean()
        if not self.name:  # a flow saved without a name is called what its spec says
            self.name = self.spec_name() or ""
        if not checking_spec.has_listeners(Flow):  # never let a spec through unchecked
            raise ImproperlyConfigured("Nothing checks a Flow's spec: add \"falai_django\" to INSTALLED_APPS "
                                       "(its ready() connects falai_django.flows.saving).")
        checking_spec.send(sender=Flow, instance=self)

    def save(self, *args: Any, changed_by: Any = None, note: str = "", **kwargs: Any) -> None:
        """Check the spec (a bad one raises `ValidationError` and nothing is saved), bump the
        version and keep it as a `FlowVersion` by `changed_by`, in one transaction."""
        from django.db import transaction

        self.clean()
        before = self.version
        try:
            with transaction.atomic(using=kwargs.get("using")):
                current = Flow.objects.select_for_update().filter(pk=self.pk).values_list("version", flat=True).first()
                self.version = (current or 0) + 1
                if changed_by is not None:
                    self.updated_by = changed_by
                super().save(*args, **kwargs)
                FlowVersion.objects.create(flow=self, version=self.version, name=self.name, enabled=self.enabled,
                                           position=self.position, spec=self.spec, changed_by=changed_by, note=note)
        except Exception:
            self.version = before  # nothing was saved: the object keeps the stored version
            raise

    def revert_to(self, version: int, changed_by: Any = None) -> FlowVersion:
        """Make `version`'s name and spec current again, as a new version (enabled and position
        stay as they are). Raises `FlowVersion.DoesNotExist`, or `ValidationError` when that spec
        no longer validates against today's agent."""
        old = self.versions.get(version=version)
        self.name, self.spec = old.name, old.spec
        self.save(changed_by=changed_by, note=f"reverted to version {version}")
        return self.versions.get(version=self.version)


class FlowVersion(models.Model):
    """Every saved version of a `Flow`: what it was, who saved it and when."""

    flow = models.ForeignKey(Flow, verbose_name=_("flow"), on_delete=models.CASCADE, related_name="versions")
    version = models.IntegerField(_("version"))
    name = models.CharField(_("name"), max_length=255, blank=True, default="")
    enabled = models.BooleanField(_("enabled"), default=False)
    position = models.IntegerField(_("position"), default=0)
    spec = models.JSONField(_("spec"))
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("changed by"), null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    changed_at = models.DateTimeField(_("changed at"), auto_now_add=True)
    note = models.CharField(_("note"), max_length=255, blank=True, default="")

    class Meta:
        db_table = "falai_flow_version"
        ordering = ["flow", "-version"]
        verbose_name = _("flow version")
        verbose_name_plural = _("flow versions")
        constraints = [models.UniqueConstraint(fields=["flow", "version"], name="falai_flow_version_unique")]

    def __str__(self) -> str:
        return f"{self.flow_id} v{self.version}"


class ReplayRun(models.Model):
    """One "Replay recent conversations against this version" asked for in the admin: which
    conversations, against which stored flow version, and how far the worker got. Each
    conversation's report is a `ReplayResult`. A replay writes nothing else (`falai_django.replay`)."""

    class State(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")

    class Scope(models.TextChoices):
        FLOW = "flow", _("conversations that ran this flow")
        ALL = "all", _("any recent conversation")

    flow = models.ForeignKey(Flow, verbose_name=_("flow"), on_delete=models.CASCADE, related_name="replays")
    version = models.IntegerField(_("version"))
    scope = models.CharField(_("conversations"), max_length=8, choices=Scope.choices, default=Scope.FLOW)
    limit = models.PositiveIntegerField(_("at most"), default=50)
    state = models.CharField(_("state"), max_length=8, choices=State.choices, default=State.QUEUED)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("requested by"), null=True,
                                     blank=True, on_delete=models.SET_NULL, related_name="+")
    requested_at = models.DateTimeField(_("requested at"), auto_now_add=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    progress_at = models.DateTimeField(_("last progress at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    total = models.IntegerField(_("conversations"), default=0)
    done = models.IntegerField(_("replayed"), default=0)
    same = models.IntegerField(_("same"), default=0)
    different = models.IntegerField(_("different"), default=0)
    needs_model = models.IntegerField(_("need the model"), default=0)
    errors = models.IntegerField(_("could not replay"), default=0)
    error = models.TextField(_("error"), blank=True, default="")

    class Meta:
        db_table = "falai_replay_run"
        ordering = ["-id"]
        verbose_name = _("replay")
        verbose_name_plural = _("replays")

    def __str__(self) -> str:
        return f"{self.flow_id} v{self.version} #{self.pk}"

    @property
    def finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)


class ReplayResult(models.Model):
    """One conversation of a `ReplayRun`: its status and its report (`ReplayReport.to_json()`,
    each turn with the input it replayed)."""

    class Status(models.TextChoices):
        SAME = "same", _("same")
        DIFFERENT = "different", _("different")
        NEEDS_MODEL = "needs_model", _("needs model")
        ERROR = "error", _("could not replay")

    run = models.ForeignKey(ReplayRun, verbose_name=_("replay"), on_delete=models.CASCADE, related_name="results")
    position = models.IntegerField(_("position"))
    conversation_id = models.CharField(_("conversation"), max_length=255)
    status = models.CharField(_("status"), max_length=12, choices=Status.choices)
    turns = models.IntegerField(_("turns"), default=0)
    first_difference = models.IntegerField(_("first difference"), null=True, blank=True)
    error = models.TextField(_("error"), blank=True, default="")
    report = models.JSONField(_("report"), default=dict, blank=True)

    class Meta:
        db_table = "falai_replay_result"
        ordering = ["run", "position"]
        verbose_name = _("replayed conversation")
        verbose_name_plural = _("replayed conversations")
        constraints = [models.UniqueConstraint(fields=["run", "position"], name="falai_replay_result_position")]
        indexes = [models.Index(fields=["conversation_id"], name="falai_replay_result_conv")]
