"""`manage.py falai_flows export DIR` and `import DIR`: one JSON file per flow, checked, with a
report; one bad file imports nothing."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from falai_django.models import Flow

from .agents import spec

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("falai_flows", *args, stdout=out, stderr=out)
    return out.getvalue()


def test_export_writes_one_file_per_flow_and_import_of_the_same_changes_nothing(tmp_path):
    Flow(id="boas_vindas", name="B", spec=spec(), enabled=True, position=3).save()
    out = run("export", str(tmp_path))
    assert "1 flow file(s)" in out
    data = json.loads((tmp_path / "boas_vindas.json").read_text())
    assert data == {"id": "boas_vindas", "name": "B", "enabled": True, "position": 3, "spec": spec()}
    out = run("import", str(tmp_path))
    assert "unchanged  boas_vindas" in out and "0 new, 0 changed, 1 unchanged" in out
    assert Flow.objects.get().version == 1


def test_export_with_code_flows_writes_them_disabled(tmp_path):
    run("export", str(tmp_path), "--with-code-flows")
    data = json.loads((tmp_path / "triagem.json").read_text())
    assert data["enabled"] is False and [s["kind"] for s in data["spec"]["steps"]] == ["collect", "say"]


def test_import_reports_new_and_changed_and_saves_versions(tmp_path):
    Flow(id="boas_vindas", name="B", spec=spec()).save()
    changed = {"id": "boas_vindas", "name": "B2", "enabled": True, "position": 0, "spec": spec()}
    (tmp_path / "boas_vindas.json").write_text(json.dumps(changed))
    (tmp_path / "outro.json").write_text(json.dumps({"id": "outro", "spec": spec("outro")}))
    out = run("import", str(tmp_path), "--dry-run")
    assert "changed    boas_vindas (name, enabled)" in out and "new        outro" in out and "nothing saved" in out
    assert not Flow.objects.filter(pk="outro").exists()
    out = run("import", str(tmp_path))
    assert "imported: 1 new, 1 changed, 0 unchanged" in out
    flow = Flow.objects.get(pk="boas_vindas")
    assert (flow.version, flow.name, flow.enabled) == (2, "B2", True)
    assert flow.versions.get(version=2).note == "imported from boas_vindas.json"


def test_one_bad_file_imports_nothing_and_says_why(tmp_path):
    bad = spec("ruim")
    bad["steps"][0]["collect"] = ["idade"]
    (tmp_path / "ruim.json").write_text(json.dumps({"id": "ruim", "spec": bad}))
    (tmp_path / "bom.json").write_text(json.dumps({"id": "bom", "spec": spec("bom")}))
    (tmp_path / "torto.json").write_text("{not json")
    (tmp_path / "nome.json").write_text(json.dumps({"id": "outro", "spec": spec("outro")}))
    with pytest.raises(CommandError, match="3 bad file"):
        out = run("import", str(tmp_path))
    assert not Flow.objects.exists()
    from io import StringIO

    err = StringIO()
    with pytest.raises(CommandError):
        call_command("falai_flows", "import", str(tmp_path), stdout=StringIO(), stderr=err)
    out = err.getvalue()
    assert 'ruim.json: [FlowConfigurationError] flow "ruim", step "empresa": unknown field "idade"' in out
    assert "torto.json: not readable JSON" in out and 'nome.json: its id "outro" is not its file name' in out


def test_import_of_a_missing_directory_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="not a directory"):
        run("import", str(tmp_path / "nope"))


@pytest.mark.parametrize(("extra", "ids"), [
    ({}, []),
    ({"FLOWS_DB": "yes"}, ["falai_django.E161"]),
    ({"FLOWS_RELOAD_S": -1}, ["falai_django.E162"]),
    ({"FLOWS_RELOAD_S": "2"}, ["falai_django.E162"]),
])
def test_the_flow_settings_are_checked(settings, extra, ids):
    from falai_django.checks import check_flows_settings

    settings.FALAI = {**settings.FALAI, **extra}
    assert [p.id for p in check_flows_settings()] == ids
