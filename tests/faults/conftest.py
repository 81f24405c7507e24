"""Fault tests: a private PostgreSQL cluster (never the shared :5432), subprocesses pointed at it
with DATABASE_URL, a private Redis database for the django-q2 broker, and helpers to start,
kill and read them. Every loop is bounded in count and time; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from .pgcluster import PrivatePostgres, available

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = "faults_template"
IN_CI = os.environ.get("CI", "").lower() == "true"
REDIS_HOST_URL = os.environ.get("FALAI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
PRIVATE_REDIS_DBS = (13, 14, 12, 11, 15)


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"fault tests cannot run: {reason}. CI=true: this is a failure, not a skip.")
    pytest.skip(f"LOUD SKIP: fault tests cannot run: {reason}")


@pytest.fixture(scope="session")
def private_pg():
    """A private cluster with the app's tables migrated once into a template database."""
    reason = available()
    if reason:
        _unavailable(reason)
    pg = PrivatePostgres()
    try:
        pg.init()
        pg.start()
        dsn = pg.create_database(TEMPLATE)
        env = base_env(dsn)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env,
                       check=True, timeout=180, capture_output=True)
        yield pg
    finally:
        pg.destroy()


def base_env(dsn: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAULT_", "DJANGO_"))}
    env.update({
        "DJANGO_SETTINGS_MODULE": "faults.fault_settings",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
        "DATABASE_URL": dsn,
        "FAULT_CLOCK_EPOCH": str(time.time()),
    })
    env.pop("FALAI_REDIS_URL", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def private_redis():
    """(url, client) of an empty Redis database this test may FLUSHDB; never db 0."""
    try:
        import redis

        probe = redis.Redis.from_url(f"{REDIS_HOST_URL}/0", socket_connect_timeout=2)
        probe.ping()
        probe.close()
    except Exception as exc:  # noqa: BLE001
        _unavailable(f"Redis at {REDIS_HOST_URL} is not reachable ({exc})")
    for index in PRIVATE_REDIS_DBS:
        client = redis.Redis.from_url(f"{REDIS_HOST_URL}/{index}")
        if client.dbsize() == 0:
            yield f"{REDIS_HOST_URL}/{index}", client
            client.flushdb()  # our own database only
            client.close()
            return
        client.close()
    _unavailable("no empty private Redis database (13, 14, 12, 11, 15)")


class Proc:
    """A subprocess in its own process group, its stdout read line by line (JSON lines kept)."""

    def __init__(self, args: list[str], env: dict[str, str], name: str) -> None:
        self.name = name
        self.lines: list[dict] = []
        self.raw: list[str] = []
        self.process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.raw.append(line.rstrip())
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                pass

    def count(self, key: str) -> int:
        return sum(1 for line in list(self.lines) if key in line)

    def wait(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGUSR1)  # a driver that registered faulthandler prints its threads' stacks
            time.sleep(1)
            self.kill()
            self._reader.join(timeout=5)
            # Say where it was stuck: the bare TimeoutExpired names only the command line.
            raise AssertionError(f"{self.name} still running after {timeout}s; its last lines:\n"
                                 f"{self.tail(150)}") from None
        self._reader.join(timeout=5)
        return code

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGUSR1:  # asks for a stack dump; the process goes on
            return
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.raw[-n:])


@pytest.fixture
def procs():
    """Start subprocesses with `procs.start(args, env, name)`; every one is killed at the end."""
    started: list[Proc] = []

    class Starter:
        def start(self, args: list[str], env: dict[str, str], name: str) -> Proc:
            proc = Proc(args, env, name)
            started.append(proc)
            return proc

    yield Starter()
    for proc in started:
        if proc.alive():
            proc.kill()


def wait_until(predicate, timeout: float, interval: float = 0.1, what: str = "condition") -> float:
    """Poll `predicate` until true; returns the seconds it took, or fails naming `what`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def new_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"
