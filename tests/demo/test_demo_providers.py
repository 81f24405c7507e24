"""The demo picks its provider from the environment (GEMINI_API_KEY, OPENAI_BASE_URL,
OPENAI_API_KEY, ANTHROPIC_API_KEY; offline otherwise), the banner's label says which, and Ana
answers through a local OpenAI-compatible server when OPENAI_BASE_URL points at one."""

from __future__ import annotations

import pytest
from providers import fake_vendors as fv

from falai_django import AnthropicProvider, GeminiProvider, OpenAICompatibleProvider, OpenAIProvider
from falai_django.playground.drive import provider_label
from falai_django.providers.offline import OfflineProvider
from falai_django.testing import fake_clock
from project.agents import build_ana, make_provider, provider_choice

from .support import START


@pytest.mark.parametrize(("env", "choice"), [
    ({}, "offline"),
    ({"GEMINI_API_KEY": "g"}, "gemini"),
    ({"OPENAI_API_KEY": "o"}, "openai"),
    ({"ANTHROPIC_API_KEY": "a"}, "anthropic"),
    ({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "local"),
    ({"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": "http://127.0.0.1:8001/v1"}, "local"),
    ({"GEMINI_API_KEY": "g", "OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a"}, "gemini"),
    ({"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a"}, "openai"),
    ({"GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a", "FALAI_DEMO_PROVIDER": "Anthropic"}, "anthropic"),
    ({"GEMINI_API_KEY": "", "OPENAI_API_KEY": ""}, "offline"),
])
def test_the_environment_picks_the_provider(env, choice):
    assert provider_choice(env) == choice


def test_an_unknown_forced_provider_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r'FALAI_DEMO_PROVIDER is "mistral": it must be one of gemini, local'):
        provider_choice({"FALAI_DEMO_PROVIDER": "mistral"})


def test_each_choice_builds_its_provider_and_the_label_names_it():
    cases = [
        ({"GEMINI_API_KEY": "g"}, GeminiProvider, "gemini (gemini-2.5-flash)"),
        ({"OPENAI_API_KEY": "o", "OPENAI_MODEL": "gpt-4.1"}, OpenAIProvider, "openai (gpt-4.1)"),
        ({"ANTHROPIC_API_KEY": "a"}, AnthropicProvider, "anthropic (claude-sonnet-4-5)"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, OpenAICompatibleProvider,
         "local (llama3.2 at http://127.0.0.1:11434/v1)"),
        ({}, OfflineProvider, None),
    ]
    for env, cls, label in cases:
        provider = make_provider(env=env)
        try:
            assert type(provider) is cls
            text = provider_label(build_ana(provider=provider))
            if label is None:
                assert text.startswith("offline (no GEMINI_API_KEY or other model key:")
            else:
                assert text == label
                assert "None" not in text
        finally:
            close = getattr(provider, "close", None)
            if close is not None:
                close()


def test_ana_answers_through_a_local_openai_compatible_server():
    server = fv.FakeVendor(responder=lambda recorded: fv.Reply(events=fv.chat_text(
        '{"message": "Oi! Eu sou a Ana. Como posso te chamar?", "nome": null}', 4)))
    provider = make_provider(env={"OPENAI_BASE_URL": server.url("/v1"), "OPENAI_MODEL": "qwen2.5"})
    try:
        ana = build_ana(provider=provider, clock=fake_clock(START))
        result = ana.turn(session_id="5511999990000", message="oi", id="wamid.1", session=None, history=[])
    finally:
        provider.close()
        server.close()
    assert [m.text for m in result.messages][-1] == "Oi! Eu sou a Ana. Como posso te chamar?"
    assert {r.path for r in server.requests} == {"/v1/chat/completions"}
    assert {r.body["model"] for r in server.requests} == {"qwen2.5"}
    assert server.requests[0].headers["authorization"] == "Bearer local"  # the SDK needs some key
