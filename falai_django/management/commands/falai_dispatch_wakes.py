"""Hand due wakes (and lost sends, and parked inputs) to django-q2. Run it beside `qcluster`."""

from __future__ import annotations

import signal

from django.core.management.base import BaseCommand

from falai_django.host.wakes import Dispatcher


class Command(BaseCommand):
    help = "Poll the Wake table and hand due wakes to django-q2 workers (run one or more beside qcluster)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--poll", type=float, default=None, help="Seconds between polls (default 0.1).")
        parser.add_argument("--max-seconds", type=float, default=None, help="Stop after this long (tests, benches).")

    def handle(self, *args, **options) -> None:
        dispatcher = Dispatcher(poll_s=options["poll"])
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: dispatcher.stop())
        self.stdout.write(f"falai dispatcher polling every {dispatcher.poll_s}s")
        dispatched = dispatcher.run(max_seconds=options["max_seconds"])
        self.stdout.write(f"falai dispatcher stopped; {dispatched} wakes handed to django-q2")
