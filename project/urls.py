from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from falai_django.favicon import favicon

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="falai:playground"), name="home"),  # the demo starts there
    path("favicon.ico", favicon),  # Django's own admin pages link no icon: the browser asks here
    path("admin/", admin.site.urls),
    path("falai/", include("falai_django.urls")),
]
