"""`Flow`: validation on full_clean and on save (naming flow and step), versions, revert."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from falai_django.models import Flow, FlowVersion

from .agents import spec

pytestmark = pytest.mark.django_db


def bad_step(**step):
    s = spec()
    s["steps"][0] = {"id": "empresa", **step}
    return s


@pytest.mark.parametrize(("step", "what"), [
    ({"kind": "collect", "collect": ["idade"]}, 'unknown field "idade"'),
    ({"kind": "do", "do": "dispara"}, 'unknown action "dispara"'),
    ({"kind": "waitEvent", "wait": {"event": "nada"}}, 'unknown event "nada"'),
    ({"kind": "prompt", "prompt": "x", "tools": ["nope"]}, 'unknown tool "nope"'),
    ({"kind": "if", "if": {"premium": True}}, "premium"),
])
def test_full_clean_names_the_flow_and_step_of_an_unknown_name(step, what):
    flow = Flow(id="boas_vindas", name="B", spec=bad_step(**step))
    with pytest.raises(ValidationError) as caught:
        flow.full_clean()
    [message] = caught.value.message_dict["spec"]
    assert 'flow "boas_vindas", step "empresa"' in message
    assert what in message


def test_the_registries_are_the_code_agents():
    ok = bad_step(kind="do", do="notify", **{"with": {"message": "oi"}})
    Flow(id="boas_vindas", spec=ok).full_clean()
    uses_condition = bad_step(kind="if", **{"if": {"vip": None}})
    Flow(id="boas_vindas", spec=uses_condition).full_clean()


def test_a_bad_spec_saved_from_code_raises_and_saves_nothing():
    with pytest.raises(ValidationError) as caught:
        Flow(id="boas_vindas", spec=bad_step(kind="collect", collect=["idade"])).save()
    assert "spec" in caught.value.message_dict
    assert not Flow.objects.exists() and not FlowVersion.objects.exists()


def test_a_flow_saved_without_a_name_is_called_what_its_spec_says():
    flow = Flow(id="boas_vindas", spec=spec())
    flow.save()
    assert Flow.objects.get(pk="boas_vindas").name == "Boas-vindas" and str(flow) == "Boas-vindas"
    named = Flow(id="outro", name="Meu nome", spec=spec("outro"))
    named.save()
    assert Flow.objects.get(pk="outro").name == "Meu nome"


def test_the_spec_id_must_be_the_rows_id():
    with pytest.raises(ValidationError) as caught:
        Flow(id="outro", spec=spec("boas_vindas")).full_clean()
    assert 'flow "outro"' in caught.value.message_dict["spec"][0]


def test_a_spec_that_is_not_an_object_is_refused():
    with pytest.raises(ValidationError) as caught:
        Flow(id="x", spec=["not", "a", "flow"]).full_clean()
    assert "not a JSON object" in caught.value.message_dict["spec"][0]


def test_a_target_flow_that_exists_nowhere_is_a_warning_not_an_error():
    s = spec()
    s["steps"][1]["then"] = {"flow": "sumiu"}
    flow = Flow(id="boas_vindas", spec=s)
    flow.full_clean()
    assert any("sumiu" in w for w in flow.spec_warnings)
    s["steps"][1]["then"] = {"flow": "triagem"}  # a code flow
    flow.full_clean()
    assert flow.spec_warnings == []


def test_other_database_flows_count_as_known_targets():
    Flow(id="outro", spec=spec("outro"), enabled=True).save()
    s = spec()
    s["steps"][1]["then"] = {"flow": "outro"}
    flow = Flow(id="boas_vindas", spec=s)
    flow.full_clean()
    assert flow.spec_warnings == []


def test_every_save_is_a_version_with_who_and_revert_makes_an_old_one_current(staff):
    flow = Flow(id="boas_vindas", name="v1", spec=spec())
    flow.save(changed_by=staff)
    assert flow.version == 1 and flow.updated_by == staff
    changed = spec()
    changed["steps"][1]["say"] = "Second wording"
    flow.name, flow.spec = "v2", changed
    flow.save()
    assert flow.version == 2
    assert list(flow.versions.values_list("version", "name")) == [(2, "v2"), (1, "v1")]
    assert flow.versions.get(version=1).changed_by == staff
    assert flow.versions.get(version=2).changed_by is None

    flow.revert_to(1, changed_by=staff)
    flow.refresh_from_db()
    assert (flow.version, flow.name, flow.spec) == (3, "v1", spec())
    v3 = flow.versions.get(version=3)
    assert v3.note == "reverted to version 1" and v3.changed_by == staff


def test_reverting_to_a_version_that_no_longer_validates_saves_nothing(settings):
    flow = Flow(id="boas_vindas", spec=bad_step(kind="do", do="notify", **{"with": {"message": "x"}}))
    flow.save()
    flow.spec = spec()
    flow.save()
    # Version 1 names an action the agent has now lost: reverting to it is refused.
    FlowVersion.objects.filter(flow=flow, version=1).update(spec=bad_step(kind="do", do="gone"))
    with pytest.raises(ValidationError):
        flow.revert_to(1)
    assert Flow.objects.get(pk="boas_vindas").version == 2


# ------------------------------------------------ the check and the reset live in flows.saving

def test_clean_refuses_to_pass_a_spec_when_nothing_checks_it():
    """The model reaches the check only through its signal: with the receiver gone (the app's
    `ready()` never ran), a clean is an error, never a bad spec let through."""
    from django.core.exceptions import ImproperlyConfigured

    from falai_django.flows import saving
    from falai_django.models.flows import checking_spec

    assert checking_spec.disconnect(sender=Flow, dispatch_uid="falai_django.flows.check")
    try:
        with pytest.raises(ImproperlyConfigured, match="INSTALLED_APPS"):
            Flow(id="boas_vindas", spec=bad_step(kind="collect", collect=["idade"])).save()
        assert not Flow.objects.exists()
    finally:
        saving.connect()
    with pytest.raises(ValidationError):
        Flow(id="boas_vindas", spec=bad_step(kind="collect", collect=["idade"])).full_clean()


def test_a_refused_save_keeps_the_stored_version_on_the_object():
    flow = Flow(id="boas_vindas", spec=spec())
    flow.save()
    flow.spec = bad_step(kind="collect", collect=["idade"])
    with pytest.raises(ValidationError):
        flow.save()
    assert flow.version == 1 == Flow.objects.get(pk="boas_vindas").version
    assert FlowVersion.objects.filter(flow_id="boas_vindas").count() == 1


def test_a_save_and_a_delete_reach_the_running_agent_of_this_process_at_once(settings):
    """Within FLOWS_RELOAD_S the running agent would keep its cached flows; the save's and the
    delete's receivers make this process read the table again on the next call."""
    from falai_django import conf

    settings.FALAI = {**settings.FALAI, "FLOWS_RELOAD_S": 3600.0}
    assert [f.id for f in conf.get_agent().flows] == ["triagem"]
    flow = Flow(id="boas_vindas", spec=spec(), enabled=True)
    flow.save()
    assert [f.id for f in conf.get_agent().flows] == ["triagem", "boas_vindas"]
    flow.delete()
    assert [f.id for f in conf.get_agent().flows] == ["triagem"]
