"""One date format on each page, the one Django's admin writes its own fields in (issue 55).

A fresh `startproject` sets no format: LANGUAGE_CODE "en-us", USE_TZ, no FORMAT_MODULE_PATH and no
DATETIME_FORMAT, so Django's admin shows a DateTimeField as "Sept. 20, 2026, 10 a.m.". The app's
own times (the transcript, the handoff, the live runs, the wakes, the outcomes, the desk's queue,
the list's columns) wrote "2026-09-20 10:00:00" beside them. Every time a person reads on these
pages now follows the project's localized DATETIME_FORMAT; `datetime` and data-* attributes keep
ISO 8601 for machines (they are not read here: only the text a person sees), and so does the raw
session blob, shown as stored.
"""

from __future__ import annotations

import html as html_lib
import re

import pytest
from django.utils.formats import reset_format_cache

from falai_django import handoff
from falai_django.playground import display

from .conftest import CHANGELIST, admin_client, make_user, page_url, say

pytestmark = pytest.mark.django_db

ISO_LIKE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}")
# Django's en DATETIME_FORMAT "N j, Y, P": "Sept. 20, 2026, 10 a.m.", "Sept. 20, 2026, 11:05 a.m.", "…, noon"
EN_US = re.compile(r"\b(?:Jan\.|Feb\.|March|April|May|June|July|Aug\.|Sept\.|Oct\.|Nov\.|Dec\.) \d{1,2}, \d{4}, "
                   r"(?:\d{1,2}(?::\d{2})? [ap]\.m\.|noon|midnight)")
SID = "5511"


@pytest.fixture
def fresh_project_formats(settings):
    """The date settings of a project made by `django-admin startproject` (the test settings are
    the demo's, whose format modules write "Y-m-d H:i:s")."""
    settings.LANGUAGE_CODE = "en-us"
    settings.USE_TZ = True
    settings.TIME_ZONE = "UTC"
    settings.FORMAT_MODULE_PATH = None
    reset_format_cache()  # FORMAT_MODULE_PATH is not among the settings whose change resets it
    yield
    reset_format_cache()


@pytest.fixture
def conversation(run_on_commit) -> str:
    """Asked, answered (the run waits an hour: a wake), a human note, then taken over."""
    run_on_commit(say, SID, "oi", "m1")
    run_on_commit(say, SID, "meu nome é Maria da empresa Acme", "m2")
    run_on_commit(handoff.take_over, SID, "alice")
    return SID


def visible_text(page: str, *, without: tuple[str, ...] = ()) -> str:
    """What a person reads: no tags (so no attributes), no scripts or styles, entities decoded;
    the elements with the ids in `without` left out."""
    for element_id in without:
        page = re.sub(rf'<(\w+)[^>]*id="{element_id}".*?</\1>', "", page, flags=re.S)
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", page))


def assert_one_format(text: str, at_least: int) -> list[str]:
    assert ISO_LIKE.findall(text) == [], "times in a second format"
    found = EN_US.findall(text)
    assert len(found) >= at_least, found
    return found


def test_the_conversation_page_writes_times_as_django_writes_its_fields(fresh_project_formats, conversation):
    user = make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    page = admin_client(user).get(page_url(SID)).content.decode()

    # the raw blob is shown exactly as stored (ISO inside its JSON); everything else is for people
    text = visible_text(page, without=("raw",))
    # Django's own readonly fields (last user/assistant message at, created/updated at) ...
    readonly = re.findall(r'<div class="readonly">([^<]*)</div>', page)
    assert sum(bool(EN_US.fullmatch(value.strip())) for value in readonly) >= 4, readonly
    # ... and the app's: transcript, handoff "since", waiting until, wakes, outcomes
    for section in ("transcript", "handoff", "runs", "wakes", "outcomes"):
        part = visible_text(page.split(f'id="{section}"', 1)[1].split("</section>", 1)[0])
        assert EN_US.search(part), f"no time in {section}"
        assert not ISO_LIKE.search(part), f"{section}: {ISO_LIKE.findall(part)}"
    assert_one_format(text, at_least=10)
    assert '<time datetime="2026-09-20T' in page  # machines keep ISO 8601


def test_the_desk_writes_times_as_django_writes_its_fields(fresh_project_formats, conversation):
    user = make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")
    client = admin_client(user)

    page = client.get(f"{CHANGELIST}desk/{SID}/").content.decode()
    assert_one_format(visible_text(page), at_least=4)
    queue = client.get(f"{CHANGELIST}desk/?q=open").content.decode()
    assert_one_format(visible_text(queue), at_least=1)


def test_the_list_writes_times_as_django_writes_its_fields(fresh_project_formats, conversation):
    user = make_user("alice", "view_conversation")
    page = admin_client(user).get(CHANGELIST).content.decode()

    table = page.split('id="result_list"', 1)[1].split("</table>", 1)[0]
    # last user message, last assistant message, next wake
    assert_one_format(re.sub(r"\s+", " ", visible_text(table)), at_least=3)


def test_the_playground_and_the_terminal_write_times_the_same_way(fresh_project_formats):
    from datetime import UTC, datetime

    assert EN_US.fullmatch(display.when(datetime(2026, 9, 20, 10, 0, tzinfo=UTC)))
    assert display.when("2026-09-20T11:05:00Z") == "Sept. 20, 2026, 11:05 a.m."
