"""Desk test setup: the demo agent Ana (offline provider, fake clock) behind the host, a recording
sender, django-q2 in-line, and staff users with and without the handoff permissions."""

from __future__ import annotations

from typing import Any

import pytest

CHANGELIST = "/admin/falai_django/conversation/"
DESK = f"{CHANGELIST}desk/"


@pytest.fixture(autouse=True)
def ana(settings, monkeypatch):
    from demo import support
    from django_q.conf import Conf

    from falai_django import conf

    # "queue": sends go through django-q2 (in-line here) on any database, PostgreSQL too
    settings.FALAI = {"AGENT": "demo.support.current_agent", "SENDER": "demo.support.record_send",
                      "SEND_HANDOFF": "queue"}
    settings.LANGUAGE_CODE = "en"
    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2 reads Q_CLUSTER once, at import
    conf.clear_cache()
    agent = support.reset()
    yield agent
    conf.clear_cache()


def sent_texts(session_id: str) -> list[str]:
    from demo import support

    return [m.text for m in support.sent if m.session_id == session_id]


def make_user(username: str, *perms: str, superuser: bool = False) -> Any:
    """A staff user holding `perms` (codenames of falai_django permissions)."""
    from django.contrib.auth.models import Permission, User

    if superuser:
        return User.objects.create_superuser(username, f"{username}@example.com", "pw")
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(content_type__app_label="falai_django", codename=codename))
    return user


def logged_in(browser: Any, live_server: Any, username: str) -> Any:
    """A Chromium page signed in to the admin as `username` (password "pw")."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")
    return page


AGENT_PERMS = ("view_conversation", "change_conversation", "handoff_conversation", "reply_conversation")


@pytest.fixture
def alice(db):
    return make_user("alice", *AGENT_PERMS)


@pytest.fixture
def bruno(db):
    return make_user("bruno", *AGENT_PERMS)


@pytest.fixture
def viewer(db):
    """Staff who may only look."""
    return make_user("vera", "view_conversation")


def client_for(user: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def desk_url(session_id: str = "", operation: str = "") -> str:
    from django.contrib.admin.utils import quote

    if not session_id:
        return DESK
    return f"{DESK}{quote(session_id)}/" + (f"{operation}/" if operation else "")


def admin_operation_url(session_id: str, operation: str) -> str:
    from django.contrib.admin.utils import quote

    return f"{CHANGELIST}{quote(session_id)}/handoff/{operation}/"


@pytest.fixture
def run_on_commit(django_capture_on_commit_callbacks):
    """Run `on_commit` hooks (the sends) inside the test's transaction, as a commit would."""

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return run
