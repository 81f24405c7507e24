"""The running agent: the code agent plus the enabled database flows, reloaded within seconds
for at most one cheap query per check, and conversations that continue by step id."""

from __future__ import annotations

import pytest

from falai_django import conf, host
from falai_django.flows import running
from falai_django.models import Flow, TurnRecord

from . import agents
from .agents import spec

pytestmark = pytest.mark.django_db


def replacing_triagem(thanks: str = "Database flow: thanks, {{data.nome}}!", **steps) -> dict:
    return {
        "id": "triagem", "name": "Triagem (db)", "on": [{"message": []}],
        "steps": steps.get("steps") or [
            {"id": "quem", "kind": "collect", "collect": ["nome"]},
            {"id": "tchau", "kind": "say", "say": thanks},
        ],
    }


def say(sid: str, text: str, n: int):
    return host.handle(sid, {"message": text, "id": f"{sid}-{n}"}, send_inline=True)


def texts(result) -> list[str]:
    return [m.text for m in result.result.messages]


def test_without_database_flows_the_code_agent_runs_as_is():
    assert conf.get_agent() is agents.current_agent()


def test_enabled_flows_are_added_and_disabled_ones_are_not():
    Flow(id="rascunho", spec=spec("rascunho"), enabled=False).save()
    assert [f.id for f in conf.get_agent().flows] == ["triagem"]
    Flow(id="boas_vindas", spec=spec(), enabled=True).save()
    agent = conf.get_agent()
    assert [f.id for f in agent.flows] == ["triagem", "boas_vindas"]
    # Everything else is the code agent's.
    code = agents.current_agent()
    assert agent.provider is code.provider and agent.actions is code.actions and agent.fields is code.fields


def test_position_orders_the_added_flows():
    Flow(id="b", spec=spec("b"), enabled=True, position=2).save()
    Flow(id="a", spec=spec("a"), enabled=True, position=5).save()
    Flow(id="c", spec=spec("c"), enabled=True, position=1).save()
    assert [f.id for f in conf.get_agent().flows] == ["triagem", "c", "b", "a"]


def test_a_database_flow_replaces_the_code_flow_with_its_id_in_its_place():
    Flow(id="extra", spec=spec("extra"), enabled=True, position=-5).save()
    Flow(id="triagem", spec=replacing_triagem(), enabled=True).save()
    agent = conf.get_agent()
    assert [f.id for f in agent.flows] == ["triagem", "extra"]
    assert agent.flow("triagem").steps[1].say == "Database flow: thanks, {{data.nome}}!"


def test_a_conversation_follows_the_new_flow_and_the_old_one_after_disabling():
    sid = "5511000000001"
    assert texts(say(sid, "hi", 1)) == ["[offline] Ask for the person's name."]
    assert texts(say(sid, "João", 2)) == ["Code flow: thanks, João!"]

    flow = Flow(id="triagem", spec=replacing_triagem(), enabled=True)
    flow.save()
    sid2 = "5511000000002"
    say(sid2, "hi", 1)
    assert texts(say(sid2, "Maria", 2)) == ["Database flow: thanks, Maria!"]

    flow.enabled = False
    flow.save()
    sid3 = "5511000000003"
    say(sid3, "hi", 1)
    assert texts(say(sid3, "Ana", 2)) == ["Code flow: thanks, Ana!"]


def test_a_conversation_on_a_step_that_was_edited_continues_by_step_id():
    Flow(id="triagem", spec=replacing_triagem(), enabled=True).save()
    sid = "5511000000010"
    assert texts(say(sid, "hi", 1)) == ["[offline] Ask for the person's name."]
    flow = Flow.objects.get(pk="triagem")
    flow.spec = replacing_triagem(thanks="Edited while you were typing, {{data.nome}}.")
    flow.spec["steps"][0]["prompt"] = "Be brief."
    flow.save()
    assert texts(say(sid, "Bia", 2)) == ["Edited while you were typing, Bia."]


