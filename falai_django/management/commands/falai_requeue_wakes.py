"""Rebuild every pending wake from `agent.pending_wakes` (after a flushed queue or a migration)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from falai_django.host import requeue_wakes


def progress_bar(stream, width: int = 40):
    def show(done: int, total: int) -> None:
        filled = int(width * done / total) if total else width
        percent = int(100 * done / total) if total else 100
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {percent:3d}% {done}/{total}")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


class Command(BaseCommand):
    help = (
        "Recompute every conversation's wakes with agent.pending_wakes and upsert them as pending. "
        "Running it twice is safe: a wake that fires twice is dropped as stale."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("session_ids", nargs="*", help="Only these conversations (default: all).")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args, **options) -> None:
        # OutputWrapper appends a newline to every write; the bar rewrites one line, so use the raw stream.
        progress = None if options["no_progress"] else progress_bar(getattr(self.stdout, "_out", sys.stdout))
        report = requeue_wakes(session_ids=options["session_ids"] or None, progress=progress)
        self.stdout.write(
            self.style.SUCCESS(
                f"{report['sessions']} conversations, {report['wakes']} wakes queued, {report['failed']} failed"
            )
        )
        if report["failed"]:
            self.stdout.write(self.style.WARNING("Failed conversations are logged (logger falai_django.host)."))
