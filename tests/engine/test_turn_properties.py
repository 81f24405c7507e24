"""Property tests over random input sequences (hypothesis): at most one run asking at rest,
a replay mints identical keys, `changed: False` leaves the session as it was, and no run
lives without its claim."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios.kit import TRIAGE_FIELDS, triage_flow

from falai_django import falai
from falai_django.llm.types import BaseProvider, GenerateInput, GenerateOutput
from falai_django.testing import fake_clock

RETOMAR = {"id": "retomar", "name": "Retomar", "on": [{"silence": "1h"}],
           "steps": [{"id": "lembra", "prompt": "Retome."}, {"id": "w", "wait": "2h", "else": "end"},
                     {"id": "tchau", "say": "Tchau"}]}
EVENTO = {"id": "evento", "name": "Evento", "on": [{"event": "ping", "after": "30m"}],
          "steps": [{"id": "oi", "say": "Oi {{input.n}}"}, {"id": "pergunta", "prompt": "Pergunte.", "collect": ["nome"]}]}
MENCAO = {"id": "mencao", "name": "Menção", "on": [{"mention": ["fala de preço"], "repeat": "always"}],
          "steps": [{"id": "preco", "say": "R$ 99"}, {"id": "w", "wait": "5s"}, {"id": "p", "prompt": "Ofereça ajuda."}]}
CAMPANHA = {"id": "campanha", "name": "Campanha",
            "steps": [{"id": "abre", "say": "Oferta!"}, {"id": "espera", "wait": "1h", "else": {"flow": "triagem"}}]}


class Oracle(BaseProvider):
    """Deterministic answers: a function of the request and of the current `mood`."""

    name = "oracle"

    def __init__(self) -> None:
        self.mood = 0

    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        props = input.parameters.json_schema.get("properties", {})
        if input.parameters.schema_name == "understand":
            out: dict = {}
            if "flows" in props:
                out["flows"] = {k: (self.mood * 37) % 101 for k in props["flows"]["properties"]}
            if "mentions" in props:
                out["mentions"] = {k: self.mood % 2 == 0 for k in props["mentions"]["properties"]}
            if "fields" in props:
                out["fields"] = {k: ("x" if self.mood % 3 == 0 else None) for k in props["fields"]["properties"]}
            return GenerateOutput(message="", structured=out)
        out = {k: None for k in props}
        for i, k in enumerate(props):
            if k != "message" and (self.mood + i) % 2 == 0:
                out[k] = "11-50" if k == "tamanho" else ("sim" if k == "confirmado" else "v")
        out["message"] = "" if self.mood % 7 == 6 else f"resposta {self.mood}"
        return GenerateOutput(message=out["message"], structured=out)


def build():
    clock = fake_clock("2026-09-20T10:00:00Z")
    oracle = Oracle()
    f = falai().fields(TRIAGE_FIELDS)
    agent = f.agent(name="Ana", provider=oracle, clock=clock, events={"ping": {}},
                    flows=[f.flow(triage_flow()), f.flow(RETOMAR), f.flow(EVENTO), f.flow(MENCAO),
                           f.flow(CAMPANHA)])
    return agent, oracle, clock


op = st.one_of(
    st.tuples(st.just("message"), st.integers(0, 6), st.booleans()),
    st.tuples(st.just("wake"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("event"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("start"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from(["5m", "31m", "1h", "2h"]), st.booleans()),
)


def input_of(kind, arg, flag, n, session, pending):
    if kind == "message":
        return {"message": f"msg {arg}", "id": f"m{arg}" if flag else f"u{n}",
                "silenced": ({"reason": "janela", "skip": True} if arg == 5 else ("humano" if arg == 6 else None))}
    if kind == "wake":
        keys = [e.key for e in pending]
        if keys and flag:
            return {"wake": keys[arg % len(keys)]}
        return {"wake": f"stale:{arg}"}
    if kind == "event":
        return {"event": "ping", "key": f"e{arg}", "payload": {"n": arg}}
    return {"start": {"flow": "campanha", "key": f"c{arg}"}}


def keys_of(r):
    return ([m.key for m in r.messages], [e.key for e in r.schedule], [o.key for o in r.outcomes],
            [s.run_id for s in r.started], [x.id for x in r.session.runs])


@settings(max_examples=int(__import__("os").environ.get("FALAI_TURN_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=25))
def test_invariants_over_random_inputs(ops):
    agent, oracle, clock = build()
    twin, twin_oracle, twin_clock = build()
    session = None
    pending = []
    for n, (kind, arg, flag) in enumerate(ops):
        if kind == "advance":
            clock.advance(arg)
            twin_clock.advance(arg)
            continue
        oracle.mood = twin_oracle.mood = n
        data = input_of(kind, arg, flag, n, session, pending)
        before = session.to_json() if session is not None else None
        r = agent.turn(session_id="s1", session=session, **data)
        replay = twin.turn(session_id="s1", session=session, **data)
        assert keys_of(r) == keys_of(replay)
        assert r.session.to_json() == replay.session.to_json()
        if session is not None:
            assert session.to_json() == before  # the input is never mutated
        if not r.changed:
            assert r.messages == [] and r.schedule == []
            if session is not None:
                assert r.session == session and r.session.to_json() == before
            continue
        session = r.session
        asking = [x for x in session.runs if x.status == "asking"]
        assert len(asking) <= 1
        for run in session.runs:
            assert run.dedupe_key in session.claims
        pending = [e for e in pending if any(x.waiting and x.waiting.key == e.key for x in session.runs)]
        pending += list(r.schedule)
