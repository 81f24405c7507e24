"""Flows in git: `falai_flows export DIR` writes one JSON file per stored flow; `falai_flows import
DIR` checks every file and saves the new and changed ones, with a report (see `flows.files`)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from falai_django import conf
from falai_django.flows.files import export_flows, import_flows


class Command(BaseCommand):
    help = ("Export the stored flows to DIR (one <id>.json per flow), or import DIR back: every file is "
            "checked against the agent first, and nothing is saved when one is bad.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("operation", choices=["export", "import"])
        parser.add_argument("directory", type=Path)
        parser.add_argument("--with-code-flows", action="store_true",
                            help="export: also write the code agent's flows that are not stored (disabled).")
        parser.add_argument("--dry-run", action="store_true", help="import: check and report, save nothing.")

    def handle(self, *args, operation: str, directory: Path, **options) -> None:
        if operation == "export":
            agent = conf.get_code_agent() if options["with_code_flows"] else None
            written = export_flows(directory, agent)
            self.stdout.write(self.style.SUCCESS(f"{len(written)} flow file(s) written to {directory}"))
            for name in written:
                self.stdout.write(f"  {name}")
            return
        if not directory.is_dir():
            raise CommandError(f"{directory} is not a directory.")
        report = import_flows(directory, dry_run=options["dry_run"])
        for flow_id in report.created:
            self.stdout.write(f"  new        {flow_id}")
        for flow_id, keys in report.changed:
            self.stdout.write(f"  changed    {flow_id} ({', '.join(keys)})")
        for flow_id in report.unchanged:
            self.stdout.write(f"  unchanged  {flow_id}")
        for flow_id in report.not_in_directory:
            self.stdout.write(f"  no file    {flow_id} (left as stored)")
        for name, warning in report.warnings:
            self.stdout.write(self.style.WARNING(f"  warning    {name}: {warning}"))
        for name, why in report.errors:
            self.stderr.write(self.style.ERROR(f"  error      {name}: {why}"))
        if report.errors:
            raise CommandError(f"{len(report.errors)} bad file(s): nothing was imported.")
        summary = f"{len(report.created)} new, {len(report.changed)} changed, {len(report.unchanged)} unchanged"
        if options["dry_run"]:
            self.stdout.write(self.style.WARNING(f"dry run: {summary}; nothing saved"))
        else:
            self.stdout.write(self.style.SUCCESS(f"imported: {summary}"))
