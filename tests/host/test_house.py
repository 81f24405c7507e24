"""The seams the package's grouping by domain introduced: the store setting (`FALAI["STORE"]`,
`conf.get_store()`, check E012), the one conversation read model (`host.read_conversation`) and
the one give-back (`handoff.give_back`, which `host.unsilence` is)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from falai_django import conf, handoff, host
from falai_django.checks import check_falai_settings
from falai_django.models import Conversation, Wake
from falai_django.stores.django import DjangoStore

from . import agents

pytestmark = pytest.mark.django_db(transaction=True)

SID = "5511988887777"


class CountingStore(DjangoStore):
    """A DjangoStore subclass a project might configure (here: it counts its calls)."""

    calls: list[str] = []

    def load(self, session_id):
        CountingStore.calls.append(f"load:{session_id}")
        return super().load(session_id)

    def save(self, session, expected_version):
        CountingStore.calls.append(f"save:{session.id}")
        return super().save(session, expected_version)


def counting_store() -> CountingStore:
    return CountingStore()


def with_falai(settings, **extra):
    settings.FALAI = {**settings.FALAI, **extra}
    conf.clear_cache()


def park(session_id: str = SID) -> str:
    """oi -> the name is asked; 'meu nome é Ana' -> the run waits an hour. Returns the wake key."""
    host.handle(session_id, {"message": "oi", "id": "m1"})
    result = host.handle(session_id, {"message": "meu nome é Ana", "id": "m2"})
    (entry,) = result.result.schedule
    return entry.key


# ------------------------------------------------------------------------------ the store setting

def test_the_default_store_is_one_orm_store_built_once():
    store = conf.get_store()
    assert type(store) is DjangoStore
    assert conf.get_store() is store  # built once, not per call


def test_a_configured_store_serves_the_handoff_and_the_read_model(settings):
    with_falai(settings, STORE="host.test_house.CountingStore")
    park()
    CountingStore.calls.clear()
    host.silence(SID, "fora do horário")
    assert f"save:{SID}" in CountingStore.calls  # the handoff's write went through the configured store
    CountingStore.calls.clear()
    host.unsilence(SID)
    assert CountingStore.calls[0] == f"load:{SID}"
    assert host.session_state(SID)["handoff"] is None


def test_a_factory_is_called_and_a_settings_change_builds_the_store_again(settings):
    with_falai(settings, STORE="host.test_house.counting_store")
    first = conf.get_store()
    assert isinstance(first, CountingStore)
    with_falai(settings, STORE="falai_django.stores.django.DjangoStore")
    assert type(conf.get_store()) is DjangoStore


@pytest.mark.parametrize(("path", "says"), [
    ("falai_django.stores.memory.MemoryStore", "builds a MemoryStore, not a DjangoStore"),
    ("host.test_house.NoSuchStore", "cannot be imported"),
])
def test_a_store_that_is_not_the_orm_store_is_refused_by_a_check(settings, path, says):
    with_falai(settings, STORE=path)
    problems = [p for p in check_falai_settings() if p.id == "falai_django.E012"]
    assert len(problems) == 1 and says in problems[0].msg and path in problems[0].msg
    with pytest.raises(SystemCheckError, match="E012"):
        call_command("check")


def test_the_default_store_passes_the_checks():
    assert not [p for p in check_falai_settings() if p.id == "falai_django.E012"]


# ---------------------------------------------------------------------------- the read model

def test_an_unknown_conversation_reads_as_absent():
    read = host.read_conversation("nobody")
    assert (read.exists, read.session, read.handoff, read.wakes, read.invalid) == (False, None, None, [], "")
    assert host.session_state("nobody") is None


def test_a_conversation_reads_with_its_session_handoff_and_queued_wake():
    key = park()
    host.silence(SID, "fora do horário", mode="skip")
    read = host.read_conversation(SID)
    assert read.exists and read.session.data == {"nome": "Ana"} and read.invalid == ""
    assert read.handoff["reason"] == "fora do horário" and read.handoff["mode"] == "skip"
    (wake,) = read.wakes
    assert (wake.key, wake.state, wake.queued) == (key, "pending", True)
    assert wake.entry is not None and wake.entry.key == key


def test_a_stale_queued_wake_is_dropped_and_a_computed_one_has_no_row():
    key = park()
    real = Wake.objects.get(conversation_id=SID, key=key)
    Wake.objects.create(conversation_id=SID, key="stale:key", at=real.at - timedelta(minutes=5))
    real.delete()  # the queue lost the live one (a flushed broker): the session still waits on it
    read = host.read_conversation(SID)
    assert [(w.key, w.state, w.queued) for w in read.wakes] == [(key, "computed", False)]
    state = host.session_state(SID)
    assert [w["key"] for w in state["pending_wakes"]] == [key] and state["queued_wakes"] == []


def test_a_broken_blob_reads_as_invalid_and_is_left_as_stored():
    park()
    Conversation.objects.filter(pk=SID).update(blob={"id": SID, "version": "not a number"})
    read = host.read_conversation(SID)
    assert read.exists and read.session is None and read.invalid
    assert read.blob == {"id": SID, "version": "not a number"}
    assert Conversation.objects.get(pk=SID).blob == {"id": SID, "version": "not a number"}


class Recorder(logging.Handler):
    """The log lines of one logger (the PostgreSQL run turns pytest's logging plugin off)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_an_agent_that_cannot_compute_wakes_shows_the_queue_and_says_why(monkeypatch):
    key = park()
    agent = agents.current_agent()

    def broken(**kwargs):
        raise RuntimeError("the CRM is down")

    monkeypatch.setattr(agent, "pending_wakes", broken)
    recorder = Recorder()
    logger = logging.getLogger("falai_django.host")
    logger.addHandler(recorder)
    try:
        read = host.read_conversation(SID)
    finally:
        logger.removeHandler(recorder)
    assert [(w.key, w.entry) for w in read.wakes] == [(key, None)]
    assert read.wakes_problem == "RuntimeError: the CRM is down"
    assert any(SID in line and "the CRM is down" in line for line in recorder.lines)


# ------------------------------------------------------------------------------- one give-back

def test_unsilence_is_the_give_back_and_reports_each_resumed_start():
    assert host.unsilence is handoff.give_back
    host.handle(SID, {"message": "oi", "id": "m1"})  # the name is asked
    host.silence(SID, "human: maria", owner="maria", mode="understand")
    wait = host.handle(SID, {"message": "meu nome é Ana", "id": "m2"})  # lands while silenced: the run waits
    (entry,) = wait.result.schedule
    agents.clock().advance("1h")
    host.handle(SID, {"wake": entry.key})  # its goodbye is silenced: the run ends there
    seen = []
    saved = host.unsilence(SID, on_resumed=seen.append)
    assert saved.metadata.get("handoff") is None
    (resumed,) = seen  # the flow the handoff silenced, started again
    assert resumed.changed and [s.flow_id for s in resumed.result.started] == ["triagem"]
    assert saved.version == conf.get_store().load(SID).version  # the session after the resumed start
