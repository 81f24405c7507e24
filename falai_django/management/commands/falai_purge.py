"""`manage.py falai_purge`: delete what `FALAI["RETENTION"]` no longer keeps, in short batches."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from falai_django import conf, host
from falai_django.host.retention import BATCH

SCHEDULE_NAME = "falai_purge"
TASK = "falai_django.tasks.purge"


class Command(BaseCommand):
    help = (
        'Delete the rows FALAI["RETENTION"] no longer keeps (finished run-log rows, transcript lines, fired wakes, '
        "desk notes), in batches that each hold their locks for a moment: safe while the host serves, and running "
        "it again deletes nothing more. --schedule has django-q2 run it every day."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--only", action="append", choices=list(conf.DEFAULTS["RETENTION"]), metavar="KEY",
                            help="Only this kind of row (run_log, transcript, wakes, desk); may be repeated.")
        parser.add_argument("--batch-size", type=int, default=BATCH,
                            help=f"Rows per batch, each its own short transaction (default {BATCH}).")
        parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                            help="Rest between batches (default 0).")
        parser.add_argument("--schedule", action="store_true",
                            help="Do not purge now: create (or update) the daily django-q2 schedule that runs it.")

    def handle(self, *args, **options) -> None:
        try:
            limits = conf.retention()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        if options["pause"] < 0:
            raise CommandError("--pause must be 0 or more seconds.")
        if options["schedule"]:
            self._schedule()
            return
        written = {**conf.DEFAULTS["RETENTION"], **(conf.get("RETENTION") or {})}
        kept = ", ".join(f"{key} {'kept forever' if limit is None else 'older than ' + written[key]}"
                         for key, limit in limits.items())
        self.stdout.write(f"Deleting {kept}.")
        report = host.purge(batch=options["batch_size"], only=options["only"], pause_s=options["pause"])
        if not report:
            self.stdout.write("Nothing to purge: every kind of row is kept forever.")
            return
        self.stdout.write(self.style.SUCCESS("Deleted " + ", ".join(f"{n} {key}" for key, n in report.items()) + "."))

    def _schedule(self) -> None:
        from django_q.models import Schedule

        defaults = {"func": TASK, "schedule_type": Schedule.DAILY, "repeats": -1}
        if conf.get("Q_CLUSTER"):
            defaults["cluster"] = conf.get("Q_CLUSTER")
        schedule, created = Schedule.objects.update_or_create(name=SCHEDULE_NAME, defaults=defaults)
        verb = "Created" if created else "Updated"
        self.stdout.write(self.style.SUCCESS(
            f"{verb} the django-q2 schedule {SCHEDULE_NAME!r}: {TASK} daily, next at {schedule.next_run:%Y-%m-%d %H:%M} "
            "(a running qcluster carries it out)."))
