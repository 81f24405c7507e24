"""Scenario: an event trigger with `after`: the run parks before its first step, a re-fire
with a new key replaces it, a replay of a key is refused, and the kept run's wake runs it."""

from __future__ import annotations

from falai_django.engine.jstime import to_iso

from .kit import T0_MS, Host, codes, make_agent

HOUR = 3_600_000
PROPOSTA = {"id": "proposta", "name": "Proposta", "on": [{"event": "proposta_enviada", "after": "1h"}],
            "steps": [{"id": "pergunta", "say": "Conseguiu ver a proposta {{input.numero}}?"},
                      {"id": "espera", "wait": "1d"},
                      {"id": "marca", "do": "tag"}]}


def test_after_parks_replacement_and_the_wake():
    tags = []
    agent, provider, clock = make_agent([PROPOSTA], fields={}, events={"proposta_enviada": {}},
                                        actions={"tag": {"parameters": {}, "run": lambda p, ctx: tags.append(ctx.key)
                                                         or {"ok": True}}})
    host = Host(agent, clock)
    r1 = host.handle(event="proposta_enviada", payload={"numero": "P-1"}, key="prop:1")
    assert [(o.code, o.until) for o in r1.outcomes] == [("awaiting-trigger", "2026-09-20T11:00:00.000Z")]
    clock.advance("30m")
    r2 = host.handle(event="proposta_enviada", payload={"numero": "P-2"}, key="prop:2")
    assert [(e.id, e.reason) for e in r2.ended] == [("proposta#prop:1", "replaced")]
    assert [e.key for e in r2.schedule] == [f"proposta#prop:2:start:{T0_MS + HOUR + HOUR // 2}"]
    assert r2.ended[0].outcomes[0].code == "awaiting-trigger"
    r3 = host.handle(event="proposta_enviada", payload={"numero": "P-2"}, key="prop:2")
    assert r3.changed is True and [s.code for s in r3.skipped] == ["already-claimed"]

    clock.advance("30m")
    (stale,) = host.fire_due()
    assert stale.changed is False and codes(stale) == ["stale-wake"]
    clock.advance("30m")
    (w,) = host.fire_due()
    assert [m.text for m in w.messages] == ["Conseguiu ver a proposta P-2?"]
    assert [e.key for e in w.schedule] == [f"proposta#prop:2:espera:{T0_MS + HOUR + HOUR // 2 + 86_400_000}"]
    clock.advance("1d")
    (w2,) = host.fire_due()
    assert codes(w2) == ["no-reply", None] and tags == ["proposta#prop:2:marca:1"]
    assert to_iso(clock.now()) == "2026-09-21T11:30:00.000Z"
