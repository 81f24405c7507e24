"""A project that routes one of the app's views by hand, without `include` (no `falai` namespace)."""

from django.urls import path

from falai_django.api import views

urlpatterns = [path("chat/sessions/<str:session_id>/messages", views.MessageView.as_view())]
