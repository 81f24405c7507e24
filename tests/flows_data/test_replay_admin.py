"""Issue 50: "Replay recent conversations against this version" on a flow version's page, through
Django's test client. The run goes to django-q2 (in-line here unless a test says otherwise), its
page shows the progress, then each conversation as same / different / needs model with every
turn's parts before and after; all behind the flows' change permission. Nothing a replay does
reaches a conversation."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from falai_django import host
from falai_django.host import jobs
from falai_django.models import Flow, History, ReplayResult, ReplayRun, Session, TurnRecord
from falai_django.replay import runs

from .conftest import SENT

pytestmark = pytest.mark.django_db

BASE = "/admin/falai_django/flow/triagem"


def triagem(tchau: str, *extra: dict) -> dict:
    """The stored flow replacing the code one: ask the name, (extra steps), then say `tchau`."""
    return {"id": "triagem", "name": "Triagem (db)", "on": [{"message": []}],
            "steps": [{"id": "quem", "collect": ["nome"]}, *extra, {"id": "tchau", "say": tchau}]}


@pytest.fixture
def client(staff):
    c = Client()
    c.force_login(staff)
    return c


@pytest.fixture
def flow(staff):
    """Version 1 live, two conversations through it, then version 2 rewording the goodbye."""
    flow = Flow(id="triagem", enabled=True, spec=triagem("DB v1: thanks, {{data.nome}}!"))
    flow.save(changed_by=staff)
    for sid, name in (("c1", "Rui"), ("c2", "Bia")):
        host.handle_message(sid, "hi", id=f"{sid}-1")
        host.handle_message(sid, name, id=f"{sid}-2")
    assert History.objects.filter(conversation_id="c2", role="assistant").last().content == "DB v1: thanks, Bia!"
    flow.spec = triagem("DB v2: obrigado, {{data.nome}}!")
    flow.save(changed_by=staff)
    return flow


def stored() -> dict:
    """Everything a replay must leave alone."""
    return {"sessions": list(Session.objects.order_by("id").values_list("id", "version")),
            "history": History.objects.count(), "turns": TurnRecord.objects.count(), "sent": len(SENT)}


def start(client, version: int, **form) -> tuple[ReplayRun, object]:
    response = client.post(f"{BASE}/versions/{version}/replay/", form)
    assert response.status_code == 302, response.content[:500]
    run = ReplayRun.objects.latest("id")
    assert response["Location"] == f"{BASE}/replays/{run.pk}/"
    return run, response


def test_the_version_page_offers_the_replay_to_whoever_may_change_flows(client, flow):
    page = client.get(f"{BASE}/versions/2/").content.decode()
    assert 'id="falai-replay-start"' in page and 'action="/admin/falai_django/flow/triagem/versions/2/replay/"' in page
    assert "Replay recent conversations against this version" in page


def test_replaying_the_new_version_shows_each_conversation_different_turn_by_turn(client, flow, staff):
    before = stored()
    run, _ = start(client, 2)
    run.refresh_from_db()
    assert (run.state, run.total, run.done, run.same, run.different, run.needs_model, run.errors) == (
        "done", 2, 2, 0, 2, 0, 0)
    assert (run.version, run.requested_by, run.scope, run.limit) == (2, staff, "flow", 50)
    assert stored() == before  # nothing written to the conversations, nothing sent

    results = list(run.results.all())
    assert [(r.conversation_id, r.status, r.turns, r.first_difference) for r in results] == [
        ("c2", "different", 2, 1), ("c1", "different", 2, 1)]
    page = client.get(f"{BASE}/replays/{run.pk}/").content.decode()
    assert 'id="falai-replay-summary"' in page and "2 conversations replayed" in page
    block = page.split('data-conversation="c1"')[1].split("</details>")[0]
    assert 'data-status="different"' in page and "first difference at turn 1" in block
    first, second = block.split('class="falai-turn"')[1:]
    assert 'data-same="true"' in first and "hi" in first and "<tbody>" not in first  # the same turn: one line
    assert 'data-same="false"' in second and "Turn 1 (message): Rui" in second
    changed = re.search(r'<tr data-part="messages" class="changed">(.*?)</tr>', second, re.S).group(1)
    assert "DB v1: thanks, Rui!" in changed.split('class="falai-after"')[0]
    assert "DB v2: obrigado, Rui!" in changed.split('class="falai-after"')[1]
    assert '<tr data-part="codes">' in second  # the same codes: shown, not marked
    assert 'href="/admin/falai_django/conversation/c1/change/"' in block
    # the version page lists it
    listed = client.get(f"{BASE}/versions/2/").content.decode()
    assert f'data-replay="{run.pk}"' in listed and f'href="{BASE}/replays/{run.pk}/"' in listed


def test_replaying_the_version_that_ran_is_the_same_everywhere(client, flow):
    run, _ = start(client, 1)
    run.refresh_from_db()
    assert (run.state, run.same, run.different) == ("done", 2, 0)
    page = client.get(f"{BASE}/replays/{run.pk}/").content.decode()
    assert page.count('data-status="same"') == 2 and 'class="falai-turn"' not in page


def test_a_version_that_asks_the_model_something_new_needs_the_model(client, flow, staff):
    flow.spec = triagem("DB v3: bye {{data.nome}} from {{data.cidade}}", {"id": "onde", "collect": ["cidade"]})
    flow.save(changed_by=staff)
    run, _ = start(client, 3, limit="1")
    run.refresh_from_db()
    assert (run.state, run.total, run.needs_model) == ("done", 1, 1)
    (result,) = run.results.all()
    assert result.status == "needs_model" and result.report["turns"][1]["needs_model"] is True
    page = client.get(f"{BASE}/replays/{run.pk}/").content.decode()
    assert "the recording had no answer for a model call" in page and "1 need the model" in page


def test_scope_any_picks_conversations_a_new_flow_never_ran(client, flow, staff):
    new = Flow(id="novo", spec={"id": "novo", "on": [{"message": []}], "steps": [{"id": "oi", "say": "Novo!"}]})
    new.save(changed_by=staff)
    response = client.post("/admin/falai_django/flow/novo/versions/1/replay/", {"scope": "flow"}, follow=True)
    assert "No conversation matched" in response.content.decode()
    response = client.post("/admin/falai_django/flow/novo/versions/1/replay/", {"scope": "all", "limit": "5"})
    run = ReplayRun.objects.latest("id")
    assert (run.scope, run.total, run.done) == ("all", 2, 2)
    assert {r.conversation_id for r in run.results.all()} == {"c1", "c2"}


def test_bad_form_values_start_nothing_and_say_why(client, flow):
    for form in ({"limit": "0"}, {"limit": "100000"}, {"limit": "many"}, {"scope": "everything"}):
        response = client.post(f"{BASE}/versions/2/replay/", form, follow=True)
        assert response.status_code == 200
        assert any("Not started" in str(m) for m in response.context["messages"]), form
    assert not ReplayRun.objects.exists()
    assert client.post(f"{BASE}/versions/9/replay/").status_code == 404
    assert client.get(f"{BASE}/versions/2/replay/").status_code == 405
    assert client.get(f"{BASE}/replays/12345/").status_code == 404


def test_it_is_behind_the_flows_change_permission(flow, staff):
    viewer = User.objects.create_user("vera", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_flow"))
    c = Client()
    c.force_login(viewer)
    page = c.get(f"{BASE}/versions/2/")
    assert page.status_code == 200 and b"falai-replay-start" not in page.content
    assert c.post(f"{BASE}/versions/2/replay/").status_code == 403
    run = runs.start(flow, 2, user=staff)
    assert c.get(f"{BASE}/replays/{run.pk}/").status_code == 403
    assert c.get(f"{BASE}/replays/{run.pk}/?progress=1").status_code == 403
    assert ReplayRun.objects.count() == 1


def test_the_request_only_queues_a_worker_does_the_replay(client, flow, monkeypatch):
    queued = []
    monkeypatch.setattr(jobs, "enqueue", lambda func, *args: queued.append((func, args)))
    run, _ = start(client, 2)
    assert queued == [("falai_django.tasks.replay_run", (run.pk,))]
    run.refresh_from_db()
    assert (run.state, run.done) == ("queued", 0) and not ReplayResult.objects.exists()
    page = client.get(f"{BASE}/replays/{run.pk}/").content.decode()
    assert "Waiting for a worker" in page and 'id="falai-replay-bar"' in page
    assert client.get(f"{BASE}/replays/{run.pk}/?progress=1").json() == {
        "state": "queued", "finished": False, "total": 0, "done": 0, "same": 0, "different": 0, "needs_model": 0,
        "errors": 0, "error": "", "stalled_s": None}

    from falai_django import tasks

    assert tasks.replay_run(run.pk) == "done"
    progress = client.get(f"{BASE}/replays/{run.pk}/?progress=1").json()
    assert (progress["state"], progress["finished"], progress["done"], progress["different"]) == ("done", True, 2, 2)
    assert tasks.replay_run(run.pk) == "done"  # delivered twice: left alone
    assert ReplayResult.objects.filter(run=run).count() == 2


def test_a_worker_that_stopped_mid_run_is_visible_and_a_retry_starts_over(client, flow, monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda func, *args: None)
    run, _ = start(client, 2)
    long_ago = timezone.now() - timedelta(minutes=20)
    ReplayRun.objects.filter(pk=run.pk).update(state="running", total=2, done=1, progress_at=long_ago)
    ReplayResult.objects.create(run=run, position=0, conversation_id="c2", status="different", turns=2)
    page = client.get(f"{BASE}/replays/{run.pk}/").content.decode()
    note = re.search(r'<p class="errornote" id="falai-replay-stalled"([^>]*)>', page).group(1)
    assert "hidden" not in note and "1 of 2 conversations replayed" in page
    assert 'var running = "DONE of TOTAL conversations replayed…";' in page  # the poll's sentence
    assert client.get(f"{BASE}/replays/{run.pk}/?progress=1").json()["stalled_s"] >= 20 * 60

    from falai_django import tasks

    assert tasks.replay_run(run.pk) == "done"  # django-q2's retry: from the start, no result twice
    run.refresh_from_db()
    assert (run.done, run.different) == (2, 2) and run.results.count() == 2


def test_a_worker_whose_run_was_started_over_by_another_stops_and_writes_nothing(client, flow, monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda func, *args: None)
    run, _ = start(client, 2)
    real, outcomes = runs._replay_one, []

    def first_conversation_then_handed_out_again(*args):
        answer = real(*args)
        if not outcomes:  # django-q2 hands the task to a second worker while this one still runs
            outcomes.append("second worker")
            outcomes[0] = runs.execute(run.pk)
        return answer

    monkeypatch.setattr(runs, "_replay_one", first_conversation_then_handed_out_again)
    assert runs.execute(run.pk) == "superseded" and outcomes == ["done"]
    run.refresh_from_db()
    assert (run.state, run.total, run.done, run.different) == ("done", 2, 2, 2)
    assert list(run.results.values_list("position", "conversation_id")) == [(0, "c2"), (1, "c1")]


def test_a_broker_that_is_away_fails_the_run_visibly(client, flow, monkeypatch, caplog):
    def away(func, *args):
        raise ConnectionError("broker is away")

    monkeypatch.setattr(jobs, "enqueue", away)
    with caplog.at_level(logging.ERROR, logger="falai_django.replay"):
        run, _ = start(client, 2)
    run.refresh_from_db()
    assert run.state == "failed" and "could not queue the replay for a worker: ConnectionError" in run.error
    assert any(f"replay {run.pk} of flow triagem v2 failed" in r.getMessage() for r in caplog.records)
    page = client.get(f"{BASE}/replays/{run.pk}/").content.decode()
    assert 'id="falai-replay-error"' in page and "broker is away" in page


def test_a_version_that_no_longer_fits_the_agent_fails_with_the_flow_and_step(client, flow):
    from falai_django.models import FlowVersion

    FlowVersion.objects.filter(flow=flow, version=1).update(spec=triagem("x", {"id": "idade", "collect": ["idade"]}))
    run, _ = start(client, 1)
    run.refresh_from_db()
    assert run.state == "failed" and 'step "idade"' in run.error and "idade" in run.error
    assert not run.results.exists()
    assert 'step &quot;idade&quot;' in client.get(f"{BASE}/replays/{run.pk}/").content.decode()


def test_a_conversation_that_cannot_be_replayed_is_listed_and_the_others_go_on(client, flow, monkeypatch):
    real = runs.case_of

    def broken(session_id):
        if session_id == "c2":
            raise RuntimeError("a damaged run-log row")
        return real(session_id)

    monkeypatch.setattr(runs, "case_of", broken)
    run, _ = start(client, 2)
    run.refresh_from_db()
    assert (run.state, run.done, run.errors, run.different) == ("done", 2, 1, 1)
    bad = run.results.get(conversation_id="c2")
    assert bad.status == "error" and bad.error == "RuntimeError: a damaged run-log row"
    page = client.get(f"{BASE}/replays/{run.pk}/").content.decode()
    assert "1 could not be replayed" in page and "a damaged run-log row" in page


def test_the_runs_count_in_the_metrics(client, flow, monkeypatch):
    from falai_django.observe import metrics

    counted = []
    monkeypatch.setattr(metrics, "inc", lambda name, amount=1.0, **labels: counted.append((name, labels)))
    start(client, 2)
    monkeypatch.setattr(jobs, "enqueue", lambda func, *args: (_ for _ in ()).throw(OSError("down")))
    start(client, 2)
    assert [c for c in counted if c[0] == "falai_replay_runs_total"] == [
        ("falai_replay_runs_total", {"result": "done"}), ("falai_replay_runs_total", {"result": "failed"})]
