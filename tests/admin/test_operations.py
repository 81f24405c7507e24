"""The admin's Operations page: linked from the index, staff only, and every figure follows what
the tables say — the backlog, overdue wakes, the dispatcher's heartbeat, turns in the last hour
and day, model calls, latency and tokens by model per day, money with FALAI["MODEL_PRICES"], and
failed sends by channel code. (The page in Chromium: test_operations_browser.py.)"""

from __future__ import annotations

import re
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.test import Client
from django.utils import timezone

from falai_django.engine.errors import ProviderError
from falai_django.llm.types import GenerateOutput
from falai_django.models import DailyTotal, Heartbeat, History, Session, TurnRecord, Wake
from falai_django.observe import metrics, operations
from falai_django.observe.heartbeat import DISPATCHER

from .conftest import admin_client, make_user, say

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "/admin/falai_django/operations/"


@pytest.fixture
def staff(db):
    return admin_client(make_user("carol"))  # staff, no permission of the app's


def cell(html: str, table_row: str, col: str) -> str:
    """The text of the cell `data-col|data-status=col` in the row whose opening tag holds `table_row`."""
    row = re.search(rf"<tr {re.escape(table_row)}[^>]*>(.*?)</tr>", html, re.S)
    assert row, f"no row {table_row}"
    found = re.search(rf'data-(?:col|status)="{col}">(.*?)</td>', row.group(1), re.S)
    assert found, f"no cell {col} in {table_row}"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def model_call(seconds: float, *, model: str = "gemini-2.5-flash", prompt: int = 0, cached: int = 0,
               completion: int = 0, error: BaseException | None = None) -> None:
    """One model call as llm.calling reports it to the metrics."""
    provider = SimpleNamespace(name="gemini", model=model)
    output = None if error else GenerateOutput(message="", metadata={
        "model": model, "promptTokens": prompt, "cachedInputTokens": cached, "completionTokens": completion})
    metrics.model_called(provider, output, error, seconds)


# ---------------------------------------------------------------------------------------------
# Where it is and who sees it
# ---------------------------------------------------------------------------------------------


def test_the_admin_index_links_to_it_and_it_is_titled_operations(staff):
    index = staff.get("/admin/").content.decode()
    assert f'href="{PAGE}"' in index
    assert re.search(rf'<a href="{PAGE}"[^>]*>\s*Operations\s*</a>', index)
    response = staff.get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>Operations | " in html
    assert re.search(r"<h1[^>]*>Operations</h1>", html)


def test_only_staff_see_it():
    anonymous = Client().get(PAGE)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    customer = User.objects.create_user("dave", "d@example.com", "pw")  # not staff
    response = admin_client(customer).get(PAGE)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert f'href="{PAGE}"' not in admin_client(customer).get("/admin/", follow=True).content.decode()


def test_it_offers_no_add_change_or_delete(staff):
    index = staff.get("/admin/").content.decode()
    assert f"{PAGE}add/" not in index
    assert staff.get(f"{PAGE}add/").status_code == 404


# ---------------------------------------------------------------------------------------------
# Right now: backlog, wakes, heartbeat
# ---------------------------------------------------------------------------------------------


def test_the_backlog_the_oldest_unsent_reply_and_overdue_wakes(staff):
    say("5511900000001", "oi", "wamid.1")
    History.objects.all().delete()
    Wake.objects.all().delete()  # only this test's rows below
    now = timezone.now()
    History.objects.create(conversation_id="5511900000001", role="assistant", content="a", at=now - timedelta(seconds=95),
                           send_status="pending")
    History.objects.create(conversation_id="5511900000001", role="assistant", content="b", at=now - timedelta(seconds=5),
                           send_status="pending")
    Wake.objects.create(conversation_id="5511900000001", key="w1", at=now - timedelta(minutes=7))
    Wake.objects.create(conversation_id="5511900000001", key="w2", at=now + timedelta(hours=1))  # not due
    html = staff.get(PAGE).content.decode()
    assert re.search(r'id="falai-outbox" data-value="2"', html)
    assert re.search(r'id="falai-oldest-unsent">(95|96|97) s<', html)
    assert 'class="falai-card falai-late" id="falai-outbox"' in html  # over a minute: shown as late
    assert re.search(r'id="falai-wakes" data-value="1"', html)
    assert "7 min" in html
    assert "/admin/falai_django/conversation/5511900000001/change/" in html


