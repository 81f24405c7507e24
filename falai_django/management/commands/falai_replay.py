"""`falai_replay`: replay stored conversations through the running agent, a stored flow version or
another agent, with the model's recorded replies, and say where anything would change.

    manage.py falai_replay 5511999990000               # one conversation, a table
    manage.py falai_replay --flow vendas --limit 20 --json
    manage.py falai_replay --flow-version vendas:7     # the stored version 7 in the flow's place
    manage.py falai_replay --export 5511999990000 > case.json   # for `testing.replay_case`
    manage.py falai_replay --flow vendas --limit 20 --export-dir cases/   # one <id>.json each

Exits 0 when every conversation replays the same (or none matches), 1 when one differs (or needs
the model), 2 on an error. With `--json` and `--export` only the reports go to stdout.
"""

from __future__ import annotations

import json
from datetime import datetime, time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import dateparse, timezone

from falai_django import conf
from falai_django.engine.errors import FlowConfigurationError
from falai_django.replay import ReplayError, ReplayReport, agent_with_version, case_of, replay, sessions_for

DIFFERENT, ERROR = 1, 2


class Command(BaseCommand):
    help = ("Replay stored conversations against the running agent (or --flow-version, --agent) with the "
            "model's recorded replies, and show turn by turn what would change. Writes and sends nothing. "
            "Exit status: 0 all the same, 1 something differs, 2 an error.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("session_ids", nargs="*", metavar="SESSION_ID", help="conversations to replay")
        parser.add_argument("--flow", metavar="FLOW_ID", help="replay the latest conversations that ran this flow")
        parser.add_argument("--since", metavar="ISO", help="only conversations with a turn at or after this time")
        parser.add_argument("--limit", type=int, default=50, metavar="N",
                            help="how many conversations to pick without SESSION_IDs (default 50)")
        parser.add_argument("--flow-version", metavar="FLOW_ID:VERSION",
                            help="replay against this stored flow version, put in its flow's place")
        parser.add_argument("--agent", metavar="DOTTED.PATH",
                            help='replay against this agent (what FALAI["AGENT"] takes)')
        parser.add_argument("--live", action="store_true", help="call the configured model instead of the recording")
        parser.add_argument("--json", action="store_true", help="one JSON report per line, nothing else on stdout")
        parser.add_argument("--export", metavar="SESSION_ID",
                            help="print the conversation as a self-contained replay case (JSON) and stop")
        parser.add_argument("--export-dir", metavar="DIR",
                            help="write each chosen conversation (SESSION_IDs, or --flow/--since/--limit) as a "
                                 "replay case DIR/<id>.json and stop")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["export"]:
                self.stdout.write(json.dumps(case_of(options["export"]), ensure_ascii=False, indent=2))
                return
            agent, against = self._agent(options)
            session_ids = options["session_ids"] or sessions_for(
                flow=options["flow"], since=self._since(options["since"]), limit=self._limit(options["limit"]))
            if not session_ids:
                self.stderr.write("falai_replay: no conversation matches; nothing to "
                                  + ("export." if options["export_dir"] else "replay."))
                return
            if options["export_dir"]:
                self._export(session_ids, Path(options["export_dir"]))
                return
            reports = []
            for session_id in session_ids:
                report = replay(session_id, agent=agent, live=options["live"])
                reports.append(report)
                if options["json"]:
                    self.stdout.write(json.dumps(report.to_json(), ensure_ascii=False))
        except (ReplayError, FlowConfigurationError, ValueError, ImportError, OSError) as exc:
            raise CommandError(f"falai_replay: {exc}", returncode=ERROR) from exc
        if not options["json"]:
            source = "the configured model" if options["live"] else "the recorded model replies"
            self.stdout.write(f"Replayed {len(reports)} conversation(s) against {against}, with {source}.")
            self._table(reports)
        changed = [r for r in reports if not r.same]
        if changed:
            raise CommandError(f"falai_replay: {len(changed)} of {len(reports)} conversation(s) would change.",
                               returncode=DIFFERENT)

    def _export(self, session_ids: list[str], directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for session_id in session_ids:
            name = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id).lstrip(".") or "case"
            case = json.dumps(case_of(session_id), ensure_ascii=False, indent=2)
            (directory / f"{name}.json").write_text(case + "\n", encoding="utf-8")
        self.stderr.write(f"falai_replay: exported {len(session_ids)} case(s) to {directory}/.")

    # -- options
    def _agent(self, options: dict[str, Any]) -> tuple[Any, str]:
        agent = conf.resolve_agent(options["agent"]) if options["agent"] else None
        against = f"the agent {options['agent']}" if options["agent"] else "the running agent"
        if options["flow_version"]:
            flow_id, sep, version = options["flow_version"].rpartition(":")
            if not sep or not flow_id or not version.isdigit():
                raise ValueError(f"--flow-version {options['flow_version']!r} is not FLOW_ID:VERSION (vendas:7)")
            agent = agent_with_version(flow_id, int(version), code_agent=agent)
            against = f"flow {flow_id} version {version}" + (f" in {options['agent']}" if options["agent"] else "")
        return agent, against

    @staticmethod
    def _since(value: str | None) -> datetime | None:
        if not value:
            return None
        at = dateparse.parse_datetime(value)
        if at is None and (day := dateparse.parse_date(value)) is not None:
            at = datetime.combine(day, time.min)
        if at is None:
            raise ValueError(f"--since {value!r} is not an ISO date or time (2026-12-01 or 2026-12-01T09:00:00Z)")
        return timezone.make_aware(at) if timezone.is_naive(at) else at

    @staticmethod
    def _limit(value: int) -> int:
        if value < 1:
            raise ValueError(f"--limit must be 1 or more, got {value}")
        return value

    # -- the table
    def _table(self, reports: list[ReplayReport]) -> None:
        width = max([len("conversation"), *(len(r.session_id) for r in reports)])
        self.stdout.write(f"{'conversation':<{width}}  {'turns':>5}  {'result':<12}  first difference")
        for r in reports:
            first = "-"
            if r.first_difference is not None:
                turn = r.turns[r.first_difference]
                what = ", ".join(turn.diffs) or "needs the model"
                first = f"turn {turn.index} ({turn.kind} {turn.input_key}): {what}"
            result = {"same": "same", "different": "different", "needs_model": "needs model"}[r.status]
            styled = self.style.SUCCESS(f"{result:<12}") if r.same else self.style.WARNING(f"{result:<12}")
            self.stdout.write(f"{r.session_id:<{width}}  {len(r.turns):>5}  {styled}  {first}")
        for r in reports:
            for turn in r.turns:
                if turn.same:
                    continue
                note = " (the recording had no answer for a model call)" if turn.needs_model else ""
                self.stdout.write(f"\n{r.session_id} turn {turn.index} ({turn.kind} {turn.input_key}){note}")
                if turn.error:
                    self.stdout.write(f"  error     {turn.error}")
                for part in turn.diffs:
                    before = json.dumps(turn.before.get(part), ensure_ascii=False)
                    after = json.dumps(turn.after.get(part), ensure_ascii=False)
                    self.stdout.write(f"  {part:<9} before: {before}\n  {'':<9} after:  {after}")
        same = sum(r.same for r in reports)
        needs = sum(r.status == "needs_model" for r in reports)
        calls = sum(r.model_calls for r in reports)
        self.stdout.write(f"\n{len(reports)} conversation(s): {same} same, {len(reports) - same - needs} different, "
                          f"{needs} need the model; {calls} model call(s) made.")
