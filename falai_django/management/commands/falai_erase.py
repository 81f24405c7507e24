"""`manage.py falai_erase SESSION_ID…`: erase conversations everywhere, with an audit row each."""

from __future__ import annotations

import argparse
import getpass

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from falai_django import host
from falai_django.models import Erasure


def _yes(value: object) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes")


class Command(BaseCommand):
    help = (
        "Erase conversations everywhere (session, transcript, run log, wakes, inbox, desk records, flow funnel "
        "entries), one transaction each, and write an audit row per conversation that keeps the id only as an "
        "HMAC. A conversation with a turn running is left alone: run the command again in a few seconds."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("session_ids", nargs="+", metavar="SESSION_ID", help="The conversations to erase.")
        parser.add_argument("--no-input", "--noinput", action="store_true", dest="no_input",
                            help="Do not ask for confirmation.")
        # call_command(..., interactive=False), as Django's own commands take it
        parser.add_argument("--interactive", type=_yes, default=True, help=argparse.SUPPRESS)
        parser.add_argument("--user", metavar="USERNAME",
                            help="The Django user the audit rows name (default: the account running the command, "
                                 "by its login name).")

    def handle(self, *args, **options) -> None:
        ids = list(dict.fromkeys(options["session_ids"]))  # each once, in the order given
        user, username = self._who(options["user"])
        if options["interactive"] and not options["no_input"]:
            try:
                answer = input(f"Erase {len(ids)} conversation(s) everywhere? This cannot be undone.\n"
                               "Type 'yes' to continue, or 'no' to cancel: ")
            except EOFError:
                raise CommandError("No answer to the confirmation (no terminal): pass --no-input.") from None
            if answer.strip().lower() != "yes":
                self.stdout.write("Erasure cancelled; nothing was changed.")
                return
        not_erased: list[str] = []
        for session_id in ids:
            try:
                erasure = host.erase(session_id, user=user, username=username, via=Erasure.Via.COMMAND)
            except host.ConversationBusyError as exc:
                not_erased.append(f"{session_id} (a turn is running: run the command again in a few seconds)")
                self.stderr.write(self.style.ERROR(f"{session_id}: not erased, {exc.why}."))
            except host.UnknownConversationError:
                not_erased.append(f"{session_id} (nothing is stored under this id)")
                self.stderr.write(self.style.WARNING(f"{session_id}: nothing is stored under this id."))
            else:
                rows = sum(erasure.deleted.values())
                self.stdout.write(self.style.SUCCESS(
                    f"{session_id}: erased, {rows} rows; audit row {erasure.pk} ({erasure.session_hash[:16]}…)."))
        if not_erased:
            raise CommandError(f"{len(not_erased)} of {len(ids)} conversation(s) not erased: {'; '.join(not_erased)}")

    def _who(self, name: str | None):
        if name is None:
            try:
                return None, getpass.getuser()
            except Exception:  # noqa: BLE001 - no login name (a container without one)
                return None, ""
        model = get_user_model()
        try:
            user = model._default_manager.get_by_natural_key(name)
        except model.DoesNotExist:
            raise CommandError(f"No user named {name!r}.") from None
        if not user.has_perm("falai_django.erase_conversation"):
            raise CommandError(f"User {name!r} does not have the permission falai_django.erase_conversation.")
        return user, user.get_username()
