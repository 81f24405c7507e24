"""A project that mounts the app deeper than the demo does (tests/api_list/test_schema.py)."""

from django.urls import include, path

urlpatterns = [path("api/v2/chat/", include("falai_django.urls"))]
