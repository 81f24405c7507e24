"""Shared scaffolding for the turn tests: agents over `mock_provider`, and a host loop over
MemoryStore + MemoryScheduler that does exactly what the user's page does (load, turn, save
with the loaded version, then send and schedule)."""

from __future__ import annotations

from typing import Any

from falai_django import MemoryStore, SessionConflictError, assistant_message, falai, user_message
from falai_django.testing import MemoryScheduler, fake_clock, mock_provider

T0 = "2026-09-20T10:00:00.000Z"
T0_MS = 1789898400000

TRIAGE_FIELDS = {
    "nome": {"type": "string", "ask": "Pergunte o nome da pessoa, sem tom de formulário."},
    "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
    "tamanho": {"type": "string", "enum": ["1-10", "11-50", "51-200", "200+"],
                "ask": "Pergunte quantas pessoas trabalham lá e ofereça as faixas."},
    "confirmado": {"type": "boolean", "ask": "Resuma em uma frase o que anotou e pergunte se está tudo certo."},
}


def triage_flow(**extra: Any) -> dict[str, Any]:
    """The page's Triagem flow."""
    flow = {
        "id": "triagem",
        "name": "Triagem",
        "on": [{"message": []}],
        "steps": [
            {"id": "quem", "prompt": "Descubra quem é e de onde fala.", "collect": ["nome", "empresa"]},
            {"id": "porte", "collect": ["tamanho"], "maxAsks": 2},
            {"id": "confirma", "collect": ["confirmado"]},
            {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "quem", "clear": ["confirmado"]}},
            {"id": "tchau", "prompt": "Agradeça e diga que um vendedor continua daqui."},
        ],
    }
    flow.update(extra)
    return flow


def make_agent(flows: list[dict[str, Any]], *, fields: dict[str, Any] | None = None, understand=(), speak=(),
               summary=(), clock: Any = None, usage: bool = False, **options: Any):
    """(agent, provider, clock) with a scripted provider and a fake clock at T0."""
    clock = clock or fake_clock(T0)
    provider = mock_provider(understand=list(understand), speak=list(speak), summary=list(summary), usage=usage)
    f = falai().fields(fields if fields is not None else TRIAGE_FIELDS)
    agent = f.agent(name="Ana", provider=provider, clock=clock, flows=[f.flow(x) for x in flows], **options)
    return agent, provider, clock


def codes(result: Any) -> list[str | None]:
    return [o.code for o in result.outcomes]


def texts(result: Any) -> list[str]:
    return [m.text for m in result.messages]


def run_of(session: Any, flow_id: str) -> Any:
    return next((r for r in session.runs if r.flow_id == flow_id), None)


class Host:
    """The page's host loop over a MemoryStore, a MemoryScheduler and a kept transcript."""

    def __init__(self, agent: Any, clock: Any, session_id: str = "s1", store: MemoryStore | None = None) -> None:
        self.agent = agent
        self.clock = clock
        self.session_id = session_id
        self.store = store or MemoryStore()
        self.scheduler = MemoryScheduler()
        self.history: list[dict[str, Any]] = []
        self.sent: list[Any] = []
        self.results: list[Any] = []

    @property
    def session(self) -> Any:
        return self.store.load(self.session_id)

    def handle(self, **input: Any) -> Any:
        while True:
            session = self.store.load(self.session_id)
            r = self.agent.turn(session_id=self.session_id, session=session, history=list(self.history), **input)
            self.results.append(r)
            if not r.changed:
                return r
            try:
                self.store.save(r.session, session.version if session is not None else 0)
            except SessionConflictError:
                continue
            if "message" in input:
                self.history.append(user_message(input["message"]))
            for m in r.messages:
                self.sent.append(m)
                self.history.append(assistant_message(m.text))
            for entry in r.schedule:
                self.scheduler.add(self.session_id, entry)
            return r

    def message(self, text: str, id: str | None = None, **kw: Any) -> Any:
        return self.handle(message=text, id=id, **kw)

    def wake(self, key: str, **kw: Any) -> Any:
        return self.handle(wake=key, **kw)

    def fire_due(self, **kw: Any) -> list[Any]:
        """Fire every wake due at the clock's now, earliest first."""
        return [self.wake(w.key, **kw) for w in self.scheduler.due(self.clock.now())]
