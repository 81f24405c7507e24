"""Include under one prefix: `path("falai/", include("falai_django.urls"))`."""

from django.urls import include, path, re_path

from falai_django.api import flows, health, schema, views
from falai_django.api.auth import CanDriveConversations
from falai_django.api.metrics import metrics_view
from falai_django.channels.whatsapp.webhook import webhook as whatsapp_webhook

app_name = "falai"

urlpatterns = [
    path("sessions", views.SessionListView.as_view(), name="sessions"),
    path("sessions/<str:session_id>", views.SessionStateView.as_view(), name="session"),
    path("sessions/<str:session_id>/messages", views.MessageView.as_view(), name="message"),
    path("sessions/<str:session_id>/messages/stream", views.MessageStreamView.as_view(), name="message-stream"),
    path("sessions/<str:session_id>/wakes", views.WakeView.as_view(), name="wake"),
    path("sessions/<str:session_id>/events", views.EventView.as_view(), name="event"),
    path("sessions/<str:session_id>/starts", views.StartView.as_view(), name="start"),
    path("sessions/<str:session_id>/silence", views.SilenceView.as_view(), name="silence"),
    path("sessions/<str:session_id>/unsilence", views.UnsilenceView.as_view(), name="unsilence"),
    path("flows", flows.FlowListView.as_view(), name="flows"),
    # Any id reaches the view, which answers the documented JSON 404 (or 400) for one that is no slug.
    path("flows/<str:flow_id>", flows.FlowView.as_view(), name="flow"),
    path("flows/<str:flow_id>/funnel", flows.FunnelView.as_view(), name="flow-funnel"),
    path("playground/", include("falai_django.playground.urls")),
    path("whatsapp/webhook", whatsapp_webhook, name="whatsapp-webhook"),
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("metrics", metrics_view, name="metrics"),
    path("schema", schema.SchemaView.as_view(permission_classes=[CanDriveConversations],
                                             authentication_classes=views._authentication_classes()),
         name="schema"),
    # Under the API's own prefixes, a path no pattern takes is a JSON 404, like every API answer.
    re_path(r"^(?:sessions|flows)/", views.not_found, name="api-not-found"),
    path("docs/", schema.DocsView.as_view(permission_classes=[CanDriveConversations],
                                          authentication_classes=views._authentication_classes()),
         name="docs"),
]
