"""The OpenAPI file a deploy pipeline exports (`manage.py spectacular`) describes the app's API as
`GET <app>/schema` does: in the demo (DRF's default schema class) and in a project whose own API
is drf-spectacular's (its `AutoSchema` as `DEFAULT_SCHEMA_CLASS`), where the app's operations sit
beside the project's with the same ids, bodies and security schemes."""

from __future__ import annotations

from newcomer.test_readme_adding_the_app import apply, startproject

from deploy.support import ROOT, exported_schema, manage, served_schema

PROJECT_API = '''
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView


class StockSerializer(serializers.Serializer):
    sku = serializers.CharField()
    units = serializers.IntegerField()


class StockView(APIView):
    @extend_schema(responses=StockSerializer)
    def get(self, request, sku):
        return Response({"sku": sku, "units": 3})
'''


def _folder(tmp_path):
    (tmp_path / "site").mkdir()
    return tmp_path / "site"


def _assert_describes_the_app(exported: dict, served: dict) -> None:
    from falai_django.api.shapes import _to_30

    if not exported["openapi"].startswith("3.1"):  # the project's version (3.0.3 unless it says): the same, as 3.0 writes it
        assert served["openapi"].startswith("3.1")
        served = _to_30(served)
    ours = {path: ops for path, ops in exported["paths"].items() if path.startswith("/falai/")}
    assert ours == served["paths"]  # the same operations: ids, parameters, bodies, answers, security
    assert "/falai/schema" not in exported["paths"] and "/falai/docs/" not in exported["paths"]
    for kind in ("schemas", "securitySchemes"):
        for name, component in served["components"][kind].items():
            assert exported["components"][kind].get(name) == component, (kind, name)
    # the signed webhook is a way in only with a WEBHOOK_SECRET, in the export as in the served schema
    assert {"tokenAuth", "cookieAuth"} <= set(exported["components"]["securitySchemes"])


def test_the_demo_exports_the_schema_its_endpoint_serves(tmp_path):
    exported = exported_schema(ROOT, tmp_path / "schema.json")
    served = served_schema(ROOT)
    assert served["paths"], "the app's schema lists no operation"
    _assert_describes_the_app(exported, served)
    assert set(exported["paths"]) == set(served["paths"])  # the demo has no other API


def test_check_deploy_reports_no_error_from_the_schema(tmp_path):
    done = manage(ROOT, "check", "--deploy", "--fail-level", "ERROR")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "drf_spectacular" not in done.stdout + done.stderr


def test_a_project_with_its_own_drf_spectacular_api_exports_both(tmp_path):
    project = startproject(_folder(tmp_path))
    apply(project)
    package = project / "myproject"
    (package / "stock.py").write_text(PROJECT_API, encoding="utf-8")
    with (package / "settings.py").open("a", encoding="utf-8") as settings:
        settings.write('\nREST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] = "drf_spectacular.openapi.AutoSchema"\n'
                       'SPECTACULAR_SETTINGS = {"TITLE": "Shop", "VERSION": "2"}\n')
    with (package / "urls.py").open("a", encoding="utf-8") as urls:
        urls.write("\nfrom myproject.stock import StockView\n\n"
                   'urlpatterns.append(path("api/stock/<str:sku>", StockView.as_view()))\n')

    exported = exported_schema(project, tmp_path / "schema.json")
    assert exported["info"]["title"] == "Shop"  # the project's schema, the app's operations within
    stock = exported["paths"]["/api/stock/{sku}"]["get"]
    assert stock["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Stock"}
    _assert_describes_the_app(exported, served_schema(project))
    check = manage(project, "check", "--deploy", "--fail-level", "ERROR")
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_readme_project_with_drfs_default_schema_class_exports_the_apps_api(tmp_path):
    project = startproject(_folder(tmp_path))
    apply(project)
    exported = exported_schema(project, tmp_path / "schema.json")
    _assert_describes_the_app(exported, served_schema(project))
