"""Shared prompt machinery for the understand and speak calls (persistence-and-LLM note §6.1).

All scaffolding is English and this package's own wording; authored content (persona, asks,
prompts) stays in whatever language its author wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .fields import FieldDef, is_known, js_json
from .flows import split_phrases
from .templates import render

SAFE_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")


def join_sections(*parts: str | None) -> str:
    """Drop empty parts, join the rest with one blank line."""
    return "\n\n".join(p.strip() for p in parts if p and p.strip()).strip()


def identity_section(agent: Any, scope: Mapping[str, Any]) -> str:
    lines = [f'## Identity\nYou are "{agent.name}". Always call yourself by this name.']
    if agent.persona:
        lines.append(render(agent.persona, scope))
    if agent.goal:
        lines.append(f"Your goal: {render(agent.goal, scope)}")
    return "\n".join(lines)


def _kb_lines(value: Any, depth: int) -> list[str]:
    pad = "  " * depth
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.extend(_kb_entry(str(key), item, depth))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (Mapping, list)):
                out.extend(_kb_lines(item, depth))
            else:
                out.append(f"{pad}- {_kb_scalar(item)}")
    return out


def _kb_scalar(value: Any) -> str:
    return value if isinstance(value, str) else js_json(value)  # as JSON.stringify writes it


def _kb_entry(key: str, value: Any, depth: int) -> list[str]:
    pad = "  " * depth
    if isinstance(value, Mapping):
        return [f"{pad}- {key}:", *_kb_lines(value, depth + 1)]
    if isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
        out = [f"{pad}- {key}:"]
        for item in value:
            if isinstance(item, (Mapping, list)):
                out.extend(_kb_lines(item, depth + 1))
            else:
                out.append(f"{pad}  - {_kb_scalar(item)}")
        return out
    if isinstance(value, list):
        return [f"{pad}- {key}: {', '.join(_kb_scalar(v) for v in value)}"]
    return [f"{pad}- {key}: {_kb_scalar(value)}"]


def knowledge_section(knowledge_base: Any) -> str | None:
    if not knowledge_base:
        return None
    lines = _kb_lines(knowledge_base, 0)
    return "## Knowledge base\n" + "\n".join(lines) if lines else None


def is_templated(text: str | None) -> bool:
    return text is not None and "{{" in text


def stable_prefix(agent: Any, scope: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(system, inline): identity goes to the cacheable system half unless it is templated."""
    knowledge = knowledge_section(agent.knowledge_base)
    identity = identity_section(agent, scope)
    if is_templated(agent.persona) or is_templated(agent.goal):
        return (knowledge or None), identity
    return join_sections(identity, knowledge) or None, None


def cached_prefix(agent: Any, cache: dict[Any, Any], scope: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """`stable_prefix`, built once per agent when persona and goal hold no template."""
    if is_templated(agent.persona) or is_templated(agent.goal):
        return stable_prefix(agent, scope)
    prefix = cache.get("system")
    if prefix is None:  # the stable half is the same on every call
        prefix = cache["system"] = stable_prefix(agent, scope)
    return prefix


def facts_section(fields: Mapping[str, FieldDef], data: Mapping[str, Any]) -> str | None:
    lines = [f"- {slug}: {js_json(data[slug])}" for slug in fields if is_known(data.get(slug))]
    if not lines:
        return None
    return "## Already known\nThese facts are settled; never ask for them again.\n" + "\n".join(lines)


def describe_field(name: str, definition: FieldDef | None) -> str:
    if definition is None:
        return f"{name} (string)"
    text = f"{name} ({definition.type})"
    if definition.enum:
        text += " [" + " | ".join(js_json(v) if not isinstance(v, str) else v for v in definition.enum) + "]"
    if definition.description:
        text += f": {definition.description}"
    return text


def instructions_section(items: Iterable[Any], scope: Mapping[str, Any]) -> str | None:
    lines = []
    for ins in items:
        text = render(ins.prompt or "", scope).strip()
        if not text:
            continue
        line = f"- [{ins.kind or 'should'}] [Always] {text}"
        # `!`-phrases in `when` are exclusions, as in trigger phrase lists (docs/DECISIONS.md T19)
        counts, excludes = split_phrases(ins.when)
        clauses = []
        if counts:
            clauses.append("apply only when: " + " OR ".join(counts))
        if excludes:
            clauses.append("never when: " + " OR ".join(excludes))
        if clauses:
            line += " (" + "; ".join(clauses) + ")"
        lines.append(line)
    return "## Instructions\n" + "\n".join(lines) if lines else None


class Aliases:
    """Property names a provider accepts (`[a-zA-Z0-9_-]`), one counter shared by all prefixes.

    Each namespace (flows, branches, fields) has its own taken names; the counter is global.
    """

    def __init__(self) -> None:
        self.counter = 0
        self.to_wire: dict[str, dict[str, str]] = {}
        self.from_wire: dict[str, dict[str, str]] = {}

    def alias(self, namespace: str, name: str, prefix: str, force: bool = False) -> str:
        forward = self.to_wire.setdefault(namespace, {})
        if name in forward:
            return forward[name]
        back = self.from_wire.setdefault(namespace, {})
        if not force and SAFE_NAME.match(name) and name not in back:
            wire = name
        else:
            while True:
                self.counter += 1
                wire = f"{prefix}{self.counter}"
                if wire not in back:
                    break
        forward[name] = wire
        back[wire] = name
        return wire

    def real(self, namespace: str, wire: str) -> str:
        return self.from_wire.get(namespace, {}).get(wire, wire)
