"""The Operations page in a real browser (Playwright driving Debian's Chromium) against the live
server: a staff member logs in, follows "Operations" from the admin index and reads the backlog,
the heartbeat, the turns, the two charts and the money table. Saves
test-artifacts/admin-operations.png. Without /usr/bin/chromium the test skips loudly, and with
CI=true it fails instead."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.utils import timezone

from falai_django.llm.types import GenerateOutput
from falai_django.models import Heartbeat, History
from falai_django.observe import metrics
from falai_django.observe.heartbeat import DISPATCHER

from .conftest import make_user, say

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SCREENSHOT = ARTIFACTS / "admin-operations.png"


def seed() -> None:
    say("5511988887777", "oi", "wamid.1")
    say("5511988886666", "oi", "wamid.2")
    now = timezone.now()
    History.objects.create(conversation_id="5511988887777", role="assistant", content="x", at=now,
                           send_status="failed", send_error="131047 Re-engagement message")
    Heartbeat.objects.create(process=DISPATCHER, at=now - timedelta(seconds=2), host="worker-1", pid=77)
    for day_offset, (model, seconds, prompt) in enumerate([("gemini-2.5-flash", 1.2, 4000), ("gpt-4.1-mini", 0.8, 2500)]):
        provider = SimpleNamespace(name="gemini" if day_offset == 0 else "openai", model=model)
        for i in range(20):
            output = GenerateOutput(message="", metadata={"model": model, "promptTokens": prompt,
                                                          "cachedInputTokens": prompt // 4, "completionTokens": 300})
            metrics.model_called(provider, output, None, seconds + i / 20)
    metrics.flush()


@pytest.mark.django_db(transaction=True)
def test_staff_follow_operations_from_the_index_and_read_it(live_server, new_page, settings):
    settings.FALAI = {**settings.FALAI, "MODEL_PRICES": {"gemini-2.5-flash": {"input": 0.30, "output": 2.50},
                                                        "gpt-4.1-mini": [0.40, 0.10, 1.60]}}
    make_user("erin")
    seed()
    page = new_page(width=1400, height=1000)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "erin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")

    page.get_by_role("link", name="Operations", exact=True).click()
    page.wait_for_selector("#falai-operations")
    assert page.url.endswith("/admin/falai_django/operations/")
    assert page.title().startswith("Operations")
    assert page.locator("h1").inner_text().strip() == "Operations"

    assert page.locator("#falai-heartbeat").inner_text().count("worker-1") == 1
    assert "late" not in (page.locator("#falai-heartbeat").get_attribute("class") or "")
    assert page.locator('#falai-turns tr[data-window="hour"] [data-status="done"]').inner_text() == "2"
    for chart in ("#falai-tokens-chart svg", "#falai-latency-chart svg"):
        box = page.locator(chart).bounding_box()
        assert box and box["width"] > 300 and box["height"] > 150, chart
    assert page.locator("#falai-tokens-chart rect.tokens").count() == 2  # one bar part per model today
    assert page.locator("#falai-latency-chart g.latency").count() == 3  # and the test agent's own mock model
    today = timezone.localdate().isoformat()
    assert page.locator(f'#falai-money tr[data-total-day="{today}"] [data-col="conversations"]').inner_text() == "2"
    assert page.locator(f'#falai-money tr[data-total-day="{today}"] [data-col="cost"]').inner_text() != "—"
    assert page.locator('#falai-failed-sends tr[data-code="131047"] [data-col="count"]').inner_text() == "1"
    # the page fits a 1400 px screen without sideways scrolling
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 10_000
