"""The host's tables: conversations, their transcript and outbox, wakes, and the inbox / run log.

- `Session` — one row per conversation (table `agent_sessions`, the upstream PostgresStore shape
  `id, version, blob, created_at, updated_at`) plus columns derived from the blob on every save
  for the admin to filter on (`models.sql.session_columns`). The blob *is* the engine session
  (`falai_django.Session`, a pydantic model: import one of the two under another name where both
  are needed). `Conversation` is a proxy of it: what the admin shows people (and the name its
  URLs and permissions, `falai_django.change_conversation`, keep).
- `History` — one row per transcript item. Outbound items are also the outbox: they carry the
  send status, attempts and the emission key (unique per conversation).
- `Wake` — durable wakes (`conversation, key` unique), fired by the dispatcher via django-q2.
- `TurnRecord` — one row per input: the durable inbox (written before the turn) and the run
  log (mirrors `started`, `ended`, `outcomes`, `skipped`, `llm_calls`, `usage` after it).
- `TurnLock` — a conversation's turn lock off PostgreSQL's advisory locks (a lease row).
"""

from __future__ import annotations

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
    # PostgreSQL gets more from migration 0016 (`models.search_indexes`): the list's order with
    # conversations that have no customer message last (`falai_sess_recent`, which replaces
    # `falai_sess_last_user` there: SQLite cannot index NULLS LAST), and the search's trigram and
    # full-text indexes.
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
            # the handed-over conversations, newest first: the desk's queues walk it and stop at a page
            models.Index(fields=["-last_user_at", "id"], name="falai_sess_silenced",
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
            ("erase_conversation", _("Can erase a conversation everywhere")),
        ]


class HistoryQuerySet(models.QuerySet["History"]):
    def transcript(self, session_id: str) -> HistoryQuerySet:
        """What the engine sees as `history`: every item but sends that failed for good and
        messages the customer deleted."""
        return self.filter(conversation_id=session_id, deleted_at__isnull=True).exclude(
            send_status=History.SendStatus.FAILED)

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
    # Inbound only: the customer edited the message (its earlier texts are in `media["previous"]`)
    # or deleted it (the line stays, marked; the channel's notice time).
    edited_at = models.DateTimeField(_("edited at"), null=True, blank=True)
    deleted_at = models.DateTimeField(_("deleted at"), null=True, blank=True)

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
            # the Operations page's failed sends (a small share of the transcript)
            models.Index(fields=["at"], name="falai_hist_failed",
                         condition=models.Q(send_status="failed") | models.Q(delivery_status="failed")),
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class EarlyStatus(models.Model):
    """A channel's delivery status that matched no outbox row yet (it came before the row's send
    was recorded): kept, and applied by the dispatcher's sweep once the row appears
    (`host.statuses`); dropped with a warning after `host.statuses.KEEP_FOR`."""

    channel = models.CharField(_("channel"), max_length=32)
    message_id = models.CharField(_("channel message id"), max_length=255)
    status = models.CharField(_("status"), max_length=16)
    at = models.DateTimeField(_("time"), null=True, blank=True)
    # The conversation ids it may belong to (a phone number, a business-scoped user id).
    recipients = models.JSONField(_("recipients"), default=list)
    callback_data = models.CharField(_("idempotency key"), max_length=255, blank=True, default="")
    error = models.TextField(_("error"), blank=True, default="")
    received_at = models.DateTimeField(_("received at"), db_default=Now())

    class Meta:
        db_table = "falai_early_status"
        ordering = ["id"]
        verbose_name = _("early delivery status")
        verbose_name_plural = _("early delivery statuses")
        constraints = [  # a webhook Meta delivers again keeps nothing twice
            models.UniqueConstraint(fields=["channel", "message_id", "status"], name="falai_early_status_once"),
        ]

    def __str__(self) -> str:
        return f"{self.status}: {self.message_id}"


class WakeQuerySet(models.QuerySet["Wake"]):
    def due(self, now) -> WakeQuerySet:
        """Pending wakes whose time has come, oldest first."""
        return self.filter(state=Wake.State.PENDING, at__lte=now).order_by("at")

    def open(self) -> WakeQuerySet:
        return self.exclude(state=Wake.State.DONE)

    def overdue(self, now) -> WakeQuerySet:
        """Wakes past their time that have not fired (pending, or queued for a worker)."""
        return self.filter(state__in=[Wake.State.PENDING, Wake.State.QUEUED], at__lt=now)

    def mark_fired(self, session_id: str, key: str, at) -> int:
        """The wake ran (honoured or dropped as stale): it is done."""
        return self.filter(conversation_id=session_id, key=key).update(state=Wake.State.DONE, fired_at=at)

    # `self` spelled out: django-stubs' as_manager() copy otherwise leaves its model a type variable.
    def upsert(self: WakeQuerySet, session_id: str, entries) -> None:
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
    # What replaying the turn needs (`FALAI["RECORD_MODEL_REPLIES"]`): the clock, `silenced`,
    # `context`, the history it read, the model's replies, what actions and tools answered, and
    # the turn as it ran. Written with the run log, in the same statement (falai_django.replay).
    recording = models.JSONField(_("recording"), null=True, blank=True)
    # Set on an input run in-line by its caller (the API, the desk) while it is `received`: the
    # workers draining the conversation wait for it instead of running it (host/ordering.py).
    claimed_until = models.DateTimeField(_("claimed until"), null=True, blank=True)
    # Not a column: set by host.turns.load_session_and_history on the row it writes (the id of an
    # earlier open input, or None). Unset otherwise; only the annotation, no class attribute.
    waits_behind: int | None

    class Meta:
        db_table = "falai_turn"
        ordering = ["-id"]
        verbose_name = _("turn")
        verbose_name_plural = _("turns")
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="falai_turn_retry"),
            models.Index(fields=["conversation_id", "id"], name="falai_turn_conv_id"),
            # the Operations page's "turns in the last hour / day"
            models.Index(fields=["received_at"], name="falai_turn_received"),
            # A conversation's open inputs, in order (host/ordering.py): small, only unfinished rows.
            models.Index(fields=["conversation_id", "id"], name="falai_turn_open",
                         condition=models.Q(status__in=["received", "retry"]) & ~models.Q(kind="wake")),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.kind}:{self.input_key}"


class TurnLock(models.Model):
    """A conversation's turn lock where PostgreSQL advisory locks are not used (other databases,
    or `SEND_LOCK = "lease"`): one row per conversation, held until `until` (host/ordering.py)."""

    conversation_id = models.CharField(_("session id"), max_length=255, primary_key=True)
    until = models.DateTimeField(_("held until"), null=True, blank=True)

    class Meta:
        db_table = "falai_turn_lock"
        verbose_name = _("turn lock")
        verbose_name_plural = _("turn locks")

    def __str__(self) -> str:
        return self.conversation_id


# The names before the rename (0002): kept so existing imports keep working.
HistoryItem = History
