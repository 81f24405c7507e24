"""`/favicon.ico` for a host's whole site: a redirect to the app's icon (static
`falai_django/favicon.svg`), for the pages that link no icon of their own, such as Django's own
admin pages (the index, the login, other apps' lists). Browsers ask every site for /favicon.ico,
and without an answer each page view logs a 404.

The app's own pages (the conversation list and page, the desk, Operations, the playground) link
the icon themselves (`falai_django/favicon.html`); this covers the rest. In the project's urls.py:

    from falai_django.favicon import favicon
    urlpatterns = [..., path("favicon.ico", favicon)]
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    # Resolved per request, not at import: a manifest storage knows the file's hashed name only
    # after collectstatic.
    return HttpResponseRedirect(static("falai_django/favicon.svg"))
