"""The outside world of a replayed turn, played back from its recording.

- `Cassette`: the model. Each call is answered with the next recorded reply for the same schema
  ("understand", "speak", "summary"), in call order; a call the recording cannot answer gets an
  empty answer and marks the turn `needs_model`.
- stand-in actions and tools: never the real ones (no side effect reaches anything). Each gives
  back what the real one answered in the recorded turn (an action's `ctx.set` patches too), and
  `{"ok": True}` when the recording has nothing for it.
- `ReplayDeck.agent`: the agent under test with those put in, and its clock pinned to each turn's
  recorded time. Built once per replay; `ReplayDeck.load(turn)` loads one turn's recording.

Pure: no Django, no I/O. A live replay (`live=True`) keeps the agent's own provider.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections import defaultdict, deque
from datetime import datetime
from typing import Any

from falai_django.engine.agent import Action
from falai_django.engine.jstime import try_parse_iso
from falai_django.llm.errors import ProviderError
from falai_django.llm.recording import schema_of
from falai_django.llm.types import GenerateOutput

__all__ = ["Cassette", "ReplayDeck"]


class Cassette:
    """A provider answering from recorded replies (see the module docstring)."""

    name = "cassette"
    plays_back = True  # llm.calling neither counts nor traces its calls: they were counted when recorded

    def __init__(self, deck: ReplayDeck) -> None:
        self._deck = deck

    def generate_message(self, request: Any) -> GenerateOutput:
        return self._deck.answer(schema_of(request))


class ReplayDeck:
    """One replay's stand-ins and the turn loaded into them."""

    def __init__(self, agent: Any, *, live: bool = False) -> None:
        self.live = live
        self.now: datetime | None = None
        self.needs_model = False
        self.calls: list[dict[str, Any]] = []  # the actions run this turn
        self._replies: list[dict[str, Any]] = []
        self._used: list[bool] = []
        self._effects: dict[tuple[str, str], deque[dict[str, Any]]] = defaultdict(deque)
        self._lock = threading.Lock()  # concurrency-safe tools run in threads
        self.agent = self._build(agent)

    # -- the agent under test, with the stand-ins
    def _build(self, agent: Any) -> Any:
        clone = copy.copy(agent)
        clone.__dict__.pop("_falai_turn_index", None)  # it may hold the real tools
        fallback = agent.clock
        clone.clock = lambda: self.now if self.now is not None else fallback()
        if not self.live:
            clone.provider = Cassette(self)
        clone.actions = {name: Action(run=self._action(name), parameters=action.parameters,
                                      description=action.description)
                         for name, action in agent.actions.items()}
        clone.tools = tuple(dataclasses.replace(tool, handler=self._tool(tool.id), validate_input=None,
                                                check_permissions=None, max_result_size_chars=None)
                            for tool in agent.tools)
        clone.tools_by_id = {}
        for tool in clone.tools:
            clone.tools_by_id.setdefault(tool.id, tool)
        return clone

    def load(self, turn: dict[str, Any]) -> None:
        """Make the stand-ins answer as in this recorded turn."""
        recorded = turn.get("at")
        self.now = try_parse_iso(recorded) if isinstance(recorded, str) else None
        self.needs_model = False
        self.calls = []
        self._replies = list(turn.get("replies") or [])
        self._used = [False] * len(self._replies)
        self._effects = defaultdict(deque)
        for effect in turn.get("effects") or []:
            if "action" in effect:
                self._effects["action", effect["action"]].append(effect)
            elif "tool" in effect:
                self._effects["tool", effect["tool"]].append(effect)

    # -- the model
    def answer(self, schema: str) -> GenerateOutput:
        with self._lock:
            for i, entry in enumerate(self._replies):
                if not self._used[i] and entry.get("schema") == schema:
                    self._used[i] = True
                    break
            else:
                self.needs_model = True
                return GenerateOutput(message="", structured={})
        if "error" in entry:
            error = entry["error"] or {}
            raise ProviderError("cassette", str(error.get("kind") or "unknown"), str(error.get("message") or ""))
        reply = entry.get("reply") or {}
        return GenerateOutput(message=reply.get("message") or "", metadata=dict(reply.get("metadata") or {}),
                              structured=copy.deepcopy(reply.get("structured")))

    # -- actions and tools
    def _next_effect(self, kind: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            queue = self._effects.get((kind, name))
            return queue.popleft() if queue else None

    def _action(self, name: str) -> Any:
        def stand_in(params: Any, ctx: Any) -> Any:
            with self._lock:
                self.calls.append({"action": name, "params": copy.deepcopy(params)})
            effect = self._next_effect("action", name)
            if effect is None:
                return {"ok": True}
            for patch in effect.get("set") or []:
                ctx.set(patch)
            return copy.deepcopy(effect.get("result")) or {"ok": True}

        return stand_in

    def _tool(self, name: str) -> Any:
        def stand_in(args: Any, ctx: Any) -> Any:
            effect = self._next_effect("tool", name)
            if effect is None:
                return {"value": '{"ok":true}'}
            return {"value": effect.get("text"), "data": copy.deepcopy(effect.get("data"))}

        return stand_in
