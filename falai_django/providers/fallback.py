"""`FallbackProvider`: whole providers tried in order, with per-kind cooldowns (persistence-and-LLM note §5.5).

::

    provider = FallbackProvider(providers=[primary, backup])      # keep ONE instance per process

Each call tries the candidates in order, skipping any on cooldown. A failure is classified
(`classify_error`); its kind picks a cooldown (`DEFAULT_COOLDOWNS_MS`, overridable per kind
with `cooldown_ms`, where `None` means "do not fall back on this kind"), and the next
candidate is tried. Kinds with no cooldown (invalid, context, content, unknown) and
`aborted` re-raise at once. A server `Retry-After` or reset time overrides the interval.
When a cooldown has expired, one probe call is let through; its success clears it.
A failure after output was emitted still cools the candidate but re-raises: an answer is
never restarted. When every candidate is cooling, `NoAvailableProviderError` (kind `rate`)
names the next opportunity.

Cooldowns live in this instance's memory (process-local), guarded by a lock.

Media understanding (`transcribe`, `describe_image` and their async twins `atranscribe`,
`adescribe_image`) goes to the candidates in order too, skipping one that lacks the method
(Anthropic has no `transcribe`) or is cooling down, and falling to the next on any
`ProviderError` but `aborted` (vendors differ in the formats they read, so even an `invalid`
answer is worth a second opinion). Media failures set no cooldown and take no probe: a voice
note the primary cannot read says nothing about its text calls. The methods are always
defined; when no candidate has the method they raise `NotImplementedError` naming it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from falai_django.llm.errors import ProviderError, classify_error
from falai_django.llm.types import (
    GenerateInput,
    GenerateOutput,
    Provider,
    ProviderCapabilities,
    StreamChunk,
    _Readable,
)

DEFAULT_COOLDOWNS_MS: dict[str, int] = {
    "rate": 60_000,
    "quota": 3_600_000,
    "timeout": 30_000,
    "network": 30_000,
    "overload": 30_000,
    "auth": 3_600_000,
    "entitlement": 3_600_000,
    "model": 3_600_000,
}


class NoAvailableProviderError(ProviderError):
    """Every candidate is cooling down; `retry_at_ms` is the next opportunity (epoch ms)."""

    def __init__(self, retry_at_ms: float, now_ms: float) -> None:
        super().__init__(
            "fallback", "rate",
            "[FallbackProvider] every provider is cooling down: none can be called now. "
            "Retry after the cooldown ends.",
            reset_at_ms=int(retry_at_ms), retry_after_ms=max(0, int(retry_at_ms - now_ms)),
        )
        self.retry_at_ms = int(retry_at_ms)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_no_available, (self.retry_at_ms, self.retry_at_ms - (self.retry_after_ms or 0)))


def _rebuild_no_available(retry_at_ms: float, now_ms: float) -> NoAvailableProviderError:
    return NoAvailableProviderError(retry_at_ms, now_ms)


@dataclass
class CooldownInfo(_Readable):
    """What `on_cooldown` receives when a candidate is put on cooldown; reads as a dict under
    upstream's names too (`info["retryAtMs"]`, `info["kind"]`)."""

    candidate: Any
    error: BaseException
    kind: str
    retry_at_ms: int
    window: str | None = None

    _ALIASES = {"retryAtMs": "retry_at_ms"}


@dataclass
class _Cooldown:
    retry_at_ms: float
    kind: str
    window: str | None = None
    probing: bool = False


def _clock_ms(clock: Any) -> Callable[[], float]:
    """Epoch milliseconds from a callable (ms or datetime) or an object with `.now()`."""
    if clock is None:
        return lambda: time.time() * 1000
    read = clock.now if hasattr(clock, "now") else clock

    def now_ms() -> float:
        value = read()
        if isinstance(value, datetime):
            return value.timestamp() * 1000
        return float(value)

    return now_ms


