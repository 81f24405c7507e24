"""Proof of erasure (migration 0015_erasure): one `Erasure` row per conversation erased.

The row says who erased which conversation and when, and how many rows went from each table,
without keeping the conversation: its id (often a phone number) is kept only as
`hmac.new(SECRET_KEY.encode(), session_id.encode(), hashlib.sha256).hexdigest()`. Anyone with the
id and the project's SECRET_KEY can show that this id was erased; a row alone gives the id away
to no one (a plain hash of a phone number could be reversed by hashing every phone number).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Erasure(models.Model):
    class Via(models.TextChoices):
        COMMAND = "command", _("manage.py falai_erase")
        ADMIN = "admin", _("the admin")
        API = "api", _("the API")
        CODE = "code", _("code")

    # The wall clock of the server that erased it (never the agent's clock, which tests and
    # demos may set anywhere).
    at = models.DateTimeField(_("erased at"), default=timezone.now)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("user"), null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    # Kept as written when the user row goes (or for a command run with no Django user).
    username = models.CharField(_("by"), max_length=255, blank=True, default="")
    session_hash = models.CharField(_("conversation (HMAC-SHA256)"), max_length=64, db_index=True)
    via = models.CharField(_("via"), max_length=16, choices=Via.choices, default=Via.CODE)
    # Rows deleted, by table: {"falai_history": 12, ...}. Counts only, no content.
    deleted = models.JSONField(_("rows deleted"), default=dict)

    class Meta:
        db_table = "falai_erasure"
        ordering = ["-at", "-id"]
        verbose_name = _("erasure")
        verbose_name_plural = _("erasures")

    def __str__(self) -> str:
        return f"{self.session_hash[:12]}… {self.at:%Y-%m-%d %H:%M:%S}"
