"""A fixed set of bench client PROCESSES (not threads: the GIL), driven from the bench process.

    with Pool(4, "bench.hostbench.clients:init_django") as pool:
        pool.call("bench.hostbench.clients:warm_host", [{"prefix": "c0-"}, ...])   # one dict per worker
        results = pool.timed("bench.hostbench.clients:host_turns", seconds=5, workers=2)

Each worker is a fresh `spawn`ed interpreter that imports and calls `init(index)` once (e.g.
Django set-up with the environment it inherited) and then runs the functions it is sent as
`func(state, **kwargs)`. `timed` hands every worker the same `start_at` (CLOCK_MONOTONIC, shared
by every process on the machine) and `seconds`, so all of them work in the same window. A worker
error is raised here with its traceback.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import time
import traceback
from typing import Any


def _resolve(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(conn: Any, index: int, init: str, env: dict[str, str] | None) -> None:
    if env:
        os.environ.update(env)
    try:
        state = _resolve(init)(index)
        conn.send(("ok", None))
    except BaseException:  # noqa: BLE001 - reported to the parent
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        func, kwargs = message
        try:
            conn.send(("ok", _resolve(func)(state, **kwargs)))
        except BaseException:  # noqa: BLE001
            conn.send(("error", traceback.format_exc()))


class WorkerError(RuntimeError):
    pass


class Pool:
    def __init__(self, size: int, init: str, env: dict[str, str] | None = None, timeout: float = 120) -> None:
        context = multiprocessing.get_context("spawn")
        self.timeout = timeout
        self.workers: list[tuple[Any, Any]] = []
        for index in range(size):
            parent, child = context.Pipe()
            process = context.Process(target=_serve, args=(child, index, init, env), daemon=True)
            process.start()
            child.close()
            self.workers.append((process, parent))
        for index in range(size):
            self._receive(index, timeout)

    def __len__(self) -> int:
        return len(self.workers)

    def _receive(self, index: int, timeout: float) -> Any:
        process, conn = self.workers[index]
        if not conn.poll(timeout):
            raise WorkerError(f"bench worker {index} (pid {process.pid}) did not answer within {timeout:.0f}s")
        status, value = conn.recv()
        if status != "ok":
            raise WorkerError(f"bench worker {index} failed:\n{value}")
        return value

    def call(self, func: str, kwargs: list[dict[str, Any]] | dict[str, Any] | None = None,
             workers: int | None = None, timeout: float | None = None) -> list[Any]:
        """Run `func(state, **kwargs)` in the first `workers` workers at once; their results in order.
        `kwargs` is one dict for all, or a list with one dict per worker."""
        count = len(self.workers) if workers is None else workers
        per = kwargs if isinstance(kwargs, list) else [dict(kwargs or {}) for _ in range(count)]
        for index in range(count):
            self.workers[index][1].send((func, per[index]))
        return [self._receive(index, timeout or self.timeout) for index in range(count)]

    def timed(self, func: str, seconds: float, workers: int | None = None, lead_s: float = 0.3,
              **kwargs: Any) -> list[Any]:
        """Run `func(state, start_at=, seconds=, worker=, **kwargs)` in the same time window."""
        count = self.submit_timed(func, seconds, workers, lead_s, **kwargs)
        return self.collect(count, timeout=seconds + lead_s + self.timeout)

    def submit_timed(self, func: str, seconds: float, workers: int | None = None, lead_s: float = 0.3,
                     **kwargs: Any) -> int:
        """`timed` without waiting: the workers start; `collect(count)` gets their results."""
        count = len(self.workers) if workers is None else workers
        start_at = time.monotonic() + lead_s
        for index in range(count):
            self.workers[index][1].send((func, {**kwargs, "start_at": start_at, "seconds": seconds,
                                                "worker": index}))
        return count

    def collect(self, count: int, timeout: float | None = None) -> list[Any]:
        return [self._receive(index, timeout or self.timeout) for index in range(count)]

    def close(self) -> None:
        for _process, conn in self.workers:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for process, conn in self.workers:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
            conn.close()
        self.workers = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def wait_until(at: float) -> None:
    """Sleep until CLOCK_MONOTONIC reaches `at`."""
    delay = at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
