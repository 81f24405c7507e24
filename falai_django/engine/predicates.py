"""Predicates: functions or ConditionSpec dicts, judged by code (authoring note §6.0).

A ConditionSpec is an AND over its keys; a key whose value is `None` is skipped and `{}`
holds. Built-ins: `equals` (strict, structural), `known`, `silenced`; any other key calls the
agent's named condition `check(ctx, arg)`. There is no `not`/`any`/`or`.

Public names: `PredicateContext`, `ActionContext`, `ToolContext`, `Condition`,
`evaluate(pred, ctx, conditions)`, `silenced_reason(silenced)`, `BUILT_IN_CONDITIONS`,
and the JS equality helpers re-exported from `fields` (`strict_equal`, `deep_equal`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import FlowConfigurationError
from .fields import UNSET, deep_equal, is_known, strict_equal

__all__ = [
    "BUILT_IN_CONDITIONS", "ActionContext", "Condition", "DefinitionLike", "PredicateContext", "ToolContext",
    "condition_check", "deep_equal", "evaluate", "silenced_reason", "strict_equal",
]

BUILT_IN_CONDITIONS: tuple[str, ...] = ("equals", "known", "silenced")


@dataclass
class PredicateContext:
    """What a predicate function and a named condition's `check(ctx, arg)` receive.

    Attributes:
        context: the host context passed to this turn (None when none).
        data: the session's collected data — live and partial; read it, don't replace it.
        input: the run's input (event payload, start input, mention extract, chain input);
            None when there is no run or the run has none.
        run: the run being judged (a draft run for message eligibility and silence arming);
            None for agent/idle instructions while the idle speaker answers.
        silenced: the host's silence reason for this turn, or None when not silenced.
        now: the agent clock's time for this turn (aware UTC datetime).
    """

    context: Any = None
    data: Mapping[str, Any] = field(default_factory=dict)
    input: Any = None
    run: Any = None
    silenced: str | None = None
    now: datetime | None = None


@dataclass
class ActionContext(PredicateContext):
    """The second argument of an action's `run(params, ctx)`.

    Adds to `PredicateContext`:
        key: `<runId>:<stepId>:<visit>` — the idempotency key; the same on replay and on a
            deferred re-run. Use it to make the side effect at-least-once safe.
        dedupe_key: `<flowId>:<anchor>:<nonce>` of the run.
    `set(patch)` shallow-merges `patch` into the session's data at once (no coercion, no enum
    check); a value of None (or UNSET) removes the key, making the field unknown again. The
    turn engine passes the live session-data dict as `data`, and may pass `on_set` to learn
    about each patch.
    """

    key: str = ""
    dedupe_key: str = ""
    on_set: Callable[[Mapping[str, Any]], None] | None = field(default=None, repr=False)

    def set(self, patch: Mapping[str, Any]) -> None:
        data = self.data
        if isinstance(data, MutableMapping):
            for name, value in patch.items():
                if value is None or value is UNSET:
                    data.pop(name, None)  # JS `undefined`: the key disappears from the blob
                else:
                    data[name] = value
        if self.on_set is not None:
            self.on_set(dict(patch))


@dataclass
class ToolContext:
    """The second argument of a tool's `handler(args, ctx)`.

    Attributes:
        context: host context; data: session data at call start plus earlier rounds' `data`;
        history: host history plus this call's tool rounds; run: the speaking run (None for the
        idle speaker); now: the agent clock's time.
    """

    context: Any = None
    data: Mapping[str, Any] = field(default_factory=dict)
    history: list[Any] = field(default_factory=list)
    run: Any = None
    now: datetime | None = None


class DefinitionLike:
    """Read access as a dict for the toolkit's definition objects (`Action`, `Event`,
    `Condition`): upstream's `f.action(def)`, `f.event()` and `f.condition(check)` return
    plain objects (`{parameters, run}`, `{}`, `{check}`), so these compare equal to those dicts
    and answer `x["run"]`, `dict(x)` and `**x`, while keeping their attributes. Keys are the
    dataclass fields that are set (not None)."""

    __slots__ = ()

    if TYPE_CHECKING:  # the dataclass this is mixed into has them
        __dataclass_fields__: ClassVar[dict[str, Any]]

    def keys(self) -> list[str]:
        return [name for name in self.__dataclass_fields__ if getattr(self, name) is not None]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.keys() else default

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return {k: self[k] for k in self.keys()} == dict(other)
        if type(other) is type(self):
            return all(getattr(self, n) == getattr(other, n) for n in self.__dataclass_fields__)
        return NotImplemented

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Condition(DefinitionLike):
    """A named condition, registered in the agent's `conditions` under its name.
    `check(ctx, arg)` gets the PredicateContext and the (unvalidated) argument from the spec.
    Reads as the dict `{"check": check}` too."""

    check: Callable[[PredicateContext, Any], bool]


def condition_check(condition: Any) -> Callable[[Any, Any], bool] | None:
    """The check function of a registered condition: a `Condition`, an object with `.check`,
    a dict {"check": fn}, or a bare callable `(ctx, arg) -> bool`."""
    if isinstance(condition, Mapping):
        check = condition.get("check")
    else:
        check = getattr(condition, "check", None)
        if check is None and callable(condition):
            check = condition
    return check if callable(check) else None


def silenced_reason(silenced: Any) -> str | None:
    """The reason string of any `silenced` form (str, {"reason", ...}), or None when not set."""
    if silenced is None or silenced is False:
        return None
    if isinstance(silenced, str):
        return silenced
    if isinstance(silenced, Mapping):
        reason = silenced.get("reason")
        return reason if isinstance(reason, str) else ""
    reason = getattr(silenced, "reason", None)
    return reason if isinstance(reason, str) else str(silenced)


def evaluate(pred: Any, ctx: PredicateContext, conditions: Mapping[str, Any] | None = None) -> bool:
    """Judge a predicate. None holds; a callable is called with `ctx`; a dict is an AND over
    its keys. An unregistered condition name raises FlowConfigurationError."""
    if pred is None:
        return True
    if callable(pred) and not isinstance(pred, Mapping):
        return bool(pred(ctx))
    data = ctx.data or {}
    for name, arg in pred.items():
        if arg is None or arg is UNSET:
            continue
        if name == "equals":
            holds = all(deep_equal(data.get(slug, UNSET), value) for slug, value in arg.items())
        elif name == "known":
            holds = all(is_known(data.get(slug, UNSET)) for slug in arg)
        elif name == "silenced":
            holds = (ctx.silenced is not None) == bool(arg)
        else:
            check = condition_check((conditions or {}).get(name))
            if check is None:
                raise FlowConfigurationError(
                    f'unknown condition "{name}": it is not one of the agent\'s conditions. '
                    "Add it to the agent's conditions, or correct the name in the flow."
                )
            holds = bool(check(ctx, arg))
        if not holds:
            return False
    return True
