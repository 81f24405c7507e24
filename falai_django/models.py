"""The host's tables.

- `Session` — one row per conversation (table `agent_sessions`, the upstream PostgresStore shape
  `id, version, blob, created_at, updated_at`) plus columns derived from the blob on every save
  for the admin to filter on. The blob *is* the engine session (`falai_django.Session`, a
  pydantic model: import one of the two under another name where both are needed).
  `Conversation` is a proxy of it: what the admin shows people (and the name its URLs and
  permissions, `falai_django.change_conversation`, keep).
- `History` — one row per transcript item. Outbound items are also the outbox: they carry
  the send status, attempts and the emission key (unique per conversation). `OutboxItem` is a
  proxy over the outbound rows.
- `Wake` — durable wakes (`conversation, key` unique), fired by the dispatcher via django-q2.
- `TurnRecord` — one row per input: the durable inbox (written before the turn) and the run
  log (mirrors `started`, `ended`, `outcomes`, `skipped`, `llm_calls`, `usage` after it).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class Session(models.Model):
    id = models.CharField(_("session id"), max_length=255, primary_key=True)
    version = models.IntegerField(_("version"))
    blob = models.JSONField(_("session blob"))
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    updated_at = models.DateTimeField(_("updated at"), db_default=Now())

    # Derived from the blob on every save (never written by hand).
    # Indexed only where the admin filters or sorts (Meta.indexes): every index is written on each
    # turn's save, so the list is kept short and the rare values (handoff) are partial indexes.
    asking_flow = models.CharField(_("asking flow"), max_length=255, null=True, blank=True)
    asking_step = models.CharField(_("asking step"), max_length=255, null=True, blank=True)
    waiting_until = models.DateTimeField(_("waiting until"), null=True, blank=True)
    silenced_reason = models.CharField(_("silenced reason"), max_length=255, null=True, blank=True)
    human_owner = models.CharField(_("human owner"), max_length=255, null=True, blank=True)
    last_user_at = models.DateTimeField(_("last user message at"), null=True, blank=True)
    last_assistant_at = models.DateTimeField(_("last assistant message at"), null=True, blank=True)
    run_count = models.IntegerField(_("live runs"), null=True, blank=True)

    # Per-conversation send lease: only one worker sends a conversation's messages at a time.
    send_lease_until = models.DateTimeField(_("send lease until"), null=True, blank=True)

    class Meta:
        db_table = "agent_sessions"
        verbose_name = _("session")
        verbose_name_plural = _("sessions")
        indexes = [
            models.Index(fields=["-last_user_at"], name="falai_sess_last_user"),
            models.Index(fields=["asking_flow"], name="falai_sess_asking",
                         condition=models.Q(asking_flow__isnull=False)),
            models.Index(fields=["silenced_reason"], name="falai_sess_silenced",
                         condition=models.Q(silenced_reason__isnull=False)),
            models.Index(fields=["human_owner"], name="falai_sess_owner", condition=models.Q(human_owner__isnull=False)),
        ]

    def __str__(self) -> str:
        return self.id


class Conversation(Session):
    """The session row as the admin shows it to people (same table; a proxy)."""

    class Meta:
        proxy = True
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        permissions = [
            ("handoff_conversation", _("Can hand a conversation over to a human and back")),
            ("reply_conversation", _("Can reply to a conversation as a human")),
        ]


class HistoryQuerySet(models.QuerySet):
    def transcript(self, session_id: str) -> HistoryQuerySet:
        """What the engine sees as `history`: every item but sends that failed for good."""
        return self.filter(conversation_id=session_id).exclude(send_status=History.SendStatus.FAILED)

    def pending_sends(self, session_id: str | None = None) -> HistoryQuerySet:
        """Outbound rows not sent yet (the outbox), oldest first."""
        rows = self.filter(send_status__in=[History.SendStatus.PENDING, History.SendStatus.SENDING])
        if session_id is not None:
            rows = rows.filter(conversation_id=session_id)
        return rows.order_by("id")


class History(models.Model):
    class Role(models.TextChoices):
        USER = "user", _("user")
        ASSISTANT = "assistant", _("assistant")
        SYSTEM = "system", _("system")

    class SendStatus(models.TextChoices):
        PENDING = "pending", _("pending")
        SENDING = "sending", _("sending")
        SENT = "sent", _("sent")
        FAILED = "failed", _("failed")

    class DeliveryStatus(models.TextChoices):
        SENT = "sent", _("sent to the phone")
        DELIVERED = "delivered", _("delivered")
        READ = "read", _("read")
        FAILED = "failed", _("not delivered")

    conversation = models.ForeignKey(  # indexed by (conversation, id) below
        Session, on_delete=models.CASCADE, related_name="history", verbose_name=_("conversation"), db_index=False
    )
    role = models.CharField(_("role"), max_length=16, choices=Role.choices)
    content = models.TextField(_("content"), blank=True)
    message_key = models.CharField(_("message key"), max_length=1024, null=True, blank=True)
    at = models.DateTimeField(_("time"))
    turn = models.ForeignKey(
        "TurnRecord", on_delete=models.SET_NULL, null=True, blank=True, related_name="items", verbose_name=_("turn")
    )

    # Outbound only (the outbox).
    kind = models.CharField(_("kind"), max_length=16, null=True, blank=True)  # 'ai' | 'verbatim'
    media = models.JSONField(_("media"), null=True, blank=True)
    run_id = models.CharField(_("run id"), max_length=1024, null=True, blank=True)
    step_id = models.CharField(_("step id"), max_length=255, null=True, blank=True)
    after_ms = models.IntegerField(_("delay (ms)"), default=0)
    emission_key = models.CharField(_("emission key"), max_length=1536, null=True, blank=True)
    idempotency_key = models.CharField(_("idempotency key"), max_length=64, null=True, blank=True)
    send_status = models.CharField(
        _("send status"), max_length=16, choices=SendStatus.choices, null=True, blank=True
    )
    send_attempts = models.IntegerField(_("send attempts"), default=0)
    next_attempt_at = models.DateTimeField(_("next attempt at"), null=True, blank=True)
    queued_at = models.DateTimeField(_("queued at"), null=True, blank=True)
    sent_at = models.DateTimeField(_("sent at"), null=True, blank=True)
    send_error = models.TextField(_("last send error"), blank=True, default="")
    channel_message_id = models.CharField(_("channel message id"), max_length=255, null=True, blank=True)
    # What the channel reported after the send (WhatsApp statuses); never moves backwards.
    delivery_status = models.CharField(
        _("delivery status"), max_length=16, choices=DeliveryStatus.choices, null=True, blank=True
    )
    delivery_at = models.DateTimeField(_("delivery status at"), null=True, blank=True)

    objects = HistoryQuerySet.as_manager()

    class Meta:
        db_table = "falai_history"
        ordering = ["id"]
        verbose_name = _("history item")
        verbose_name_plural = _("history")
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "emission_key"],
                condition=models.Q(emission_key__isnull=False),
                name="falai_history_unique_emission",
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "id"], name="falai_hist_conv_id"),
            # the outbox: only the rows still to send are in it
            models.Index(fields=["conversation", "id"], name="falai_hist_unsent",
                         condition=models.Q(send_status__in=["pending", "sending"])),
            # a channel's delivery status finds its row by the channel's message id
            models.Index(fields=["channel_message_id"], name="falai_hist_channel_id",
                         condition=models.Q(channel_message_id__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class OutboxItem(History):
    """The outbound history rows seen as an outbox (a proxy: same table)."""

    class Meta:
        proxy = True
        verbose_name = _("outbox message")
        verbose_name_plural = _("outbox")


class WakeQuerySet(models.QuerySet):
    def due(self, now) -> WakeQuerySet:
        """Pending wakes whose time has come, oldest first."""
        return self.filter(state=Wake.State.PENDING, at__lte=now).order_by("at")

    def open(self) -> WakeQuerySet:
        return self.exclude(state=Wake.State.DONE)

    def mark_fired(self, session_id: str, key: str, at) -> int:
        """The wake ran (honoured or dropped as stale): it is done."""
        return self.filter(conversation_id=session_id, key=key).update(state=Wake.State.DONE, fired_at=at)

    def upsert(self, session_id: str, entries) -> None:
        """Schedule entries (`key`, `at`) as pending wakes; an existing key moves to the new time."""
        self.bulk_create(
            [Wake(conversation_id=session_id, key=entry.key, at=entry.at) for entry in entries],
            update_conflicts=True,
            unique_fields=["conversation", "key"],
            update_fields=["at", "state", "claimed_at"],
        )


class Wake(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", _("pending")  # waiting for its time
        QUEUED = "queued", _("queued")  # handed to django-q2, not fired yet
        DONE = "done", _("done")  # fired (honoured or dropped as stale)

    conversation = models.ForeignKey(  # indexed by the unique (conversation, key)
        Session, on_delete=models.CASCADE, related_name="wakes", verbose_name=_("conversation"), db_index=False
    )
    key = models.CharField(_("key"), max_length=1024)
    at = models.DateTimeField(_("due at"))
    state = models.CharField(_("state"), max_length=16, choices=State.choices, default=State.PENDING)
    claimed_at = models.DateTimeField(_("claimed at"), null=True, blank=True)
    attempts = models.IntegerField(_("attempts"), default=0)
    fired_at = models.DateTimeField(_("fired at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), db_default=Now())

    objects = WakeQuerySet.as_manager()

    class Meta:
        db_table = "falai_wake"
        verbose_name = _("wake")
        verbose_name_plural = _("wakes")
        constraints = [models.UniqueConstraint(fields=["conversation", "key"], name="falai_wake_unique_key")]
        indexes = [models.Index(fields=["state", "at"], name="falai_wake_due")]

    def __str__(self) -> str:
        return self.key


class TurnRecord(models.Model):
    """One input: its durable inbox row before the turn, its run log after."""

    class Kind(models.TextChoices):
        MESSAGE = "message", _("message")
        WAKE = "wake", _("wake")
        EVENT = "event", _("event")
        START = "start", _("start")

    class Status(models.TextChoices):
        RECEIVED = "received", _("received")  # persisted, turn not finished
        DONE = "done", _("done")  # saved (changed)
        UNCHANGED = "unchanged", _("unchanged")  # the turn changed nothing (duplicate, stale, no-op)
        RETRY = "retry", _("waiting to retry")  # provider failed; retried later
        FAILED = "failed", _("failed")  # gave up; see error

    conversation_id = models.CharField(_("session id"), max_length=255)  # indexed with id below
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    input_key = models.CharField(_("input key"), max_length=1024)
    input = models.JSONField(_("input"))
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.RECEIVED)
    received_at = models.DateTimeField(_("received at"), db_default=Now())
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    attempts = models.IntegerField(_("attempts"), default=0)
    replays = models.IntegerField(_("replays"), default=0)
    next_attempt_at = models.DateTimeField(_("next attempt at"), null=True, blank=True)  # in falai_turn_retry
    error = models.TextField(_("error"), blank=True, default="")
    version = models.IntegerField(_("saved version"), null=True, blank=True)
    started = models.JSONField(_("runs started"), default=list, blank=True)
    ended = models.JSONField(_("runs ended"), default=list, blank=True)
    outcomes = models.JSONField(_("outcomes"), default=list, blank=True)
    skipped = models.JSONField(_("skipped triggers"), default=list, blank=True)
    schedule = models.JSONField(_("schedule"), default=list, blank=True)
    llm_calls = models.IntegerField(_("LLM calls"), default=0)
    usage = models.JSONField(_("usage"), null=True, blank=True)

    class Meta:
        db_table = "falai_turn"
        ordering = ["-id"]
        verbose_name = _("turn")
        verbose_name_plural = _("turns")
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="falai_turn_retry"),
            models.Index(fields=["conversation_id", "id"], name="falai_turn_conv_id"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.kind}:{self.input_key}"


# The names before the rename (0002): kept so existing imports keep working.
HistoryItem = History


# ---------------------------------------------------------------------------------------------
# The human desk (migration 0005_desk): who owns a conversation, what happened beside the
# transcript (take-over, give-back, silence, notes), the replies the team keeps at hand, and
# how far each person has read.
# ---------------------------------------------------------------------------------------------


class Assignment(models.Model):
    """The Django user a conversation is assigned to on the desk (one row while it is assigned)."""

    conversation = models.OneToOneField(Session, on_delete=models.CASCADE, primary_key=True,
                                        related_name="assignment", verbose_name=_("conversation"))
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                 related_name="falai_assignments", verbose_name=_("assignee"))
    assigned_at = models.DateTimeField(_("assigned at"), db_default=Now())

    class Meta:
        db_table = "falai_assignment"
        verbose_name = _("assignment")
        verbose_name_plural = _("assignments")

    def __str__(self) -> str:
        return f"{self.conversation_id} → {self.assignee}"


class DeskEntry(models.Model):
    """A line of the transcript that is not a message: a handoff marker or an internal note.

    Notes are the team's: they are never sent and never fed to the agent.
    """

    class Kind(models.TextChoices):
        TAKE_OVER = "take_over", _("taken over")
        GIVE_BACK = "give_back", _("given back")
        SILENCE = "silence", _("silenced")
        ASSIGN = "assign", _("assigned")
        NOTE = "note", _("note")
        RESOLVE = "resolve", _("resolved")

    conversation = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="desk_entries",
                                     verbose_name=_("conversation"), db_index=False)  # (conversation, id) below
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="+", verbose_name=_("author"))
    author_name = models.CharField(_("author name"), max_length=255, blank=True, default="")
    text = models.TextField(_("text"), blank=True, default="")
    at = models.DateTimeField(_("time"), db_default=Now())
    # The newest transcript item when this was written: where it goes in the transcript (the
    # messages' own times follow the agent's clock or the channel's, not this server's).
    after_item = models.BigIntegerField(_("after transcript item"), default=0)

    class Meta:
        db_table = "falai_desk_entry"
        ordering = ["id"]
        verbose_name = _("desk entry")
        verbose_name_plural = _("desk entries")
        indexes = [models.Index(fields=["conversation", "id"], name="falai_desk_conv_id")]

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.kind}"


class SavedReply(models.Model):
    """A reply the team keeps at hand on the desk (edited in the admin)."""

    title = models.CharField(_("title"), max_length=120, unique=True)
    text = models.TextField(_("text"))

    class Meta:
        db_table = "falai_saved_reply"
        ordering = ["title"]
        verbose_name = _("saved reply")
        verbose_name_plural = _("saved replies")

    def __str__(self) -> str:
        return self.title


class ReadMarker(models.Model):
    """How far one user has read one conversation: the last `History` id they saw."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+",
                             verbose_name=_("user"))
    conversation = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+",
                                     verbose_name=_("conversation"))
    last_read_id = models.BigIntegerField(_("last read item"), default=0)

    class Meta:
        db_table = "falai_read_marker"
        verbose_name = _("read marker")
        verbose_name_plural = _("read markers")
        constraints = [models.UniqueConstraint(fields=["user", "conversation"], name="falai_read_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} read {self.conversation_id} to {self.last_read_id}"


# --------------------------------------------------------------------------- flows as data (issue 16)

class Flow(models.Model):
    """A flow stored as data: a FlowSpec (`spec`) the running agent adds to the code agent's
    flows when `enabled` (replacing a code flow with the same id). Every save is checked against
    the agent's registries, bumps `version` and keeps a `FlowVersion`."""

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

    class Meta:
        db_table = "falai_flow"
        ordering = ["position", "id"]
        verbose_name = _("flow")
        verbose_name_plural = _("flows")

    def __str__(self) -> str:
        return self.name or self.id

    def check_spec(self) -> list[str]:
        """Check `spec` against the agent's registries and the other flows; return the warnings
        (also kept on `self.spec_warnings`). Raises `FlowConfigurationError`."""
        from . import conf, dbflows

        others = Flow.objects.filter(enabled=True).exclude(pk=self.pk).values_list("id", flat=True)
        self.spec_warnings = dbflows.check_spec(self.id, self.spec, conf.get_code_agent(), list(others))
        return self.spec_warnings

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from .engine.errors import FlowConfigurationError

        super().clean()
        if not self.id:
            return  # the id field reports itself
        try:
            self.check_spec()
        except FlowConfigurationError as exc:
            raise ValidationError({"spec": str(exc)}) from exc

    def save(self, *args: Any, changed_by: Any = None, note: str = "", **kwargs: Any) -> None:
        """Check the spec (a bad one raises `ValidationError` and nothing is saved), bump the
        version and keep it as a `FlowVersion` by `changed_by`, in one transaction."""
        from django.db import transaction

        from . import dbflows

        self.clean()
        with transaction.atomic(using=kwargs.get("using")):
            current = Flow.objects.select_for_update().filter(pk=self.pk).values_list("version", flat=True).first()
            self.version = (current or 0) + 1
            if changed_by is not None:
                self.updated_by = changed_by
            super().save(*args, **kwargs)
            FlowVersion.objects.create(flow=self, version=self.version, name=self.name, enabled=self.enabled,
                                       position=self.position, spec=self.spec, changed_by=changed_by, note=note)
            transaction.on_commit(dbflows.invalidate)
        dbflows.invalidate()

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
