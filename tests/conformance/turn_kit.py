"""Helpers for the conformance suite (written from the spec alone)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from falai_django import falai
from falai_django.testing import fake_clock, mock_provider

T0 = "2026-09-20T10:00:00.000Z"
T0_MS = int(datetime(2026, 9, 20, 10, tzinfo=UTC).timestamp() * 1000)

MIN = 60_000
HOUR = 3_600_000
DAY = 86_400_000

FIELDS: dict[str, Any] = {
    "nome": {"type": "string", "ask": "Pergunte o nome."},
    "empresa": {"type": "string", "ask": "Pergunte a empresa."},
    "tamanho": {"type": "string", "enum": ["1-10", "11-50", "51-200", "200+"], "ask": "Pergunte o porte."},
    "confirmado": {"type": "boolean", "ask": "Pergunte se está certo."},
    "idade": {"type": "integer", "ask": "Pergunte a idade."},
    "valor": {"type": "number", "ask": "Pergunte o valor."},
}


def ms(iso_or_dt: Any) -> int:
    if isinstance(iso_or_dt, str):
        iso_or_dt = datetime.fromisoformat(iso_or_dt.replace("Z", "+00:00"))
    return int(iso_or_dt.timestamp() * 1000)


def iso(ms_: int) -> str:
    dt = datetime.fromtimestamp(ms_ / 1000, tz=UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class World:
    """An agent with a fake clock and a scripted provider."""

    def __init__(self, flows: list[dict], *, fields: dict | None = None, understand=(), speak=(), summary=(),
                 start: str = T0, usage: bool = False, **options: Any) -> None:
        self.clock = fake_clock(start)
        self.f = falai().fields(fields if fields is not None else FIELDS)
        self.provider = mock_provider(understand=list(understand), speak=list(speak), summary=list(summary),
                                      usage=usage)
        events = dict(options.pop("events", {}) or {})
        for fl in flows:
            for t in fl.get("on", []) or []:
                if isinstance(t, dict) and "event" in t:
                    events.setdefault(t["event"], {})
            for st in fl.get("steps", []):
                if isinstance(st.get("wait"), dict):
                    events.setdefault(st["wait"]["event"], {})
        options["events"] = events
        self.agent = self.f.agent(name="Ana", provider=self.provider, clock=self.clock,
                                  flows=[self.f.flow(fl) for fl in flows], **options)
        self.session = None

    def turn(self, keep: bool = True, **kwargs: Any):
        if "session" not in kwargs:
            kwargs["session"] = self.session
        kwargs.setdefault("session_id", "s1")
        r = self.agent.turn(**kwargs)
        check_invariants(r)
        if keep and r.changed:
            self.session = r.session
        return r

    def say(self, text: str, id: str | None = None, **kw: Any):
        return self.turn(message=text, id=id, **kw)

    def understand(self, *entries):
        self.provider.add("understand", *entries)

    def speak(self, *entries):
        self.provider.add("speak", *entries)

    def names(self) -> list[str]:
        return [c.schema_name for c in self.provider.calls]

    def run(self, flow_id: str):
        assert self.session is not None
        for r in self.session.runs:
            if r.flow_id == flow_id:
                return r
        return None


def codes(r) -> list[str | None]:
    return [o.code for o in r.outcomes]


def line(r, code: str):
    found = [o for o in r.outcomes if o.code == code]
    assert found, f"no {code!r} line in {[(o.kind, o.status, o.code) for o in r.outcomes]}"
    return found[0]


def check_invariants(r) -> None:
    """Rules that hold after every turn (engine-turn.md §2.2-§2.4, §3.10)."""
    runs = r.session.runs
    assert sum(1 for x in runs if x.status == "asking") <= 1, "more than one asking run at rest"
    for x in runs:
        assert x.status in ("asking", "waiting", "suspended"), f"run {x.id} at rest is {x.status}"
        if x.status == "waiting":
            assert x.waiting is not None and x.waiting.key and x.waiting.until
        else:
            assert x.waiting is None
        if x.status == "suspended":
            assert x.suspended_at is not None
        else:
            assert x.suspended_at is None
        assert len(x.outcomes) <= 50
    ids = [x.id for x in runs]
    assert len(ids) == len(set(ids))
    pairs = [(x.flow_id, x.anchor) for x in runs]
    assert len(pairs) == len(set(pairs)), "two live runs of one flow+anchor"
    from falai_django import OUTCOME_MESSAGES
    for o in r.outcomes:
        assert (o.code is None) == (o.message is None)
        assert o.code is None or o.message == OUTCOME_MESSAGES[o.code]
        assert o.at
    for sk in r.skipped:
        assert sk.message == OUTCOME_MESSAGES[sk.code]
    for m in r.messages:
        assert m.kind in ("ai", "verbatim") and m.text
    for e in r.ended:
        assert e.reason in ("end", "flow", "reset", "skipped", "failed", "replaced")
    assert len(r.session.inputs) <= 50
    if r.usage is not None:
        assert r.llm_calls > 0
