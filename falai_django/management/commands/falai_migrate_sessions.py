"""Move 3.x session rows to v4 through `migrate_session`, with a report of what failed and why.

Reads a 3.x table (`--table`, columns `--id-column` / `--blob-column`) or a JSON-lines file
(`--jsonl`, one `{"id": ..., "blob": {...}}` per line). Each row becomes a v4 session saved with
`expected_version=0` (the insert); a conversation that already exists is left alone and
reported. `--requeue` then rebuilds the migrated conversations' wakes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from falai_django import conf
from falai_django.engine.errors import InvalidSessionError, SessionConflictError
from falai_django.engine.migrate import migrate_session

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def migrate_rows(rows, *, flow_id_of, now=None, dry_run: bool = False) -> dict[str, Any]:
    """Migrate (session id, blob) pairs. Returns {migrated, existing, failed: [(id, reason)]}."""
    store = conf.get_store()
    report: dict[str, Any] = {"migrated": [], "existing": [], "failed": []}
    for session_id, blob in rows:
        try:
            if isinstance(blob, str | bytes):
                blob = json.loads(blob)
            session = migrate_session(blob, session_id=session_id, flow_id_of=flow_id_of, now=now)
            if not dry_run:
                store.save(session, 0)
        except SessionConflictError:
            report["existing"].append(session_id)
        except (InvalidSessionError, ValueError) as exc:
            report["failed"].append((session_id, getattr(exc, "reason", None) or str(exc)))
        else:
            report["migrated"].append(session_id)
    return report


class Command(BaseCommand):
    help = "Convert 3.x session rows to v4 (migrate_session) and insert them; reports failures and why."

    def add_arguments(self, parser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--table", help="The 3.x table to read (a plain SQL identifier).")
        source.add_argument("--jsonl", help='A file of {"id": ..., "blob": {...}} lines.')
        parser.add_argument("--id-column", default="id")
        parser.add_argument("--blob-column", default="blob")
        parser.add_argument("--flow-map", default=None, help='JSON {"old flow id": "v4 flow id"}; identity otherwise.')
        parser.add_argument("--dry-run", action="store_true", help="Convert and report; write nothing.")
        parser.add_argument("--requeue", action="store_true", help="Then rebuild the migrated conversations' wakes.")

    def _rows(self, options):
        if options["jsonl"]:
            with open(options["jsonl"], encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    if not line.strip():
                        continue
                    try:
                        item = json.loads(line)
                        yield str(item["id"]), item["blob"]
                    except (ValueError, KeyError, TypeError) as exc:
                        yield f"<line {number}>", f"not a {{id, blob}} line: {exc}"
            return
        names = [options["table"], options["id_column"], options["blob_column"]]
        if not all(_IDENTIFIER.match(name) for name in names):
            raise CommandError("--table, --id-column and --blob-column must be plain SQL identifiers.")
        table, id_column, blob_column = (connection.ops.quote_name(n) for n in names)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {id_column}, {blob_column} FROM {table}")
            for session_id, blob in cursor.fetchall():
                yield str(session_id), blob

    def handle(self, *args, **options) -> None:
        mapping = json.loads(options["flow_map"]) if options["flow_map"] else {}
        report = migrate_rows(
            self._rows(options), flow_id_of=lambda old: mapping.get(old, old), dry_run=options["dry_run"]
        )
        verb = "would migrate" if options["dry_run"] else "migrated"
        self.stdout.write(self.style.SUCCESS(f"{verb}: {len(report['migrated'])}"))
        if report["existing"]:
            self.stdout.write(f"already in the v4 table (left alone): {len(report['existing'])}")
        if report["failed"]:
            self.stdout.write(self.style.ERROR(f"failed: {len(report['failed'])}"))
            for session_id, reason in report["failed"]:
                self.stdout.write(f"  {session_id}: {reason}")
        if options["requeue"] and report["migrated"] and not options["dry_run"]:
            from falai_django.host import requeue_wakes

            wakes = requeue_wakes(session_ids=report["migrated"])
            self.stdout.write(f"wakes queued: {wakes['wakes']}")
