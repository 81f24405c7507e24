"""Ana, the demo agent: the triage of "Go to production", plus a silence follow-up and an event.

`FALAI = {"AGENT": "project.agents.ana"}` points here. `ana` is built on first use (a module
`__getattr__`), so importing this module or the settings never needs a key or the network.

- **Provider.** Picked from the environment (`make_provider`), first match wins:
  `GEMINI_API_KEY` -> `GeminiProvider`; `OPENAI_BASE_URL` -> `OpenAICompatibleProvider` on that
  local or compatible server; `OPENAI_API_KEY` -> `OpenAIProvider`; `ANTHROPIC_API_KEY` ->
  `AnthropicProvider`; none -> the package's `OfflineProvider` (deterministic, no network,
  every reply marked "[offline]"). `FALAI_DEMO_PROVIDER` (gemini, openai, local, anthropic,
  offline) picks one when several are set; `GEMINI_MODEL`, `OPENAI_MODEL`, `ANTHROPIC_MODEL`
  choose the models.
- **Triagem** is Ana exactly as the page writes her: `nome`, `empresa`, `tamanho`,
  `confirmado`, and the confirm loop back to `quem`.
- **Lembrete** (silence): ten minutes after Ana last spoke with no answer, she nudges once.
- **Agenda** (event `demo_agendada`, payload `{"quando": "..."}`): she confirms the demo at
  once, then a one-day timer sends a reminder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from falai_django import AnthropicProvider, GeminiProvider, OpenAICompatibleProvider, OpenAIProvider, falai
from falai_django.channels import whatsapp
from falai_django.providers.offline import OfflineProvider

GEMINI_MODEL = "gemini-2.5-flash"
OPENAI_MODEL = "gpt-4.1-mini"
LOCAL_MODEL = "llama3.2"  # what a local OpenAI-compatible server (Ollama, vLLM, LM Studio) serves
ANTHROPIC_MODEL = "claude-sonnet-4-5"
PROVIDER_CHOICES = ("gemini", "local", "openai", "anthropic", "offline")  # in the order they are tried

f = falai().fields({
    "nome": {"type": "string", "ask": "Pergunte o nome da pessoa, sem tom de formulário."},
    "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
    "tamanho": {
        "type": "string",
        "enum": ["1-10", "11-50", "51-200", "200+"],
        "ask": "Pergunte quantas pessoas trabalham lá e ofereça as faixas.",
    },
    "confirmado": {"type": "boolean", "ask": "Resuma em uma frase o que anotou e pergunte se está tudo certo."},
})

TRIAGEM = f.flow({
    "id": "triagem",
    "name": "Triagem",
    "on": [{"message": []}],
    "steps": [
        {"id": "quem", "prompt": "Descubra quem é e de onde fala.", "collect": ["nome", "empresa"]},
        {"id": "porte", "collect": ["tamanho"], "maxAsks": 2},
        {"id": "confirma", "collect": ["confirmado"]},
        {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "quem", "clear": ["confirmado"]}},
        {"id": "tchau", "prompt": "Agradeça e diga que um vendedor continua daqui."},
    ],
})

LEMBRETE = f.flow({
    "id": "lembrete",
    "name": "Lembrete",
    "description": "Traz de volta quem ficou em silêncio.",
    "on": [{"silence": "10m"}],
    "steps": [
        {"id": "onde", "if": {"equals": {"confirmado": True}}, "else": "retoma"},
        {"id": "depois", "say": "Oi de novo! Um vendedor já está com o seu contato. Ficou alguma dúvida?",
         "then": "end"},
        {"id": "retoma", "say": "Oi! Ainda está por aí? Quando quiser, seguimos a triagem de onde paramos."},
    ],
})

AGENDA = f.flow({
    "id": "agenda",
    "name": "Agenda",
    "description": "A demonstração foi marcada no sistema de vendas.",
    "on": [{"event": "demo_agendada"}],
    "steps": [
        # The promise is what the wait below does: one day after this message, not "the day before".
        {"id": "avisa", "say": "Prontinho! Sua demonstração ficou marcada para {{input.quando}}. "
                               "Amanhã, neste mesmo horário, te mando um lembrete."},
        {"id": "vespera", "wait": "1d"},
        {"id": "lembra", "say": "Lembrete: a sua demonstração é {{input.quando}}. Até lá!"},
    ],
})


def provider_choice(env: Mapping[str, str]) -> str:
    """Which provider the environment names (see the module docstring); "offline" when none."""
    forced = env.get("FALAI_DEMO_PROVIDER", "").strip().lower()
    if forced:
        if forced not in PROVIDER_CHOICES:
            raise ValueError(f'FALAI_DEMO_PROVIDER is "{forced}": it must be one of {", ".join(PROVIDER_CHOICES)}.')
        return forced
    if env.get("GEMINI_API_KEY"):
        return "gemini"
    if env.get("OPENAI_BASE_URL"):
        return "local"
    if env.get("OPENAI_API_KEY"):
        return "openai"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "offline"


def make_provider(api_key: str | None = None, env: Mapping[str, str] | None = None) -> Any:
    """The provider the environment picks; `api_key` given means Gemini with that key ("" means offline)."""
    env = os.environ if env is None else env
    choice = ("gemini" if api_key else "offline") if api_key is not None else provider_choice(env)
    if choice == "gemini":
        return GeminiProvider(api_key=api_key or env.get("GEMINI_API_KEY", ""),
                              model=env.get("GEMINI_MODEL", GEMINI_MODEL))
    if choice == "local":  # a local server usually ignores the key, but the SDK wants one
        return OpenAICompatibleProvider(api_key=env.get("OPENAI_API_KEY") or "local", name="local",
                                        model=env.get("OPENAI_MODEL", LOCAL_MODEL),
                                        base_url=env.get("OPENAI_BASE_URL") or None)
    if choice == "openai":
        return OpenAIProvider(api_key=env.get("OPENAI_API_KEY", ""), model=env.get("OPENAI_MODEL", OPENAI_MODEL))
    if choice == "anthropic":
        return AnthropicProvider(api_key=env.get("ANTHROPIC_API_KEY", ""),
                                 model=env.get("ANTHROPIC_MODEL", ANTHROPIC_MODEL))
    try:  # how slowly the offline replies stream in, so the demo shows streaming
        delay_ms = max(0.0, float(env.get("FALAI_OFFLINE_DELAY_MS", "12")))
    except ValueError:
        delay_ms = 12.0
    return OfflineProvider(language="pt", chunk_delay_s=delay_ms / 1000)


def build_ana(provider: Any = None, clock: Any = None) -> Any:
    """A fresh Ana (tests pass their own provider and clock)."""
    return f.agent(
        name="Ana",
        provider=provider if provider is not None else make_provider(),
        flows=[TRIAGEM, LEMBRETE, AGENDA],
        # On WhatsApp a flow can send an approved template outside the 24-hour window:
        # {"do": "whatsapp_template", "with": {"name": "...", "body": ["{{data.nome}}"]}}
        actions={whatsapp.TEMPLATE_ACTION: f.action(**whatsapp.template_action())},
        events={
            "demo_agendada": f.event(),
            # A human's reply from the admin counts as Ana speaking (silence timers re-arm).
            "humano_respondeu": f.event(direction="outbound"),
        },
        clock=clock,
    )


_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    if name == "ana":
        if "ana" not in _built:
            _built["ana"] = build_ana()
        return _built["ana"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