def test_an_empty_backlog_is_not_late(staff):
    html = staff.get(PAGE).content.decode()
    assert re.search(r'class="falai-card" id="falai-outbox" data-value="0"', html)
    assert re.search(r'class="falai-card" id="falai-wakes" data-value="0"', html)


def test_the_dispatchers_heartbeat_never_fresh_and_late(staff):
    html = staff.get(PAGE).content.decode()
    assert "No dispatcher has beaten yet" in html
    Heartbeat.objects.create(process=DISPATCHER, at=timezone.now() - timedelta(seconds=3), host="box-1", pid=4242)
    html = staff.get(PAGE).content.decode()
    assert re.search(r"[345] s ago", html) and "box-1" in html and "4242" in html
    assert 'falai-late" id="falai-heartbeat"' not in html
    Heartbeat.objects.filter(process=DISPATCHER).update(at=timezone.now() - timedelta(minutes=5))
    html = staff.get(PAGE).content.decode()
    assert "5 min ago" in html and "is the dispatcher running?" in html
    assert 'falai-late" id="falai-heartbeat"' in html


# ---------------------------------------------------------------------------------------------
# Turns
# ---------------------------------------------------------------------------------------------


def test_turns_and_failures_in_the_last_hour_and_day(staff):
    say("5511900000001", "oi", "wamid.1")
    say("5511900000001", "oi", "wamid.1")  # the same message again: unchanged
    say("5511900000002", "oi", "wamid.2")
    old = TurnRecord.objects.create(conversation_id="5511900000003", kind="message", input_key="x", input={},
                                    status="failed")
    TurnRecord.objects.filter(pk=old.pk).update(received_at=timezone.now() - timedelta(hours=3))
    TurnRecord.objects.create(conversation_id="5511900000004", kind="message", input_key="y", input={},
                              status="retry")
    stale = TurnRecord.objects.create(conversation_id="5511900000005", kind="message", input_key="z", input={},
                                      status="failed")
    TurnRecord.objects.filter(pk=stale.pk).update(received_at=timezone.now() - timedelta(days=2))
    html = staff.get(PAGE).content.decode()
    hour, day = 'data-window="hour"', 'data-window="day"'
    assert cell(html, hour, "done") == "2"
    assert cell(html, hour, "unchanged") == "1"
    assert cell(html, hour, "retry") == "1"
    assert cell(html, hour, "failed") == "0"
    assert cell(html, hour, "failures") == "1"
    assert cell(html, hour, "total") == "4"
    assert cell(html, day, "failed") == "1"  # three hours ago: in the day, not the hour
    assert cell(html, day, "failures") == "2"
    assert cell(html, day, "total") == "5"  # two days ago is in neither


# ---------------------------------------------------------------------------------------------
# The model by day
# ---------------------------------------------------------------------------------------------


def test_model_calls_latency_and_tokens_by_model_per_day(staff):
    for i in range(100):  # 0.1 s … 10.0 s: p50 about 5 s, p95 about 9.5 s
        model_call((i + 1) / 10, prompt=1000, cached=200, completion=50)
    model_call(1.0, model="gpt-4.1-mini", prompt=10, completion=5)
    model_call(30.0, error=ProviderError("gemini", "timeout", "slow"))
    metrics.flush()
    assert DailyTotal.objects.filter(day=timezone.localdate()).exists()
    html = staff.get(PAGE).content.decode()
    today = timezone.localdate().isoformat()
    row = f'data-day="{today}" data-model="gemini-2.5-flash"'
    assert cell(html, row, "calls") == "101"
    assert cell(html, row, "errors").startswith("1 (")
    assert cell(html, row, "prompt") == "100000"
    assert cell(html, row, "cached") == "20000"
    assert cell(html, row, "completion") == "5000"
    p50 = float(cell(html, row, "p50").split()[0])
    p95 = float(cell(html, row, "p95").split()[0])
    assert 5.0 * 0.88 <= p50 <= 5.1 * 1.12
    assert 9.5 * 0.88 <= p95 <= 9.6 * 1.12
    other = f'data-day="{today}" data-model="gpt-4.1-mini"'
    assert cell(html, other, "calls") == "1" and cell(html, other, "completion") == "5"
    # the charts: one stacked bar per model today, one latency mark per model
    assert re.search(rf'<rect class="tokens" data-day="{today}" data-model="gemini-2.5-flash" data-value="105000"', html)
    assert re.search(rf'<g class="latency" data-day="{today}" data-model="gpt-4.1-mini" data-p50="[0-9.]+"', html)
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="falai-tokens"') == 1
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="falai-latency"') == 1


