from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="falai:playground"), name="home"),  # the demo starts there
    path("admin/", admin.site.urls),
    path("falai/", include("falai_django.urls")),
]
