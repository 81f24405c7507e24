"""`manage.py check --deploy`: the app warns (`falai_django.W011`) when the HTTPS redirect would
answer the health probes, which come over plain HTTP, with a 301."""

from __future__ import annotations

import pytest

from falai_django.checks import check_probes_not_redirected


def _ids(problems) -> list[str]:
    return [problem.id for problem in problems]


def test_redirecting_the_probes_is_a_warning_naming_them_and_the_fix(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^admin/"]
    [problem] = check_probes_not_redirected()
    assert problem.id == "falai_django.W011"
    assert "/falai/health/live, /falai/health/ready" in problem.msg
    assert problem.hint == 'Add r"^falai/health/" to SECURE_REDIRECT_EXEMPT (README "Production").'


@pytest.mark.parametrize(("redirect", "exempt"), [
    (True, [r"^falai/health/"]),   # the README's block
    (True, [r"^falai/"]),
    (False, []),                   # nothing redirected
])
def test_no_warning_when_the_probes_are_answered(settings, redirect, exempt):
    settings.SECURE_SSL_REDIRECT = redirect
    settings.SECURE_REDIRECT_EXEMPT = exempt
    assert _ids(check_probes_not_redirected()) == []


def test_one_probe_left_redirected_is_named_alone(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^falai/health/live$"]
    [problem] = check_probes_not_redirected()
    assert "(/falai/health/ready)" in problem.msg


def test_the_check_runs_with_check_deploy_only(settings):
    from django.core.checks import registry

    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = []
    assert "falai_django.W011" not in _ids(registry.run_checks(include_deployment_checks=False))
    assert "falai_django.W011" in _ids(registry.run_checks(include_deployment_checks=True))
