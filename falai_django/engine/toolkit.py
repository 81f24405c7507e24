"""`falai()`: the authoring toolkit (authoring note §1).

    f = falai().fields({"nome": {"type": "string", "ask": "..."}})
    notify = f.action(parameters={"message": {"type": "string"}}, run=lambda params, ctx: {"ok": True})
    agent = f.agent(name="Ana", provider=provider, flows=[f.flow({...})], actions={"notify": notify})

The toolkit only builds plain values; every check happens when the agent is built.
`f.fields` is both the call that binds fields (`falai().fields({...})`) and, on a bound
toolkit, a read-only mapping of the definitions (`{"fields": f.fields}` works as registries).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .agent import Action, Agent, Event, Tool
from .predicates import Condition
from .spec import from_spec

__all__ = ["Toolkit", "falai"]


class _Fields(Mapping[str, Any]):
    """The toolkit's field definitions; calling it binds new ones (returns a new toolkit)."""

    def __init__(self, defs: Mapping[str, Any]) -> None:
        self._defs = dict(defs)

    def __call__(self, defs: Mapping[str, Any]) -> Toolkit:
        return Toolkit(defs)

    def __getitem__(self, key: str) -> Any:
        return self._defs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._defs)

    def __len__(self) -> int:
        return len(self._defs)

    def __repr__(self) -> str:
        return f"fields({self._defs!r})"


class Toolkit:
    """A root toolkit (`falai()`, no fields) or one bound to field definitions."""

    def __init__(self, fields: Mapping[str, Any] | None = None) -> None:
        self.fields = _Fields(fields or {})

    def flow(self, flow: Mapping[str, Any] | None = None, /, **kwargs: Any) -> dict[str, Any]:
        """A flow as a dict (one dict, keyword arguments, or both merged). Not checked here;
        Python keywords may be spelled `while_`, `if_`, `else_`."""
        out = dict(flow or {})
        out.update(kwargs)
        return out

    def from_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """See `spec.from_spec`."""
        return from_spec(spec)

    def action(
        self,
        definition: Mapping[str, Any] | None = None,
        /,
        *,
        parameters: Mapping[str, Any] | None = None,
        run: Callable[..., Any] | None = None,
        description: str | None = None,
    ) -> Action:
        """An action: `parameters` (name → ParamDef) and `run(params, ctx) -> result dict`."""
        if definition is not None:
            return Action.of(definition, "action")
        return Action.of({"parameters": parameters or {}, "run": run, "description": description}, "action")

    def event(self, definition: Mapping[str, Any] | None = None, /, *, direction: str | None = None) -> Event:
        """An event; `direction` is "inbound", "outbound" or None."""
        if definition is not None:
            return Event.of(definition, "event")
        return Event.of({"direction": direction}, "event")

    def condition(self, check: Callable[[Any, Any], bool]) -> Condition:
        """A named condition: `check(ctx, arg) -> bool`."""
        if not callable(check):
            raise TypeError("condition(check) needs a function (ctx, arg) -> bool")
        return Condition(check=check)

    def tool(self, definition: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Tool:
        """A tool: `id`, `handler(args, ctx)`, optional `description`, `parameters` (JSON Schema
        object) and gates. Plain dicts work too; this only spells the shape out."""
        raw = dict(definition or {})
        raw.update(kwargs)
        return Tool.of(raw, 0)

    def agent(self, **options: Any) -> Agent:
        """`Agent(**options, fields=<this toolkit's fields>)`."""
        if "fields" in options:
            raise TypeError("f.agent() takes its fields from the toolkit; declare them with falai().fields({...})")
        return Agent(fields=dict(self.fields), **options)


def falai() -> Toolkit:
    """The root toolkit; `.fields({...})` binds the agent's fields."""
    return Toolkit()
