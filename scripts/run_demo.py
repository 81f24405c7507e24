"""`make run`: migrate, make sure a demo admin exists, then run the web server, the django-q2
worker and the wake dispatcher together until Ctrl-C (which stops all of them), restarting any
of them that exits.

- `FALAI_DEMO_HOST` / `FALAI_DEMO_PORT` choose the address (default 127.0.0.1:8000).
- The `admin` superuser is created on the first run, with a random password printed once.
- The provider comes from the environment (`project.agents.make_provider`): `GEMINI_API_KEY`,
  `OPENAI_BASE_URL` (a local OpenAI-compatible server), `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
  first match wins; none set: the offline provider. The banner says which answers.

Each child runs in its own process group, so stopping it also stops what it forked (the
django-q2 cluster's workers). A child that exits is restarted, as a deployment's supervisor
(systemd's `Restart=always`) would: one line on stderr names it and its exit code, what it left
in its group is killed, and it starts again after a backoff of `RESTART_FIRST_S` doubling up to
`RESTART_CAP_S` (back to `RESTART_FIRST_S` once it has stayed up `STEADY_S`). Ctrl-C or SIGTERM
stops them all: SIGINT first, SIGKILL after `STOP_GRACE_S` for whatever is still alive. Signals
that arrive while stopping (a process manager signals the group, `make` forwards another, a
second Ctrl-C) are ignored: stopping always runs to its end, so no child is left behind.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HOST = os.environ.get("FALAI_DEMO_HOST", "127.0.0.1")
PORT = os.environ.get("FALAI_DEMO_PORT", "8000")
STOP_GRACE_S = 10.0
RESTART_FIRST_S = 1.0  # a child that exits waits this long before it starts again,
RESTART_CAP_S = 30.0  # twice as long each time it exits again, up to this,
STEADY_S = 60.0  # and this long up makes it healthy again (the next wait is RESTART_FIRST_S)


def manage(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "manage.py", *args], cwd=ROOT, check=True, **kw)


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def ensure_admin() -> str | None:
    """Create the `admin` superuser once; return its random password only then."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    if User.objects.filter(username="admin").exists():
        return None
    password = secrets.token_urlsafe(12)
    User.objects.create_superuser("admin", "admin@example.com", password)
    return password


def provider_in_use() -> str:
    try:
        from falai_django.playground.drive import provider_label

        return provider_label()
    except Exception as exc:  # noqa: BLE001 - the banner must not stop the demo
        return f"unknown ({type(exc).__name__}: {exc})"


def banner(password: str | None) -> str:
    base = f"http://{HOST}:{PORT}"
    lines = [
        "=" * 72,
        "  falai_django demo is up: Ana is listening.",
        f"  Provider   : {provider_in_use()}",
        f"  Playground : {base}/falai/playground/",
        f"  Admin      : {base}/admin/   (user: admin)",
    ]
    if password:
        lines.append(f"  Password   : {password}   <- shown once; change it in the admin")
    else:
        lines.append("  Password   : the one printed on the first run (or: manage.py changepassword admin)")
    lines += [
        f"  API        : {base}/falai/schema",
        f"  Health     : {base}/falai/health/live  and  {base}/falai/health/ready",
        f"  Metrics    : {base}/falai/metrics   (logged in as admin, or Bearer $FALAI_METRICS_TOKEN)",
        "  Terminal   : .venv/bin/python manage.py falai_chat",
        "  Ctrl-C stops the web server, the worker and the wake dispatcher.",
        "=" * 72,
    ]
    return "\n" + "\n".join(lines) + "\n"


