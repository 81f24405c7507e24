"""The playground's pages, included by `falai_django.urls` under `playground/`."""

from django.urls import path

from falai_django.playground.views import event_view, fast_forward_view, page, reset_view, state

urlpatterns = [
    path("", page, name="playground"),
    path("state/", state, name="playground-state"),
    path("fast-forward/", fast_forward_view, name="playground-fast-forward"),
    path("event/", event_view, name="playground-event"),
    path("new/", reset_view, name="playground-reset"),
]
