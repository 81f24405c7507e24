"""hypothesis over the Django host: the turn fuzzer's random agents and inputs, played through
`host.handle` (the durable loop) instead of a bare `turn()`.

After every input the host's tables must agree with what the turn decided:

- the stored row is the turn's session at the version the host reports (one bump per changed
  turn, none otherwise) and loads cleanly;
- the input has exactly one run-log row, whose status matches (`done` / `unchanged` / `retry`);
- every emitted message is one outbound history row (unique emission key and idempotency key),
  every user message one inbound row; unchanged turns write neither;
- every scheduled wake is a pending `Wake` row, the one it `replaces` is gone, and a fired wake
  is marked done;
- nothing raises out of the host except the documented ProviderError path (parked: `retry`).

Examples: FALAI_FUZZ_EXAMPLES // 4 (default 30).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from security import kit

from falai_django import FlowConfigurationError
from falai_django.engine.jstime import to_iso
from falai_django.testing import fake_clock

from .test_turn_fuzz import SID, kwargs_for
from .world import FuzzProvider, build_agent, flows, inputs

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = max(5, int(os.environ.get("FALAI_FUZZ_EXAMPLES", "120")) // 4)
IN_CI = os.environ.get("CI", "").lower() == "true"


def _reset_tables() -> None:
    from falai_django.models import Conversation, HistoryItem, TurnRecord, Wake

    HistoryItem.objects.all().delete()
    Wake.objects.all().delete()
    TurnRecord.objects.all().delete()
    Conversation.objects.all().delete()


def _to_host_input(kwargs: dict) -> tuple[dict, dict]:
    turn_input = {k: kwargs[k] for k in ("message", "id", "at", "wake", "event", "key", "payload", "hop", "start")
                  if kwargs.get(k) is not None}
    options = {k: kwargs[k] for k in ("silenced", "context", "anchors", "claims") if kwargs.get(k) is not None}
    options.setdefault("context", None)
    return turn_input, options


@pytest.fixture
def host_settings(settings):
    from django_q.conf import Conf

    from falai_django import conf

    # A parked input stays parked for the rest of an example: with the default test delay (10 ms)
    # it falls due during the next `handle`, which then runs it first (inputs run in order,
    # host/ordering.py), and which input wrote what would hang on the wall clock.
    settings.FALAI = kit.falai_settings(TURN_RETRY_BASE_S=3600.0)
    saved, Conf.SYNC = Conf.SYNC, True
    conf.clear_cache()
    yield
    Conf.SYNC = saved
    conf.clear_cache()


@settings(max_examples=EXAMPLES, deadline=None, derandomize=IN_CI, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_host_tables_agree_with_every_turn(host_settings, data):
    from falai_django import host
    from falai_django.models import HistoryItem, TurnRecord, Wake
    from falai_django.stores.django import DjangoStore

    _reset_tables()
    provider = FuzzProvider(failure_rate=data.draw(st.sampled_from([0.0, 0.2]), label="failure_rate"))
    clock = fake_clock("2026-09-20T10:00:00Z")
    try:
        agent = build_agent(data.draw(flows(), label="flows"), provider, clock, idle=None,
                            with_business_hours=False)
    except FlowConfigurationError:
        assume(False)
    kit.reset(agent)
    store = DjangoStore()
    state = {"n": 0, "message_ids": [], "event_keys": [], "start_keys": [], "scheduled": [],
             "ever_scheduled": set()}
    version = 0
    for n, op in enumerate(data.draw(inputs(data.draw(st.integers(2, 8))), label="inputs")):
        state["n"] = n
        if op["advance"]:
            clock.advance(op["advance"])
        session = store.load(SID)
        kwargs = kwargs_for(op, state, session, agent)
        if kwargs is None:
            continue
        if "wake" in kwargs:
            due = [e.at for e in state["scheduled"] if e.key == kwargs["wake"]]
            if due and due[0] > clock.now():
                clock.set(to_iso(due[0]))
        turn_input, options = _to_host_input(kwargs)
        provider.reset(f"h{n}")
        before_items = HistoryItem.objects.count()
        before_turns = TurnRecord.objects.count()
        result = host.handle(SID, turn_input, agent=agent, **options)
        event(f"{op['kind']}: {result.status}")

        assert TurnRecord.objects.count() == before_turns + 1, "one run-log row per input"
        record = TurnRecord.objects.get(pk=result.turn_id)
        assert record.status == result.status
        if result.result is not None:  # the run log mirrors the turn's result for the admin
            r = result.result
            assert (record.started, record.ended, record.outcomes, record.skipped) == (
                [x.to_json() for x in r.started], [x.to_json() for x in r.ended],
                [x.to_json() for x in r.outcomes], [x.to_json() for x in r.skipped]), "run log"
        assert result.status in ("done", "unchanged", "retry"), (result.status, result.error)
        loaded = store.load(SID)
        if result.status == "done":
            version += 1
            r = result.result
            assert result.version == version and loaded.version == version
            assert loaded.to_json() == {**r.session.to_json(), "version": version}
            outbound = HistoryItem.objects.filter(turn_id=record.pk, role="assistant")
            assert [(i.message_key, i.content) for i in outbound.order_by("id")] == [
                (m.key, m.text) for m in r.messages]
            inbound = HistoryItem.objects.filter(turn_id=record.pk, role="user").count()
            assert inbound == (1 if "message" in turn_input else 0)
            for entry in r.schedule:
                wake = Wake.objects.get(conversation_id=SID, key=entry.key)
                assert wake.at == entry.at and wake.state == "pending"
                if entry.replaces and entry.replaces != entry.key:
                    assert not Wake.objects.filter(conversation_id=SID, key=entry.replaces).exists()
            replaced = {e.replaces for e in r.schedule if e.replaces}
            state["scheduled"] = [e for e in state["scheduled"] if e.key not in replaced] + list(r.schedule)
        else:
            assert HistoryItem.objects.count() == before_items, "an unchanged or parked input wrote history"
            assert (loaded.version if loaded else 0) == version
        if "wake" in turn_input and result.status != "retry":
            fired = Wake.objects.filter(conversation_id=SID, key=turn_input["wake"]).first()
            assert fired is None or fired.state == "done" or fired.key in {e.key for e in (
                result.result.schedule if result.result else [])}
        keys = list(HistoryItem.objects.filter(role="assistant").values_list("emission_key", "idempotency_key"))
        assert len({k for k, _ in keys}) == len(keys) and len({i for _, i in keys}) == len(keys)