def test_a_step_that_no_longer_exists_ends_the_run_as_step_gone_in_the_run_log():
    Flow(id="triagem", spec=replacing_triagem(), enabled=True).save()
    sid = "5511000000020"
    say(sid, "hi", 1)  # the run now sits on "quem"
    flow = Flow.objects.get(pk="triagem")
    flow.spec = replacing_triagem(steps=[
        {"id": "nome_novo", "kind": "collect", "collect": ["nome"]},
        {"id": "tchau", "kind": "say", "say": "Bye {{data.nome}}"},
    ])
    flow.save()
    say(sid, "Caio", 2)
    record = TurnRecord.objects.filter(conversation_id=sid, input_key=f"{sid}-2").get()
    gone = [o for o in record.outcomes if o.get("code") == "step-gone"]
    assert gone and gone[0]["flowId"] == "triagem" and gone[0]["stepId"] == "quem"
    assert any(e["reason"] for e in record.ended if e["flowId"] == "triagem")


def test_another_process_s_change_is_seen_after_the_reload_interval_for_one_query(
        monkeypatch, django_assert_num_queries):
    clock = [1000.0]
    monkeypatch.setattr(running.time, "monotonic", lambda: clock[0])
    Flow(id="boas_vindas", spec=spec(), enabled=True).save()
    assert [f.id for f in conf.get_agent().flows] == ["triagem", "boas_vindas"]

    # Another process disables the flow: no signal reaches this one.
    Flow.objects.filter(pk="boas_vindas").update(enabled=False, version=2)
    clock[0] += 1.0
    with django_assert_num_queries(0):  # inside the interval: no query at all
        assert [f.id for f in conf.get_agent().flows] == ["triagem", "boas_vindas"]
    clock[0] += 1.5
    with django_assert_num_queries(2):  # the stamp, then (it changed) the flows
        assert [f.id for f in conf.get_agent().flows] == ["triagem"]
    clock[0] += 2.5
    with django_assert_num_queries(1):  # unchanged: the stamp alone
        agent = conf.get_agent()
    assert agent is conf.get_agent()


def test_a_stored_flow_that_no_longer_validates_is_left_out_and_the_rest_runs(caplog):
    Flow(id="boas_vindas", spec=spec(), enabled=True).save()
    Flow(id="aviso", spec=spec("aviso", steps=[
        {"id": "a", "kind": "do", "do": "notify", "with": {"message": "x"}}]), enabled=True).save()
    # The code changed under the stored flow: the action is gone.
    Flow.objects.filter(pk="aviso").update(spec=spec("aviso", steps=[{"id": "a", "kind": "do", "do": "gone"}]))
    running.invalidate()
    assert [f.id for f in conf.get_agent().flows] == ["triagem", "boas_vindas"]
    assert "database flow 'aviso'" in caplog.text and 'unknown action "gone"' in caplog.text


def test_flows_db_off_runs_the_code_agent_alone(settings):
    Flow(id="boas_vindas", spec=spec(), enabled=True).save()
    settings.FALAI = {**settings.FALAI, "FLOWS_DB": False}
    assert [f.id for f in conf.get_agent().flows] == ["triagem"]



def test_with_flows_is_a_checked_copy_sharing_everything_but_the_flows():
    from falai_django.engine.errors import FlowConfigurationError
    from falai_django.engine.index import agent_index

    code = agents.current_agent()
    agent_index(code)  # the code agent's turn index, built once
    merged = code.with_flows([*code.flows, spec("extra")])
    assert [f.id for f in code.flows] == ["triagem"]  # the code agent is untouched
    assert [f.id for f in merged.flows] == ["triagem", "extra"] and merged.flow("extra") is not None
    assert agent_index(merged).by_id.keys() == {"triagem", "extra"}
    assert merged.provider is code.provider and merged.clock is code.clock and merged.idle is code.idle
    bad = spec("ruim")
    bad["steps"][0]["collect"] = ["idade"]
    with pytest.raises(FlowConfigurationError, match='flow "ruim", step "empresa": unknown field "idade"'):
        code.with_flows([*code.flows, bad])
    with pytest.raises(FlowConfigurationError, match="declared twice"):
        code.with_flows([*code.flows, *code.flows])
