"""History compaction (engine-turn.md §3.1, §7): trims the host's history once per turn,
before either model call, and counts one call when it wrote a summary.

The notes fix only the options and the accounting; the mechanics are this package's
(docs/DECISIONS.md T9): tool results are cut to `max_tool_result_chars`; when the history's
estimated size (4 characters a token) passes `max_tokens × compaction_threshold`, everything
but the last `preserve_recent_count` items is summarised by one provider call with no schema
name (ruling 6: `mock_provider(summary=[...])` answers it) and replaced by one system item.
A failed summary call leaves the (cut) history as it was and spends nothing on the turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from falai_django.llm.calling import call_provider
from falai_django.llm.types import GenerateInput, GenerateParameters, read_usage

from .prompt import join_sections

CHARS_PER_TOKEN = 4
SUMMARY_PREFIX = "Summary of the earlier conversation: "


def _content(item: Any) -> str:
    value = item.get("content") if isinstance(item, Mapping) else getattr(item, "content", None)
    return value if isinstance(value, str) else ""


def _role(item: Any) -> str:
    value = item.get("role") if isinstance(item, Mapping) else getattr(item, "role", None)
    return value if isinstance(value, str) else "user"


def _cut_tool_results(history: list[Any], limit: int) -> list[Any]:
    out = []
    for item in history:
        text = _content(item)
        if _role(item) == "tool" and len(text) > limit and isinstance(item, Mapping):
            item = {**item, "content": text[:limit] + f"\n[cut: {len(text)} characters, {limit} kept]"}
        out.append(item)
    return out


def estimate_tokens(history: list[Any]) -> int:
    return sum(len(_content(item)) for item in history) // CHARS_PER_TOKEN


def compact_history(agent: Any, history: list[Any], context: Any) -> tuple[list[Any], int, dict[str, int] | None]:
    """(history to use, calls spent, usage)."""
    options = agent.compaction
    if options is None or not options.enabled or not history:
        return history, 0, None
    history = _cut_tool_results(history, options.max_tool_result_chars)
    if estimate_tokens(history) <= options.max_tokens * options.compaction_threshold:
        return history, 0, None
    keep = options.preserve_recent_count
    if len(history) <= keep:
        return history, 0, None
    older, recent = history[:-keep], history[-keep:]
    transcript = "\n".join(f"{_role(item)}: {_content(item)}" for item in older if _content(item))
    prompt = join_sections(
        "## Task\nSummarise the conversation below for the assistant who continues it. Keep every fact the "
        "customer gave, what was promised, and what is still open. Write plain prose, no lists, no JSON.",
        f"## Conversation\n{transcript}",
    )
    try:
        output = call_provider(agent.provider, GenerateInput(
            prompt=prompt, history=[], context=context,
            parameters=GenerateParameters(json_schema={}, schema_name=None)))
    except Exception:  # a summary is an optimisation: never fail the turn over it
        return history, 0, None
    summary = (output.message or "").strip()
    if not summary:
        return history, 0, None
    return [{"role": "system", "content": SUMMARY_PREFIX + summary}, *recent], 1, read_usage(output.metadata)