def test_yesterdays_figures_are_their_own_day_and_old_ones_are_left_out(staff):
    model_call(1.0, prompt=10, completion=1)
    metrics.flush()
    today = timezone.localdate()
    DailyTotal.objects.create(day=today - timedelta(days=1), name="llm_calls",
                              labels=metrics.series_key({"provider": "gemini", "model": "gemini-2.5-flash",
                                                         "result": "ok"}), value=7)
    DailyTotal.objects.create(day=today - timedelta(days=30), name="llm_calls",
                              labels=metrics.series_key({"provider": "gemini", "model": "ancient-model",
                                                         "result": "ok"}), value=9)
    html = staff.get(PAGE).content.decode()
    assert cell(html, f'data-day="{(today - timedelta(days=1)).isoformat()}" data-model="gemini-2.5-flash"',
                "calls") == "7"
    assert cell(html, f'data-day="{today.isoformat()}" data-model="gemini-2.5-flash"', "calls") == "1"
    assert "ancient-model" not in html


def test_daily_counts_from_several_flushes_add_up():
    model_call(1.0, prompt=10, completion=1)
    metrics.flush()
    model_call(2.0, prompt=5, completion=2)
    metrics.flush()
    [day] = operations.report().model_days
    assert (day.calls, day.prompt, day.completion) == (2, 15, 3)


def test_with_no_model_calls_the_page_says_so(staff):
    html = staff.get(PAGE).content.decode()
    assert "No model call in the last 14 days." in html
    assert 'id="falai-no-prices"' in html


# ---------------------------------------------------------------------------------------------
# Money
# ---------------------------------------------------------------------------------------------


def test_prices_turn_tokens_into_money_per_day_and_per_conversation(staff, settings):
    settings.FALAI = {**settings.FALAI, "MODEL_PRICES": {
        "gemini-2.5-flash": {"input": 0.30, "cached_input": 0.03, "output": 2.50},
        "gpt-4.1-mini": [0.40, 0.10, 1.60],
    }}
    model_call(1.0, prompt=1_000_000, cached=200_000, completion=100_000)
    model_call(1.0, model="gemini-2.5-flash-001", prompt=1_000_000)  # a dated name takes its family's price
    model_call(1.0, model="gpt-4.1-mini", prompt=500_000, completion=250_000)
    model_call(1.0, model="unpriced-model", prompt=1_000_000)
    metrics.flush()
    for conversation in ("a", "b", "c", "d"):  # four conversations whose turns called the model today
        TurnRecord.objects.create(conversation_id=conversation, kind="message", input_key="k", input={},
                                  status="done", llm_calls=2)
    TurnRecord.objects.create(conversation_id="e", kind="message", input_key="k", input={}, status="done",
                              llm_calls=0)  # no model call: not counted
    html = staff.get(PAGE).content.decode()
    today = timezone.localdate().isoformat()
    flash = 0.8 * 0.30 + 0.2 * 0.03 + 0.1 * 2.50  # 0.496
    dated = 1.0 * 0.30
    mini = 0.5 * 0.40 + 0.25 * 1.60  # 0.6
    assert cell(html, f'data-day="{today}" data-model="gemini-2.5-flash"', "cost") == f"{flash:.4f}"
    assert cell(html, f'data-day="{today}" data-model="gemini-2.5-flash-001"', "cost") == f"{dated:.4f}"
    assert cell(html, f'data-day="{today}" data-model="gpt-4.1-mini"', "cost") == f"{mini:.4f}"
    assert cell(html, f'data-day="{today}" data-model="unpriced-model"', "cost") == "—"
    total = flash + dated + mini
    assert cell(html, f'data-total-day="{today}"', "cost") == f"{total:,.2f}"
    assert cell(html, f'data-total-day="{today}"', "conversations") == "4"
    assert cell(html, f'data-total-day="{today}"', "per_conversation") == f"{total / 4:.4f}"
    assert 'id="falai-unpriced"' in html and "unpriced-model" in html


