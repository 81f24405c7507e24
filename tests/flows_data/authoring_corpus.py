"""Flows written the ways people write them, for the agent in `agents.py` (fields nome, empresa,
cidade; action notify(message); event pedido; condition vip; tool lookup): the README's short
form, snake_case spellings, the strict FlowSpec a model answers with, and keys the strict form
leaves to code. Each is accepted by the server's check. `mutations` derives broken and odd
variants of them, to hold the authoring schema to the server's verdict."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

VALID: list[dict[str, Any]] = [
    {"id": "curto", "steps": [{"id": "quem", "collect": ["nome"]}, {"id": "tchau", "say": "Obrigada!"}]},
    {"id": "readme", "name": "Boas-vindas", "on": [{"message": []}],
     "steps": [{"id": "quem", "prompt": "Descubra quem é.", "collect": ["nome"]},
               {"id": "tchau", "prompt": "Agradeça e diga que um vendedor continua daqui."}]},
    {"id": "tudo", "name": "Tudo", "description": "Every kind of step", "onEnd": "stay",
     "on": [{"message": ["orçamento", "-cancelar"], "repeat": "always"},
            {"mention": ["empresa"], "extract": {"empresa": "the company"}},
            {"silence": "2h", "businessHours": True, "repeat": {"cooldown": "1d"}},
            {"event": "pedido", "after": "5m", "if": {"known": ["nome"]}}],
     "while": {"silenced": False}, "collect": ["nome", "empresa"], "clearOnStart": ["cidade"],
     "tools": ["lookup"],
     "instructions": [{"prompt": "Be brief.", "kind": "must"}, {"prompt": "No prices.", "when": ["price"]}],
     "steps": [
         {"id": "quem", "collect": ["nome", "empresa"], "question": "Qual é o seu nome?", "maxAsks": 2,
          "branches": [{"when": "wants a human", "then": "aviso"}, {"if": {"vip": True}, "then": {"step": "fim"}}],
          "ask": {"nome": "Seu nome?"}, "tools": ["lookup"], "label": "Quem é"},
         {"id": "aviso", "do": "notify", "with": {"message": "novo lead"}, "onFail": "fim"},
         {"id": "espera", "wait": "1d", "businessHours": True, "else": "quem",
          "branches": [{"if": {"equals": {"nome": "Ana"}}, "then": "fim"}]},
         {"id": "evento", "wait": {"event": "pedido", "upTo": "3d"}, "else": "end"},
         {"id": "se", "if": {"known": ["cidade"]}, "then": "fim", "else": {"step": "quem", "clear": ["nome"]}},
         {"id": "fala", "prompt": "Diga algo.", "instructions": [{"prompt": "Sorria."}]},
         {"id": "fim", "say": "Até logo", "once": True, "then": {"flow": "curto"}},
     ]},
    {"id": "snake", "on_end": "reset", "clear_on_start": ["nome"],
     "steps": [{"id": "a", "collect": ["nome"], "max_asks": 1},
               {"id": "b", "wait": "1h", "business_hours": False, "else_": "a"},
               {"id": "c", "wait": {"event": "pedido", "up_to": "1d"}},
               {"id": "d", "do": "notify", "with_": {"message": "x"}, "on_fail": "end"},
               {"id": "e", "if_": {"known": ["nome"]}, "then_": "end"}]},
    {"id": "strict", "name": "Strict", "description": None, "on": [{"message": [], "if": None, "repeat": None}],
     "anchor": None, "while": None, "collect": None, "clearOnStart": None, "onEnd": None, "instructions": None,
     "steps": [
         {"id": "quem", "label": None, "then": None, "kind": "collect", "collect": ["nome"], "prompt": None,
          "question": None, "maxAsks": None, "branches": None},
         {"id": "tchau", "label": None, "then": None, "kind": "say", "say": "Tchau", "media": None, "once": None},
     ]},
    {"id": "kinds", "steps": [{"id": "p", "kind": "prompt", "prompt": "Oi"},
                              {"id": "w", "kind": "waitEvent", "wait": {"event": "pedido"}}]},
    {"id": "vazio", "steps": []},
    {"id": "extra", "ui": {"color": "red"}, "steps": [{"id": "a", "say": "x", "ui": {"x": 1}, "notes": "kept"}]},
]

# What the server refuses, each for a reason the schema can see.
INVALID: list[dict[str, Any]] = [
    {"id": "x", "steps": [{"id": "a", "collect": ["idade"]}]},  # unknown field
    {"id": "x", "steps": [{"id": "a", "do": "nope"}]},  # unknown action
    {"id": "x", "steps": [{"id": "a", "say": 3}]},  # not text
    {"id": "x", "onEnd": "restart", "steps": []},  # not one of
    {"id": "x", "steps": [{"say": "no id"}]},  # no id
    {"id": "x", "steps": "none"},  # not a list
    {"id": "x", "on": [{"event": "nope"}], "steps": []},  # unknown event
    {"id": "x", "steps": [{"id": "a", "if": {"nope": 1}, "then": "end"}]},  # unknown condition
    {"id": "x", "steps": [{"id": "a", "do": "notify", "with": {"message": 3}}]},  # wrong parameter type
    {"id": "x", "steps": [{"id": "a", "collect": ["nome"], "branches": [{"when": "y"}]}]},  # branch without then
]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _paths(sub, (*path, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _paths(sub, (*path, i))


def _set(root: Any, path: tuple[Any, ...], how: str, value: Any = None) -> Any:
    out = copy.deepcopy(root)
    parent = out
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "rename":
        parent[f"{last}x"] = parent.pop(last)
    else:
        parent[last] = value
    return out


REPLACEMENTS: list[Any] = [None, "", "nome", "pedido", "end", 0, 2.5, True, [], ["nome"], {}]


def mutations(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every spec one edit away from `spec`: each key deleted or renamed, each value replaced by
    each of a few values of other types and names (the flow's own id left alone)."""
    for path in _paths(spec):
        if not path or path == ("id",):
            continue
        yield _set(spec, path, "delete")
        if isinstance(path[-1], str):
            yield _set(spec, path, "rename")
        for value in REPLACEMENTS:
            yield _set(spec, path, "replace", value)
