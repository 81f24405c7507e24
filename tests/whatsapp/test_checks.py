"""`manage.py check` names each missing or wrong FALAI["WHATSAPP"] key."""

from __future__ import annotations

import pytest

from falai_django.channels.whatsapp.checks import check_whatsapp

GOOD = {"PHONE_NUMBER_ID": "1", "ACCESS_TOKEN": "t", "APP_SECRET": "s", "VERIFY_TOKEN": "v"}
SENDER = "falai_django.channels.whatsapp.send"


def problems(settings, whatsapp, **extra):
    settings.FALAI = {"AGENT": "whatsapp.agents.current_agent", "SENDER": SENDER, "WHATSAPP": whatsapp, **extra}
    return [(p.id, p.msg) for p in check_whatsapp()]


def test_a_complete_setting_has_no_problem(settings):
    assert problems(settings, GOOD) == []
    assert problems(settings, {**GOOD, "WINDOW": None, "GRAPH_URL": "http://127.0.0.1:9/v21.0"}) == []


def test_no_whatsapp_setting_is_fine(settings):
    assert problems(settings, None) == []


@pytest.mark.parametrize("key", ["PHONE_NUMBER_ID", "ACCESS_TOKEN", "APP_SECRET", "VERIFY_TOKEN"])
def test_a_missing_key_is_an_error_naming_it(settings, key):
    found = problems(settings, {k: v for k, v in GOOD.items() if k != key})
    assert found == [("falai_django.E051", f'FALAI["WHATSAPP"]["{key}"] is missing.')]
    found = problems(settings, {**GOOD, key: "  "})
    assert found[0][0] == "falai_django.E051" and key in found[0][1]


@pytest.mark.parametrize(("extra", "check_id", "key"), [
    ({"GRAPH_URL": "graph.facebook.com"}, "falai_django.E052", "GRAPH_URL"),
    ({"WINDOW": "close"}, "falai_django.E053", "WINDOW"),
    ({"TIMEOUT_S": 0}, "falai_django.E054", "TIMEOUT_S"),
    ({"PHONE_ID": "1"}, "falai_django.W050", "PHONE_ID"),
])
def test_wrong_values_and_unknown_keys_are_named(settings, extra, check_id, key):
    found = problems(settings, {**GOOD, **extra})
    assert [p[0] for p in found] == [check_id] and key in found[0][1]


def test_not_a_dict_is_an_error(settings):
    assert problems(settings, "123")[0][0] == "falai_django.E050"


def test_another_sender_is_a_warning(settings):
    found = problems(settings, GOOD, SENDER="falai_django.sending.log_sender")
    assert [p[0] for p in found] == ["falai_django.W051"]


def test_the_check_runs_with_manage_py_check(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.FALAI = {"AGENT": "whatsapp.agents.current_agent", "SENDER": SENDER,
                      "WHATSAPP": {**GOOD, "APP_SECRET": ""}}
    with pytest.raises(SystemCheckError, match=r'FALAI\["WHATSAPP"\]\["APP_SECRET"\]'):
        call_command("check")


def test_whatsapp_is_a_known_falai_key(settings):
    from falai_django.checks import check_falai_settings

    settings.FALAI = {"AGENT": "whatsapp.agents.current_agent", "SENDER": SENDER, "WHATSAPP": GOOD}
    assert "falai_django.W002" not in [p.id for p in check_falai_settings()]


def test_the_demo_switches_to_whatsapp_with_the_environment():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = ("import json, project.settings as s; "
              "print(json.dumps({'sender': s.FALAI.get('SENDER'), 'whatsapp': s.FALAI.get('WHATSAPP')}))")
    base = {k: v for k, v in os.environ.items() if not k.startswith("WHATSAPP_")}

    def demo(**env):
        run = subprocess.run([sys.executable, "-c", script], cwd=root, env={**base, **env},
                             capture_output=True, text=True, timeout=60, check=True)
        return json.loads(run.stdout.strip().splitlines()[-1])

    assert demo() == {"sender": None, "whatsapp": None}
    live = demo(WHATSAPP_PHONE_NUMBER_ID="123", WHATSAPP_ACCESS_TOKEN="tok", WHATSAPP_APP_SECRET="sec",
                WHATSAPP_VERIFY_TOKEN="ver", WHATSAPP_WINDOW="off")
    assert live["sender"] == SENDER
    assert {k: live["whatsapp"][k] for k in ("PHONE_NUMBER_ID", "ACCESS_TOKEN", "APP_SECRET", "VERIFY_TOKEN",
                                             "WINDOW")} == {"PHONE_NUMBER_ID": "123", "ACCESS_TOKEN": "tok",
                                                            "APP_SECRET": "sec", "VERIFY_TOKEN": "ver",
                                                            "WINDOW": None}