def test_a_malformed_price_table_is_a_check_error(settings):
    base = {"AGENT": "admin.agents.current_agent", "SENDER": "admin.senders.record"}
    for bad in ("cheap", {"m": {"input": 1}}, {"m": {"input": -1, "output": 2}}, {"m": {"inptu": 1, "output": 2}},
                {"m": [1, 2]}):
        settings.FALAI = {**base, "MODEL_PRICES": bad}
        errors = [m for m in run_checks() if m.id == "falai_django.E014"]
        assert errors, bad
        assert "MODEL_PRICES" in errors[0].msg
    settings.FALAI = {**base, "MODEL_PRICES": {"m": {"input": 1, "output": 2}, "n": (1, 0.5, 2),
                                               "o": {"prompt": 1, "cached": 0.1, "completion": 2}}}
    assert not [m for m in run_checks() if m.id == "falai_django.E014"]
    assert operations.model_prices() == {"m": {"input": 1.0, "cached_input": 1.0, "output": 2.0},
                                         "n": {"input": 1.0, "cached_input": 0.5, "output": 2.0},
                                         "o": {"input": 1.0, "cached_input": 0.1, "output": 2.0}}


def test_quantiles_interpolate_inside_their_bucket():
    assert operations.quantile(0.5, {1.0: 10, 2.0: 10}) == pytest.approx(1.0)
    assert operations.quantile(0.75, {1.0: 10, 2.0: 10}) == pytest.approx(1.5)
    assert operations.quantile(0.5, {}) is None
    assert operations.quantile(0.99, {1.0: 1, float("inf"): 99}) == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# Failed sends
# ---------------------------------------------------------------------------------------------


def test_failed_sends_by_channel_stage_and_code(staff):
    say("5511900000001", "oi", "wamid.1")
    now = timezone.now()

    def reply(**fields):
        History.objects.create(conversation_id="5511900000001", role="assistant", content="x", at=now, **fields)

    reply(send_status="failed", send_error="131047 Re-engagement message: more than 24 hours")
    reply(send_status="failed", send_error="131047 Re-engagement message: more than 24 hours")
    reply(send_status="sent", delivery_status="failed", send_error="131026 Message undeliverable")
    reply(send_status="failed", send_error="TimeoutError: the channel did not answer")
    History.objects.create(conversation_id="5511900000001", role="assistant", content="old", send_status="failed",
                           send_error="131047 Re-engagement message", at=now - timedelta(days=8))
    html = staff.get(PAGE).content.decode()
    assert cell(html, 'data-code="131047" data-stage="refused"', "count") == "2"
    assert cell(html, 'data-code="131026" data-stage="not delivered"', "count") == "1"
    assert cell(html, 'data-code="TimeoutError" data-stage="refused"', "count") == "1"
    assert "Re-engagement message" in html
    assert ">record<" in html  # the sender's channel


def test_error_codes_are_read_from_what_the_channel_said():
    assert operations.error_code("131047 Re-engagement message: details") == ("131047", "Re-engagement message")
    assert operations.error_code("ConnectionError: refused") == ("ConnectionError", "refused")
    assert operations.error_code("the Graph API answered 200 without messages[0].id")[0] == ""


def test_the_report_reads_the_conversation_tables_only():
    assert Session.objects.count() == 0
    rep = operations.report()
    assert rep.outbox_pending == 0 and rep.wakes_overdue == 0 and rep.heartbeat is None
    assert len(rep.days) == operations.DAYS
    assert rep.days[-1].day == timezone.localdate()


def test_when_the_database_does_not_answer_the_page_says_so_with_a_503(staff, monkeypatch, caplog):
    from django.db import OperationalError

    def away(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(operations, "report", away)
    with caplog.at_level("WARNING", logger="falai_django.admin"):
        response = staff.get(PAGE)
    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    html = response.content.decode()
    assert 'id="falai-unavailable"' in html and "The database does not answer" in html
    assert "connection refused" not in html  # the driver's words stay in the log
    assert any("connection refused" in r.getMessage() for r in caplog.records)
