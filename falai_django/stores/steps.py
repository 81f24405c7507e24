"""A store whose load, save and initialize are written once, as steps, for sync and async clients.

Prisma's and OpenSearch's Python clients come in two kinds: plain (prisma-client-py's
`interface = "sync"`, `opensearchpy.OpenSearch`) and async (prisma-client-py's default,
`opensearchpy.AsyncOpenSearch`). Rather than two copies of each compare-and-swap, a backend
writes generators that *yield* the client calls they want made, as `(method, arguments)`, and
receive each call's result (or its exception, thrown in, so a conflict is caught where the
step reads). `SteppedStore` drives them:

- the plain methods (`load`, `save`, `initialize`, `close`) make each call in place; meeting a
  coroutine (an async client called from plain code) they run the rest on a private event
  loop, or, when a loop already runs in the thread and nothing here can wait, refuse loudly.
  A backend whose async client is bound to the loop it first ran in (aiohttp's session, under
  `AsyncOpenSearch`) sets `sync_hint` instead: its plain methods refuse an async client at
  once and name the plain client to pass;
- the async twins (`aload`, `asave`, `ainitialize`, `aclose`) await what needs awaiting and take
  a plain client's results as they come.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from falai_django.engine.session import Session

from .base import Store

__all__ = ["Call", "Steps", "SteppedStore", "method_of", "takes_keywords"]

# a call a step wants made: (the client's method, its arguments by name)
Call = tuple[Callable[..., Any], dict[str, Any]]
_R = TypeVar("_R")
# the steps of one operation: they yield calls, are sent each call's result, and return `_R`
Steps = Generator[Call, Any, _R]


def method_of(obj: Any, *names: str) -> Callable[..., Any] | None:
    """The first of `names` that is a method of `obj` (Python clients' names, then Node's)."""
    for name in names:
        value = getattr(obj, name, None)
        if callable(value):
            method: Callable[..., Any] = value
            return method
    return None


def takes_keywords(method: Callable[..., Any], names: tuple[str, ...]) -> bool:
    """Python clients take their arguments by name (`where=`, `index=`); a Node-shaped client's
    methods take one object holding them."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is p.VAR_KEYWORD or p.name in names for p in parameters)


class SteppedStore(Store):
    """Subclasses give `_load_steps`, `_save_steps`, optionally `_initialize_steps` and
    `_close_method`, and name their client's methods with `_learn_calling` so each call is made
    the way that method takes its arguments."""

    # for the error a plain method raises on an async client inside a running loop
    label = "Store"
    client_kind = "this"
    # set when an async client cannot move between event loops: the plain client to use instead
    sync_hint: str | None = None
    # method -> True when it takes its arguments by name, False when it takes one object;
    # a method not learnt (a close method) is called by name
    _keywords: Mapping[Callable[..., Any], bool] = MappingProxyType({})

    # -- what a backend writes ------------------------------------------------------------

    def _load_steps(self, session_id: str) -> Steps[Session | None]:
        raise NotImplementedError

    def _save_steps(self, session: Session, expected_version: int) -> Steps[Session]:
        raise NotImplementedError

    def _initialize_steps(self) -> Steps[None]:
        """Nothing to create, unless a backend says otherwise."""
        return
        yield  # a generator that makes no call

    def _close_method(self) -> Callable[[], Any] | None:
        return None

    def _learn_calling(self, methods: Iterable[Callable[..., Any]], names: tuple[str, ...]) -> None:
        """Read each method's calling convention once, from its signature (`takes_keywords`)."""
        self._keywords = {method: takes_keywords(method, names) for method in methods}

    def _close_steps(self) -> Steps[None]:
        method = self._close_method()
        if method is not None:
            yield method, {}

    def _invoke(self, call: Call) -> Any:
        method, arguments = call
        return method(**arguments) if self._keywords.get(method, True) else method(arguments)

    # -- the drivers ------------------------------------------------------------------------

    def _refuse_inside_a_loop(self, result: Awaitable[Any], close: Callable[[], Any] | None,
                              instead: str) -> None:
        """A plain method meeting a coroutine runs it on a private loop, unless a loop already
        runs in this thread (nothing can wait for it here) or the client is bound to its first
        loop (`sync_hint`): then it is closed and refused."""
        if self.sync_hint is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return
        if inspect.iscoroutine(result):
            result.close()
        if close is not None:
            close()
        if self.sync_hint is not None:
            raise TypeError(f"[{self.label}] this {self.client_kind} client is async: await {instead}, "
                            f"or pass {self.sync_hint} to call the plain methods.")
        raise TypeError(f"[{self.label}] this {self.client_kind} client is async and an event loop is running: "
                        f"await {instead}.")

    def _run(self, steps: Steps[_R], instead: str) -> _R:
        try:
            call = next(steps)
            while True:
                try:
                    result = self._invoke(call)
                except Exception as exc:  # handed to the steps: a conflict is recognised there
                    call = steps.throw(exc)
                    continue
                if inspect.isawaitable(result):  # an async client called through a plain method
                    self._refuse_inside_a_loop(result, steps.close, instead)
                    return asyncio.run(self._arun(steps, result))
                call = steps.send(result)
        except StopIteration as done:
            value: _R = done.value
            return value

    async def _arun(self, steps: Steps[_R], pending: Any = None) -> _R:
        """Drive the steps, awaiting each call; `pending` is a call already made (by `_run`)."""
        try:
            call = next(steps) if pending is None else None
            while True:
                try:
                    if pending is None:
                        assert call is not None  # set whenever pending is None
                        pending = self._invoke(call)
                    result = await pending if inspect.isawaitable(pending) else pending
                except Exception as exc:
                    call = steps.throw(exc)
                    continue
                finally:
                    pending = None
                call = steps.send(result)
        except StopIteration as done:
            value: _R = done.value
            return value

    # -- the contract ---------------------------------------------------------------------

    def load(self, session_id: str) -> Session | None:
        return self._run(self._load_steps(session_id), "store.aload(...) and store.asave(...)")

    async def aload(self, session_id: str) -> Session | None:
        """See load(); awaits an async client's calls, runs a sync one's in place."""
        return await self._arun(self._load_steps(session_id))

    def save(self, session: Session, expected_version: int) -> Session:
        return self._run(self._save_steps(session, expected_version), "store.aload(...) and store.asave(...)")

    async def asave(self, session: Session, expected_version: int) -> Session:
        """See save()."""
        return await self._arun(self._save_steps(session, expected_version))

    def initialize(self) -> None:
        self._run(self._initialize_steps(), "store.ainitialize()")

    async def ainitialize(self) -> None:
        """See initialize()."""
        await self._arun(self._initialize_steps())

    def disconnect(self) -> None:
        """Close the client passed in, when it has a method for it."""
        self._run(self._close_steps(), "store.adisconnect()")

    async def adisconnect(self) -> None:
        """See disconnect(); awaits an async client's."""
        await self._arun(self._close_steps())

    def close(self) -> None:
        """The same as disconnect()."""
        self.disconnect()

    async def aclose(self) -> None:
        """The same as adisconnect()."""
        await self.adisconnect()
