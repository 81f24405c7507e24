"""The turn's context on WhatsApp: the channel's details, over the project's own FALAI["CONTEXT"]."""

from __future__ import annotations

import pytest

from falai_django import conf
from falai_django.host.inputs import UNSET
from falai_django.host.turns import context_for

DETAILS = {"whatsapp": {"type": "text", "wa_id": "5511", "profile_name": "Bia"}}


def crm(session_id, session, turn_input):
    return {"customer": {"id": session_id, "plan": "pro"}}


class Typed:
    plan = "pro"


def typed(session_id, session, turn_input):
    return Typed()


@pytest.fixture
def builder(settings):
    def use(path):
        settings.FALAI = {**settings.FALAI, "CONTEXT": path}
        conf.clear_cache()
    return use


def test_without_a_builder_the_context_is_the_channels(builder):
    builder(None)
    assert context_for("5511", None, {}, DETAILS) == DETAILS


def test_the_channels_details_are_added_to_the_projects_context(builder):
    builder("whatsapp.test_context.crm")
    assert context_for("5511", None, {}, DETAILS) == {"customer": {"id": "5511", "plan": "pro"}, **DETAILS}


def test_a_typed_project_context_is_kept_as_it_is(builder):
    builder("whatsapp.test_context.typed")
    assert isinstance(context_for("5511", None, {}, DETAILS), Typed)


def test_a_callers_own_context_still_wins(builder):
    builder("whatsapp.test_context.crm")
    assert context_for("5511", None, {}, {"whatsapp": {}, "other": 1}) == {"whatsapp": {}, "other": 1}
    assert context_for("5511", None, {}, {"anything": True}) == {"anything": True}
    assert context_for("5511", None, {}, UNSET) == {"customer": {"id": "5511", "plan": "pro"}}
