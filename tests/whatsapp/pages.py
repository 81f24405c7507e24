"""The admin pages the WhatsApp tests read."""

from __future__ import annotations

from django.test import Client


def admin_page(session_id: str) -> str:
    """The conversation's admin page, as a superuser sees it."""
    from django.contrib.auth.models import User

    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    response = client.get(f"/admin/falai_django/conversation/{session_id}/change/")
    assert response.status_code == 200
    return response.content.decode()
