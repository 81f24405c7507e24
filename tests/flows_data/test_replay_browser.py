"""Issue 50 in a real browser (Playwright driving Debian's Chromium, JavaScript on) against the live
server: from a flow's page, open the new version, ask to replay the recent conversations against
it, watch the page wait for the worker and follow its progress, then read each conversation's
result and the turn that changed side by side. The worker is a thread here (`tasks.replay_run`
started once the page is waiting), so the page's polling is what shows the result. Saves
test-artifacts/flows-replay.png. Without /usr/bin/chromium the test skips loudly, and with
CI=true it fails instead."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from falai_django import host
from falai_django.host import jobs
from falai_django.models import Flow, History, ReplayRun

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def triagem(tchau: str) -> dict:
    return {"id": "triagem", "name": "Triagem (db)", "on": [{"message": []}],
            "steps": [{"id": "quem", "collect": ["nome"]}, {"id": "tchau", "say": tchau}]}


@pytest.mark.django_db(transaction=True)
def test_replay_a_new_version_from_its_page_and_read_the_differences(live_server, new_page, staff, monkeypatch):
    flow = Flow(id="triagem", enabled=True, spec=triagem("Thanks, {{data.nome}}!"))
    flow.save(changed_by=staff)
    for sid, name in (("5511900000011", "Rui"), ("5511900000012", "Bia"), ("5511900000013", "Caio")):
        host.handle_message(sid, "hi", id=f"{sid}-1")
        host.handle_message(sid, name, id=f"{sid}-2")
    flow.spec = triagem("Obrigado, {{data.nome}}! Até logo.")
    flow.save(changed_by=staff, note="goodbye in Portuguese")
    sent_before = History.objects.count()

    queued: list[int] = []
    monkeypatch.setattr(jobs, "enqueue", lambda func, *args: queued.append(args[0]))  # the worker comes later

    page = new_page(width=1400, height=1000)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/falai_django/flow/triagem/change/")
    page.fill("#id_username", "flora")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#falai-versions")
    page.click("#falai-versions tr[data-version='2'] a")
    page.wait_for_selector("#falai-replay-start")
    page.fill("#falai-replay-limit", "10")
    page.get_by_role("button", name="Replay recent conversations against this version").click()

    # The request only queued it: the page waits for a worker, polling.
    page.wait_for_selector("#falai-replay-bar")
    assert "Waiting for a worker" in page.locator("#falai-replay-count").inner_text()
    (run_id,) = queued
    assert ReplayRun.objects.get(pk=run_id).state == "queued"

    from falai_django import tasks

    worker = threading.Thread(target=tasks.replay_run, args=(run_id,))
    worker.start()
    worker.join(timeout=30)
    # The page's poll sees the run finish and reloads with the results.
    page.wait_for_selector("#falai-replay-summary")
    assert "3 conversations replayed" in page.locator("#falai-replay-summary").inner_text()
    rows = page.locator("details.falai-conversation")
    assert rows.count() == 3
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.status)")) == {"different"}

    caio = page.locator("details[data-conversation='5511900000013']")
    assert caio.get_attribute("open") is not None
    changed = caio.locator("table[data-turn='1'] tr[data-part='messages']")
    assert "changed" in changed.get_attribute("class")
    assert changed.locator("td.falai-before").inner_text().strip() == "Thanks, Caio!"
    assert changed.locator("td.falai-after").inner_text().strip() == "Obrigado, Caio! Até logo."
    # side by side: the after column sits to the right of the before column, on the same row
    before_box = changed.locator("td.falai-before").bounding_box()
    after_box = changed.locator("td.falai-after").bounding_box()
    assert after_box["x"] > before_box["x"] + before_box["width"] - 1 and abs(after_box["y"] - before_box["y"]) < 2
    # the unchanged parts are there, unmarked; the first turn is one line
    assert caio.locator("table[data-turn='1'] tr[data-part='codes']").get_attribute("class") is None
    assert caio.locator("table[data-turn='0']").get_attribute("data-same") == "true"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "flows-replay.png"), full_page=True)
    assert History.objects.count() == sent_before  # nothing sent or written by the replay

    # The version page lists the finished run.
    page.goto(f"{live_server.url}/admin/falai_django/flow/triagem/versions/2/")
    assert page.locator(f"#falai-replays tr[data-replay='{run_id}'] td").nth(2).inner_text() == "Done"