def start(commands: list[list[str]]) -> list[subprocess.Popen]:
    return [subprocess.Popen(cmd, cwd=ROOT, process_group=0) for cmd in commands]


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGINT every child's group, wait, then SIGKILL what is left (stragglers included)."""
    procs = [proc for proc in procs if proc.returncode is None]  # a reaped child's group was killed then
    for proc in procs:
        signal_group(proc, signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:  # the group may outlive its leader (a worker still shutting down)
        signal_group(proc, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait()


def describe(returncode: int) -> str:
    """"exited (3)", or "killed by SIGKILL" for a child a signal ended."""
    if returncode >= 0:
        return f"exited ({returncode})"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


class Supervisor:
    """Keeps every command of `commands` running (`start`, then `run` until interrupted); `procs`
    is what runs now, for `stop`. A child that exits gets a notice on stderr, its group's
    stragglers are killed, and it starts again after its backoff."""

    def __init__(self, commands: list[list[str]], *, first_s: float = RESTART_FIRST_S,
                 cap_s: float = RESTART_CAP_S, steady_s: float = STEADY_S, poll_s: float = 0.3) -> None:
        self.commands = commands
        self.first_s, self.cap_s, self.steady_s, self.poll_s = first_s, cap_s, steady_s, poll_s
        self.procs: list[subprocess.Popen] = []
        self.started: list[float] = []
        self.delays = [first_s] * len(commands)  # the wait before the next restart of each child
        self.due: list[float | None] = [None] * len(commands)  # when a dead child starts again
        self.restarts = [0] * len(commands)

    def start(self) -> None:
        self.procs = start(self.commands)
        self.started = [time.monotonic()] * len(self.procs)

    def step(self) -> None:
        """One look at every child: give a dead one its notice and backoff; restart it when due."""
        for i, proc in enumerate(self.procs):
            now = time.monotonic()
            if self.due[i] is None:
                if proc.poll() is None:
                    continue
                signal_group(proc, signal.SIGKILL)  # what the child forked must not outlive it
                if now - self.started[i] >= self.steady_s:
                    self.delays[i] = self.first_s
                delay = self.delays[i]
                self.delays[i] = min(self.cap_s, delay * 2)
                self.due[i] = now + delay
                print(f"run_demo: `{' '.join(proc.args[1:3])}` {describe(proc.returncode)}; "
                      f"restarting it in {delay:g} s.", file=sys.stderr, flush=True)
            if now >= self.due[i]:
                self.procs[i] = start([self.commands[i]])[0]
                self.started[i], self.due[i] = time.monotonic(), None
                self.restarts[i] += 1

    def run(self, tick: Callable[[], object] = lambda: None, until: Callable[[], bool] = lambda: False) -> None:
        """Supervise until `until()` (never, in `make run`: Ctrl-C or SIGTERM ends it); `tick()`
        runs once a round."""
        while not until():
            self.step()
            tick()
            time.sleep(self.poll_s)


class StopRequest:
    """The handler of SIGINT and SIGTERM while supervising: the first one asks the supervision loop
    to end (`request()` turns true), any later one is ignored. Nothing is raised from the
    handler: an exception landing between a child's start and its bookkeeping, or inside `stop`,
    would leave children running with nobody to stop them."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def handle(self, signum: int, frame: object = None) -> None:
        if self.signal is None:
            self.signal = signum

    def __call__(self) -> bool:
        """Whether a stop was asked for (the supervision loop's `until`)."""
        return self.signal is not None

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handle)


def children() -> list[list[str]]:
    """What `make run` keeps running: the web server, the django-q2 cluster and the dispatcher."""
    return [
        [PY, "manage.py", "runserver", f"{HOST}:{PORT}", "--noreload", "--skip-checks"],
        [PY, "manage.py", "qcluster", "--skip-checks"],
        [PY, "manage.py", "falai_dispatch_wakes", "--skip-checks"],
    ]


def server_answers() -> bool:
    try:
        with socket.create_connection((HOST, int(PORT)), timeout=0.5):
            return True
    except OSError:
        return False


def main() -> int:
    os.chdir(ROOT)
    # A shell that starts us in the background may have us ignore SIGINT; the children would
    # inherit that and ignore Ctrl-C. Take the default back (exec then gives them SIG_DFL).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("DJANGO_DEBUG", "1").strip().lower() in ("0", "false", "no", "off"):
        # runserver in production mode would redirect every page to HTTPS it cannot serve
        print("run_demo: DJANGO_DEBUG=0 is production mode, which `make run` (runserver) is not: unset it, or "
              "serve production as the README's \"Production\" says (collectstatic, gunicorn).", file=sys.stderr)
        return 1
    # System checks run once, here (a warning such as W001 is printed once, not by every child).
    try:
        manage("check", "--fail-level", "ERROR", stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        print("run_demo: `manage.py check` found errors (above); fix them and run again.", file=sys.stderr)
        return 1
    manage("migrate", "--noinput", "--skip-checks", stdout=subprocess.DEVNULL)
    setup_django()
    password = ensure_admin()
    from django.db import connections

    connections.close_all()

    request = StopRequest()
    request.install()
    supervisor = Supervisor(children())
    shown = False
    late = time.monotonic() + 60.0

    def banner_once() -> None:
        """The banner prints last: once the web server accepts connections (or after a minute,
        saying it does not answer yet: a port in use, a broken setting; the child's error is above)."""
        nonlocal shown
        if shown:
            return
        if not server_answers():
            if time.monotonic() < late:
                return
            print(f"run_demo: {HOST}:{PORT} does not answer yet; still waiting.", file=sys.stderr, flush=True)
        print(banner(password), flush=True)
        shown = True

    try:
        supervisor.start()
        supervisor.run(tick=banner_once, until=request)
        print("\nrun_demo: stopping the web server, the worker and the dispatcher...", flush=True)
    finally:  # an error in supervision itself stops the children too
        stop(supervisor.procs)
        if password and not shown:  # never lose the one chance to see it
            print(f"  Password   : {password}   <- shown once; change it in the admin", flush=True)
    print("run_demo: all stopped.", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
