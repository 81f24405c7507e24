"""Chat with the configured agent in a terminal, through the host (so state persists).

    python manage.py falai_chat                      # a new conversation
    python manage.py falai_chat --session 5511999990000

Lines starting with "/" are commands; anything else is the customer's message:

    /wake [key]              fire the next pending wake now (or the one named)
    /event name {json}       send an event with an optional JSON payload
    /silence reason          hand the conversation to a human (later inputs are silenced)
    /unsilence               give it back to the agent
    /state                   collected data, runs, last outcomes, pending wakes
    /help, /quit
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from falai_django import conf, host, jsondepth
from falai_django.host import conversations
from falai_django.playground import display, drive

HELP = """Commands:
  /wake [key]          fire the next pending wake now (or the one named)
  /event name {json}   send an event, e.g. /event demo_agendada {"quando": "amanhã às 10h"}
  /silence reason      hand the conversation to a human; /unsilence gives it back
  /state               collected data, runs, last outcomes, pending wakes
  /help, /quit"""


class Command(BaseCommand):
    help = "Chat with the configured agent in the terminal (through the host: state persists)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--session", default=None, help="Conversation id (default: a new cli-<hex> id).")
        parser.add_argument("--no-stream", action="store_true", help="Print whole replies instead of streaming.")

    def handle(self, *args: Any, **options: Any) -> None:
        # django-q2 logs each task hand-off on its console handler at INFO; mid-reply, those lines
        # glue onto the agent's text. Quiet it for the chat (-v 2 keeps it), warnings still show.
        quiet = logging.getLogger("django-q")
        level = quiet.level
        if options["verbosity"] < 2:
            quiet.setLevel(max(level, logging.WARNING))
        try:
            self.chat(**options)
        finally:
            quiet.setLevel(level)

    def chat(self, **options: Any) -> None:
        self.agent = conf.get_agent()
        self.name = getattr(self.agent, "name", "Agent")
        self.session_id = options["session"] or f"cli-{secrets.token_hex(4)}"
        self.streaming = not options["no_stream"]
        self.stdout.write(f"Chatting with {self.name} as session {self.session_id}.")
        self.stdout.write(f"Provider: {drive.provider_label(self.agent)}")
        self.stdout.write("Type a message, or /help. Ctrl-D or /quit ends.\n")
        interactive = sys.stdin.isatty()
        while True:
            try:
                line = input("you> ") if interactive else sys.stdin.readline()
            except (EOFError, KeyboardInterrupt):
                break
            if not interactive and line == "":
                break
            line = line.strip()
            if not line:
                continue
            if not interactive:
                self.stdout.write(f"you> {line}")
            try:
                if not self.dispatch(line):
                    break
            except CommandError as exc:
                self.stderr.write(str(exc))
            except KeyboardInterrupt:  # mid-turn: the input is kept; the dispatcher retries it later
                self.stdout.write("\n(interrupted)")
                break
        self.stdout.write("bye")

    # -- one line --------------------------------------------------------------------------
    def dispatch(self, line: str) -> bool:
        """Handle one line; False ends the chat."""
        if not line.startswith("/"):
            self.message(line)
            return True
        command, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        if command in ("quit", "exit", "q"):
            return False
        if command == "help":
            self.stdout.write(HELP)
        elif command == "wake":
            if rest:
                pending = [w.key for w in conversations.read_conversation(self.session_id, agent=self.agent).wakes]
                if rest not in pending:
                    listed = ", ".join(pending) if pending else "none"
                    raise CommandError(f"no such wake: {rest} (pending: {listed}; /state lists them)")
            result = drive.fast_forward(self.session_id, key=rest or None, agent=self.agent)
            if result is None:
                self.stdout.write("(no wake pending)")
            else:
                self.report(result, streamed=False)
        elif command == "event":
            name, _, raw = rest.partition(" ")
            if not name:
                raise CommandError("usage: /event name {json payload}")
            try:
                payload = jsondepth.loads(raw, "the payload") if raw.strip() else None
            except jsondepth.JSONDepthError as exc:
                raise CommandError(str(exc)) from None
            except ValueError as exc:
                raise CommandError(f"the payload is not JSON: {exc}") from None
            events = sorted(getattr(self.agent, "events", None) or {})
            if name not in events:
                known = ", ".join(events) if events else "none (this agent declares no events)"
                raise CommandError(f"no such event: {name} (known: {known})")
            self.report(drive.send_event(self.session_id, name, payload, agent=self.agent), streamed=False)
        elif command == "silence":
            if not rest:
                raise CommandError("usage: /silence reason")
            self.handoff(host.silence, rest)
            self.stdout.write(f"(silenced: {rest}; /unsilence gives the conversation back)")
        elif command == "unsilence":
            resumed: list = []  # the flows the handoff silenced, started again
            self.handoff(host.unsilence, on_resumed=resumed.append)
            self.stdout.write("(the agent has the conversation again)")
            for result in resumed:
                self.report(result, streamed=False)
        elif command == "state":
            self.show_state()
        else:
            raise CommandError(f"unknown command /{command}; try /help")
        return True

    def handoff(self, operation, *args: Any, **kwargs: Any) -> Any:
        try:
            return operation(self.session_id, *args, **kwargs)
        except host.UnknownConversationError:
            raise CommandError("no conversation yet: say something first") from None

    def message(self, text: str) -> None:
        # A channel gives every message an id; so does the terminal (two lines never share a key).
        turn_input = {"message": text, "id": f"cli-{secrets.token_hex(6)}"}
        if not self.streaming:
            self.report(host.handle(self.session_id, turn_input, agent=self.agent), streamed=False)
            return
        started = False
        final = None
        for event in host.stream(self.session_id, turn_input, agent=self.agent):
            if event.get("delta"):
                if not started:
                    self.stdout.write(f"{self.name}> ", ending="")
                    started = True
                self.stdout.write(event["delta"], ending="")
                self.stdout.flush()
            elif event.get("replay"):
                self.stdout.write("\n(another turn saved first; replaying)")
                started = False
            elif event.get("done"):
                final = event["host"]
        if started:
            self.stdout.write("")
        if final is not None:
            self.report(final, streamed=started)

    def report(self, result: host.HostResult, *, streamed: bool) -> None:
        """Print the turn's messages (all but the streamed AI one) and anything worth a note."""
        turn = result.result
        if result.status in ("retry", "failed"):
            self.stderr.write(f"(turn {result.status}: {result.error})")
            return
        if turn is None or not result.changed:
            codes = [o.code for o in (turn.outcomes if turn is not None else []) if o.code]
            self.stdout.write(f"(nothing changed{': ' + ', '.join(codes) if codes else ''})")
            return
        skipped_ai = not streamed
        for message in turn.messages:
            if message.kind == "ai" and not skipped_ai:
                skipped_ai = True
                continue
            self.stdout.write(f"{self.name}> {message.text}")
        if not turn.messages:
            self.stdout.write("(no reply this turn)")
        for entry in turn.schedule:
            self.stdout.write(f"(wake scheduled: {entry.key} at {display.when(entry.at)})")

    def show_state(self) -> None:
        state = drive.snapshot(self.session_id, agent=self.agent)
        if not state["exists"]:
            self.stdout.write("(no conversation yet)")
            return
        self.stdout.write(f"session {state['session_id']} v{state['version']}")
        self.stdout.write("data: " + json.dumps(state["data"], ensure_ascii=False))
        for run in state["runs"]:
            waiting = run["waiting"] or {}
            extra = f" until {display.when(waiting.get('until'))}" if waiting.get("until") else ""
            self.stdout.write(f"run {run['flow']} @ {display.text(run['step'])} [{run['status']}]{extra}")
        if state["handoff"]:
            self.stdout.write(f"handoff: {state['handoff']['summary']}")
        last = state["last_turn"]
        if last:
            self.stdout.write(f"last turn: {last['kind']} {last['status']}, {last['llm_calls']} LLM call(s)")
            for line in last["outcomes"] or []:
                code = f" {line.get('code')}" if line.get("code") else ""
                where = "/".join(str(v) for v in (line.get("flowId"), line.get("stepId")) if v) or display.EMPTY
                self.stdout.write(f"  {where} {display.text(line.get('kind'))} {display.text(line.get('status'))}{code}")
        for wake in state["wakes"]:
            self.stdout.write(f"wake {wake['key']} at {wake['at_display']}")
        if not state["wakes"]:
            self.stdout.write("no wakes pending")
