"""Issue 15, part B: the playground's sandbox, and what a newcomer tripped on.

The demo agent (Ana, offline, fake clock) behind the host, django-q2 in-line, and a recording
sender standing for a project's real channel (`demo.support.record_send`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client
