"""Scenario: the page's Triagem flow end to end — fields from understand, maxAsks on `porte`,
a "no" at the confirmation that loops back with `{step, clear}`, then the goodbye."""

from __future__ import annotations

from .kit import T0, Host, codes, make_agent, run_of, texts, triage_flow


def test_triage_with_max_asks_and_a_confirmation_loop():
    agent, provider, clock = make_agent(
        [triage_flow()],
        understand=[
            {"fields": {"nome": "Ana", "empresa": None, "tamanho": None}},      # m1
            {"fields": {"empresa": "ACME"}},                                      # m2
            {"fields": {"tamanho": "uns vinte"}},                                 # m3: not in the enum
            {"fields": {}},                                                       # m4
            {"fields": {}},                                                       # m5
            {"fields": {}},                                                       # m6
            {"fields": {}},                                                       # m7
            {"fields": {}},                                                       # m8
        ],
        speak=[
            {"message": "Oi, Ana! De qual empresa você fala?", "nome": None, "empresa": None},   # m1 quem
            {"message": "Quantas pessoas trabalham na ACME?", "tamanho": None},                # m2 porte
            {"message": "Pode escolher uma faixa: 1-10, 11-50...", "tamanho": None},           # m3 porte again
            {"message": "Ana, da ACME. Está certo?", "confirmado": None},                      # m4 confirma:1
            {"message": "Tudo bem, vamos corrigir.", "confirmado": "não"},                     # m5 no
            {"message": "Agora sim: Ana, da ACME. Certo?", "confirmado": None},                # m6 confirma:2
            {"message": "Certo!", "confirmado": "sim"},                                        # m7 yes
            {"message": "Obrigada! Um vendedor continua daqui."},                              # m7 tchau (drain)
        ],
    )
    host = Host(agent, clock)
    r1 = host.message("oi, sou a Ana", "m1")
    assert r1.llm_calls == 2 and r1.session.data == {"nome": "Ana"}
    assert [m.key for m in r1.messages] == ["triagem#m1:quem:1"]

    r2 = host.message("da ACME", "m2")
    assert [(o.step_id, o.status, o.code) for o in r2.outcomes][:2] == [("quem", "ok", None), ("porte", "ok", None)]
    assert r2.outcomes[0].next is None
    assert run_of(r2.session, "triagem").asked == {"empresa": 1, "tamanho": 1}

    r3 = host.message("uns vinte", "m3")
    assert [(o.code, o.detail, o.run_id) for o in r3.outcomes][0] == ("not-in-enum", "tamanho", None)
    assert run_of(r3.session, "triagem").asked["tamanho"] == 2

    r4 = host.message("não sei dizer", "m4")
    assert [(o.code, o.detail) for o in r4.outcomes][0] == ("max-asks", "tamanho")
    assert [m.key for m in r4.messages] == ["triagem#m1:confirma:1"]

    r5 = host.message("não", "m5")
    assert ("ok", "if", "quem") in [(o.step_id, o.kind, o.next) for o in r5.outcomes]
    assert "confirmado" not in r5.session.data
    run = run_of(r5.session, "triagem")
    assert (run.step_id, run.status, run.visits["confirma"]) == ("confirma", "asking", 2)
    assert "porte" in [o.step_id for o in r5.outcomes if o.code == "max-asks"]

    r6 = host.message("pode perguntar", "m6")
    assert [m.key for m in r6.messages] == ["triagem#m1:confirma:2"]

    r7 = host.message("sim", "m7")
    assert r7.session.data["confirmado"] is True
    assert texts(r7) == ["Certo!"]
    assert run_of(r7.session, "triagem").step_id == "tchau"
    assert codes(r7).count("already-known") == 0
    # `tchau` was reached after this turn's speak call: it answers the next message, then the run ends
    r8 = host.message("obrigado", "m8")
    assert [(m.key, m.text) for m in r8.messages] == [("triagem#m1:tchau:1", "Obrigada! Um vendedor continua daqui.")]
    assert [(e.id, e.reason) for e in r8.ended] == [("triagem#m1", "end")]
    assert r8.session.runs == [] and r8.session.claims == {"triagem:s1:": {"at": T0}}
    assert len(provider.calls) == 16
