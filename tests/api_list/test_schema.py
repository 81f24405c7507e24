"""The OpenAPI schema comes from drf-spectacular: security schemes declared, every endpoint (the
list included), no generator warnings; the docs page is Swagger UI served with local assets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db(transaction=True)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _schema(api) -> dict:
    response = api.get("/falai/schema")
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


def test_the_schema_is_drf_spectacular_and_generates_without_warnings(api, capsys):
    from drf_spectacular.views import SpectacularAPIView

    from falai_django.api.schema import SchemaView

    assert issubclass(SchemaView, SpectacularAPIView)
    capsys.readouterr()
    schema = _schema(api)
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "falai_django"
    assert "Warning" not in capsys.readouterr().err  # spectacular reports what it had to guess


def test_the_security_schemes_are_declared(api):
    schema = _schema(api)
    schemes = schema["components"]["securitySchemes"]
    assert schemes["tokenAuth"] == {"type": "apiKey", "in": "header", "name": "Authorization",
                                    "description": 'Token-based authentication with required prefix "Token"'}
    assert schemes["cookieAuth"]["in"] == "cookie"
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation["security"][:2] == [{"tokenAuth": []}, {"cookieAuth": []}], (path, method)


@pytest.mark.parametrize("secret", ["", "s3cret"], ids=["no-secret", "secret"])
def test_the_signed_webhook_is_a_way_in_only_where_the_server_takes_it(api, settings, secret):
    from falai_django import conf

    settings.FALAI = {**settings.FALAI, "WEBHOOK_SECRET": secret}
    conf.clear_cache()
    schema = _schema(api)
    schemes = schema["components"]["securitySchemes"]
    webhook = {"webhookTimestamp": [], "webhookSignature": []}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            # the two webhook headers go together, after a person's credentials
            assert (operation["security"][-1] == webhook) is bool(secret), (path, method, operation["security"])
            assert webhook not in operation["security"][:-1]
    if secret:
        assert schemes["webhookTimestamp"]["name"] == "X-Falai-Timestamp"
        assert schemes["webhookSignature"]["name"] == "X-Falai-Signature"
    else:
        assert "webhookTimestamp" not in schemes and "webhookSignature" not in schemes


def test_the_list_endpoint_and_its_filters_are_in_the_schema(api):
    schema = _schema(api)
    listing = schema["paths"]["/falai/sessions"]["get"]
    assert listing["operationId"] == "sessions_list"
    params = {p["name"]: p for p in listing["parameters"]}
    assert set(params) == {"status", "flow", "owner", "silenced", "q", "page", "page_size"}
    assert params["status"]["schema"]["enum"] == ["asking", "waiting", "idle", "silenced"]
    assert set(listing["responses"]) == {"200", "400", "401", "403", "404", "409"}
    page = listing["responses"]["200"]["content"]["application/json"]["schema"]
    assert page == {"$ref": "#/components/schemas/SessionPage"}
    assert set(schema["components"]["schemas"]["SessionPage"]["properties"]) == {
        "count", "count_is_estimate", "next", "previous", "results"}
    # `silenced` is a reason or an object, not "a string"
    body = schema["components"]["schemas"]["MessageInput"]["properties"]["silenced"]
    assert [alt["type"] for alt in body["oneOf"]] == ["string", "object", "null"]


def test_only_this_apps_endpoints_are_described(api):
    paths = set(_schema(api)["paths"])
    # the conversations and the stored flows; not the schema itself, the docs page or the admin
    assert all(p.startswith(("/falai/sessions", "/falai/flows")) for p in paths), paths
    assert "/falai/flows" in paths  # the stored flows, listed
    assert "/falai/flows/{flow_id}" in paths and "/falai/flows/{flow_id}/funnel" in paths


def test_the_docs_page_uses_local_assets_and_the_same_permission(api, django_user_model):
    page = api.get("/falai/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower() and "/falai/schema" in html
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")  # served by the project
    assert APIClient().get("/falai/docs/").status_code in (401, 403)
    nobody = APIClient()
    nobody.force_authenticate(django_user_model.objects.create_user("nobody", password="pw"))
    assert nobody.get("/falai/docs/").status_code == 403


def test_the_docs_page_renders_offline_in_a_browser(live_server, demo_settings, django_user_model, new_page):
    django_user_model.objects.create_superuser("admin", "admin@example.com", "pw")
    outside: list[str] = []
    page = new_page(width=1280, height=900)

    def only_local(route):
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.goto(f"{live_server.url}/admin/login/?next=/falai/docs/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_url("**/falai/docs/")
    page.wait_for_selector(".opblock")
    operations = page.locator(".opblock-summary-path").all_text_contents()
    assert "/falai/sessions" in [o.replace("\u200b", "") for o in operations]
    assert page.locator(".btn.authorize").count() == 1  # the security schemes are offered
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "api-docs.png"))
    assert outside == []  # no CDN, nothing outside the server



def test_operation_ids_do_not_depend_on_where_the_app_is_mounted(api, settings):
    """A client generated from the schema keeps its method names when a project mounts the app
    elsewhere: ids come from the path under the app's mount point."""
    at_falai = _schema(api)["paths"]
    ids = {path: {method: op["operationId"] for method, op in ops.items()} for path, ops in at_falai.items()}
    settings.ROOT_URLCONF = "api_list.mounted_urls"  # Django's test signal clears the URL caches
    response = api.get("/api/v2/chat/schema")
    assert response.status_code == 200, response.content[:300]
    deeper = json.loads(response.content)["paths"]
    assert {path: {method: op["operationId"] for method, op in ops.items()} for path, ops in deeper.items()} == {
        path.replace("/falai/", "/api/v2/chat/", 1): by_method for path, by_method in ids.items()}
    assert ids["/falai/sessions/{session_id}/messages"] == {"post": "sessions_messages_create"}


def test_a_view_routed_without_the_apps_namespace_still_gets_a_schema(settings):
    from drf_spectacular.generators import SchemaGenerator

    settings.ROOT_URLCONF = "api_list.unnamespaced_urls"
    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert schema["paths"]["/chat/sessions/{session_id}/messages"]["post"]["operationId"] == (
        "chat_sessions_messages_create")  # the whole path: there is no mount point to strip