class FallbackProvider:
    """A `Provider` over `providers=[primary, backup, ...]`; see the module docstring."""

    def __init__(
        self,
        providers: list[Provider],
        cooldown_ms: dict[str, int | None] | None = None,
        on_cooldown: Callable[[CooldownInfo], None] | None = None,
        *,
        clock: Any = None,
    ) -> None:
        if not providers:
            raise ValueError(
                "[FallbackProvider] providers is empty: there is nothing to call. Pass at least one, "
                "for example providers=[primary, backup]."
            )
        if len({id(p) for p in providers}) != len(providers):
            raise ValueError(
                "[FallbackProvider] providers lists one provider twice: each candidate must appear once. "
                "Remove the duplicate."
            )
        for kind, value in (cooldown_ms or {}).items():
            if value is not None and (not isinstance(value, int | float) or value < 0):
                raise ValueError(
                    f"[FallbackProvider] cooldown_ms[{kind!r}] is {value!r}: it must be a non-negative number "
                    "of milliseconds or None. Use None to stop falling back on that kind."
                )
        self.providers = list(providers)
        self.cooldown_ms = dict(cooldown_ms or {})
        self.on_cooldown = on_cooldown
        self._now = _clock_ms(clock)
        self._cooldowns: dict[int, _Cooldown] = {}
        self._lock = threading.Lock()
        self.name = "fallback(" + "->".join(p.name for p in providers) + ")"
        caps = [p.capabilities for p in providers]
        self.capabilities = ProviderCapabilities(**{
            flag: all(getattr(c, flag) for c in caps) for flag in ProviderCapabilities.__dataclass_fields__
        })

    # -- pool state ------------------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """Each candidate with its cooldown (`retry_at_ms` 0 when it is not cooling)."""
        with self._lock:
            rows = []
            for p in self.providers:
                cd = self._cooldowns.get(id(p))
                rows.append({"candidate": p, "retry_at_ms": cd.retry_at_ms if cd else 0,
                             "probing": cd.probing if cd else False, "kind": cd.kind if cd else None})
            return rows

    def reset(self, candidate: Provider | None = None) -> None:
        """Clears one candidate's cooldown, or all of them."""
        with self._lock:
            if candidate is None:
                self._cooldowns.clear()
            else:
                self._cooldowns.pop(id(candidate), None)

    def _admit(self, candidate: Provider) -> tuple[bool, _Cooldown | None]:
        """(may call now, the cooldown it was admitted under as a probe, if any)."""
        with self._lock:
            cd = self._cooldowns.get(id(candidate))
            if cd is None:
                return True, None
            if cd.retry_at_ms > self._now() or cd.probing:
                return False, None
            cd.probing = True
            return True, cd

    def _succeeded(self, candidate: Provider, probe: _Cooldown | None) -> None:
        if probe is None:
            return
        with self._lock:
            if self._cooldowns.get(id(candidate)) is probe:
                del self._cooldowns[id(candidate)]

    def _failed(self, candidate: Provider, exc: BaseException, probe: _Cooldown | None) -> bool:
        """Records a failure; True when the next candidate may be tried, False to re-raise."""
        error = classify_error(exc, getattr(candidate, "name", "provider"))
        kind = error.kind
        if kind == "aborted":
            self._release(candidate, probe)
            return False
        interval = self.cooldown_ms[kind] if kind in self.cooldown_ms else DEFAULT_COOLDOWNS_MS.get(kind)
        if interval is None:
            self._release(candidate, probe)
            return False
        with self._lock:
            now = self._now()
            hints = [h for h in (error.reset_at_ms,
                                 None if error.retry_after_ms is None else now + error.retry_after_ms)
                     if h is not None]
            previous = self._cooldowns.get(id(candidate))
            retry_at = max(now, *(hints or [now + interval]), previous.retry_at_ms if previous else 0)
            self._cooldowns[id(candidate)] = _Cooldown(retry_at, kind, error.window)
        if self.on_cooldown is not None:
            self.on_cooldown(CooldownInfo(candidate, exc, kind, int(retry_at), error.window))
        return True

    def _release(self, candidate: Provider, probe: _Cooldown | None) -> None:
        if probe is not None:
            with self._lock:
                probe.probing = False

    def _none_available(self, candidates: list[Provider] | None = None) -> NoAvailableProviderError:
        with self._lock:
            now = self._now()
            retry_at = min(max(now, cd.retry_at_ms) if (cd := self._cooldowns.get(id(p))) else now
                           for p in candidates or self.providers)
        return NoAvailableProviderError(retry_at, now)

    def _admitted(self) -> Iterator[tuple[Provider, _Cooldown | None]]:
        """The candidates that may be called now, in order, each admitted just before its turn."""
        for candidate in self.providers:
            admitted, probe = self._admit(candidate)
            if admitted:
                yield candidate, probe

    def _exhausted(self, last: BaseException | None) -> BaseException:
        """What to raise when no candidate answered: the last failure, else "all cooling"."""
        return last if last is not None else self._none_available()

    # -- calls (the async twins differ only in `await` / `async for`) ----------------------

    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        last: BaseException | None = None
        for candidate, probe in self._admitted():
            try:
                out = candidate.generate_message(input)
            except Exception as exc:
                if not self._failed(candidate, exc, probe):
                    raise
                last = exc
                continue
            self._succeeded(candidate, probe)
            return out
        raise self._exhausted(last)

    def generate_message_stream(self, input: GenerateInput) -> Iterator[StreamChunk]:
        last: BaseException | None = None
        for candidate, probe in self._admitted():
            emitted = False
            try:
                for chunk in candidate.generate_message_stream(input):
                    if not emitted:
                        emitted = True
                        self._succeeded(candidate, probe)
                    yield chunk
            except Exception as exc:
                if not self._failed(candidate, exc, probe) or emitted:
                    raise
                last = exc
                continue
            self._succeeded(candidate, probe)
            return
        raise self._exhausted(last)

    async def agenerate_message(self, input: GenerateInput) -> GenerateOutput:
        """See generate_message()."""
        last: BaseException | None = None
        for candidate, probe in self._admitted():
            try:
                out = await candidate.agenerate_message(input)
            except Exception as exc:
                if not self._failed(candidate, exc, probe):
                    raise
                last = exc
                continue
            self._succeeded(candidate, probe)
            return out
        raise self._exhausted(last)

    async def agenerate_message_stream(self, input: GenerateInput) -> AsyncIterator[StreamChunk]:
        """See generate_message_stream()."""
        last: BaseException | None = None
        for candidate, probe in self._admitted():
            emitted = False
            try:
                async for chunk in candidate.agenerate_message_stream(input):
                    if not emitted:
                        emitted = True
                        self._succeeded(candidate, probe)
                    yield chunk
            except Exception as exc:
                if not self._failed(candidate, exc, probe) or emitted:
                    raise
                last = exc
                continue
            self._succeeded(candidate, probe)
            return
        raise self._exhausted(last)

    # -- media understanding (see the module docstring) -----------------------------------

    def transcribe(self, data: bytes, mime_type: str) -> str:
        """The first candidate with `transcribe` that answers; NotImplementedError when none has it."""
        return self._media("transcribe", data, mime_type)

    def describe_image(self, data: bytes, mime_type: str) -> str:
        """The first candidate with `describe_image` that answers; NotImplementedError when none has it."""
        return self._media("describe_image", data, mime_type)

    async def atranscribe(self, data: bytes, mime_type: str) -> str:
        """See transcribe()."""
        return await self._amedia("transcribe", data, mime_type)

    async def adescribe_image(self, data: bytes, mime_type: str) -> str:
        """See describe_image()."""
        return await self._amedia("describe_image", data, mime_type)

    def _media_candidates(self, method: str, *twins: str) -> list[Provider]:
        """The candidates that have `method` (or one of `twins`), in order; NotImplementedError if none."""
        able = [p for p in self.providers if any(hasattr(p, name) for name in (method, *twins))]
        if not able:
            raise NotImplementedError(
                f"[FallbackProvider] no provider in {self.name} has {method}(): add one that does "
                "(GeminiProvider reads audio and images) or test hasattr() before calling."
            )
        return able

    def _cooling(self, candidate: Provider) -> bool:
        with self._lock:
            cd = self._cooldowns.get(id(candidate))
            return cd is not None and cd.retry_at_ms > self._now()

    def _media(self, method: str, data: bytes, mime_type: str) -> str:
        """`method` on each able candidate not cooling down, in order; the last ProviderError when all
        failed, NoAvailableProviderError when all were cooling. No cooldown is set (module docstring)."""
        able = self._media_candidates(method)
        last: ProviderError | None = None
        for candidate in able:
            if self._cooling(candidate):
                continue
            try:
                text: str = getattr(candidate, method)(data, mime_type)
                return text
            except ProviderError as exc:
                if exc.kind == "aborted":
                    raise
                last = exc
        raise last if last is not None else self._none_available(able)

    async def _amedia(self, method: str, data: bytes, mime_type: str) -> str:
        """See _media(); a candidate with only the sync method runs it in a worker thread."""
        able = self._media_candidates(method, "a" + method)
        last: ProviderError | None = None
        for candidate in able:
            if self._cooling(candidate):
                continue
            try:
                if hasattr(candidate, "a" + method):
                    text: str = await getattr(candidate, "a" + method)(data, mime_type)
                else:
                    text = await asyncio.to_thread(getattr(candidate, method), data, mime_type)
                return text
            except ProviderError as exc:
                if exc.kind == "aborted":
                    raise
                last = exc
        raise last if last is not None else self._none_available(able)
