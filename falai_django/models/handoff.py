"""The human desk's tables (migration 0005_desk): who owns a conversation (`Assignment`), what
happened beside the transcript (`DeskEntry`: take-over, give-back, silence, notes), the replies
the team keeps at hand (`SavedReply`) and how far each person has read (`ReadMarker`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from falai_django.models.host import Session


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
