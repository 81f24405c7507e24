"""Admin test setup: the test agent and recording sender, django-q2 in-line, users with and
without the handoff permissions, and conversations made by real turns through the host. (The
file SQLite database the live server thread shares comes from tests/conftest.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from . import agents, senders


@pytest.fixture(autouse=True)
def falai_settings(settings, monkeypatch):
    from django_q.conf import Conf

    from falai_django import conf

    # "queue": sends go through django-q2 (in-line here) on any database. The default, "auto",
    # hands them to the dispatcher by NOTIFY on PostgreSQL, and no dispatcher runs in these tests
    # (the NOTIFY hand-off has its own tests in tests/host).
    settings.FALAI = {"AGENT": "admin.agents.current_agent", "SENDER": "admin.senders.record",
                      "SEND_HANDOFF": "queue"}
    settings.LANGUAGE_CODE = "en"
    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2 reads Q_CLUSTER once, at import
    conf.clear_cache()
    agents.reset()
    senders.reset()
    yield
    conf.clear_cache()


def make_user(username: str, *perms: str, superuser: bool = False) -> Any:
    """A staff user holding `perms` (codenames of falai_django permissions)."""
    from django.contrib.auth.models import Permission, User

    if superuser:
        return User.objects.create_superuser(username, f"{username}@example.com", "pw")
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(content_type__app_label="falai_django", codename=codename))
    return user


@pytest.fixture
def operator(db):
    """Staff who may see conversations, take them over and reply."""
    return make_user("alice", "view_conversation", "handoff_conversation", "reply_conversation")


@pytest.fixture
def viewer(db):
    """Staff who may only look."""
    return make_user("bob", "view_conversation")


def say(session_id: str, text: str, msg_id: str | None = None) -> Any:
    """A customer message through the host loop."""
    from falai_django import host

    return host.handle(session_id, {"message": text, "id": msg_id})


def admin_client(user: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


CHANGELIST = "/admin/falai_django/conversation/"


def page_url(session_id: str) -> str:
    from django.contrib.admin.utils import quote

    return f"{CHANGELIST}{quote(session_id)}/change/"


def operation_url(session_id: str, operation: str) -> str:
    from django.contrib.admin.utils import quote

    return f"{CHANGELIST}{quote(session_id)}/handoff/{operation}/"


@pytest.fixture
def run_on_commit(django_capture_on_commit_callbacks):
    """Run `on_commit` hooks (the sends) inside the test's transaction, as a commit would."""

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return run
