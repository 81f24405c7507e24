"""`GET sessions` and the API's refusal of unknown events and flows, against the demo agent."""

from __future__ import annotations

import pytest


@pytest.fixture
def api(demo_settings, django_user_model):
    from rest_framework.test import APIClient

    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw")
    client = APIClient()
    client.force_authenticate(user)
    return client
