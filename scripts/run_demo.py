"""`make run`: migrate, make sure a demo admin exists, then run the web server, the django-q2
worker and the wake dispatcher together until Ctrl-C (which stops all of them).

- `FALAI_DEMO_HOST` / `FALAI_DEMO_PORT` choose the address (default 127.0.0.1:8000).
- The `admin` superuser is created on the first run, with a random password printed once.
- The provider comes from the environment (`project.agents.make_provider`): `GEMINI_API_KEY`,
  `OPENAI_BASE_URL` (a local OpenAI-compatible server), `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
  first match wins; none set: the offline provider. The banner says which answers.

Each child runs in its own process group, so stopping it also stops what it forked (the
django-q2 cluster's workers). Ctrl-C, SIGTERM, or any child exiting stops them all: SIGINT
first, SIGKILL after `STOP_GRACE_S` for whatever is still alive.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HOST = os.environ.get("FALAI_DEMO_HOST", "127.0.0.1")
PORT = os.environ.get("FALAI_DEMO_PORT", "8000")
STOP_GRACE_S = 10.0


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


def wait_for_server(procs: list[subprocess.Popen], timeout_s: float = 60.0) -> bool:
    """True once the web server accepts connections (so the banner prints last); False when a
    child died first (a port in use, a broken setting) or the server never answered."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and all(proc.poll() is None for proc in procs):
        try:
            with socket.create_connection((HOST, int(PORT)), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def main() -> int:
    os.chdir(ROOT)
    # A shell that starts us in the background may have us ignore SIGINT; the children would
    # inherit that and ignore Ctrl-C. Take the default back (exec then gives them SIG_DFL).
    signal.signal(signal.SIGINT, signal.default_int_handler)
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

    def on_term(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    procs: list[subprocess.Popen] = []
    shown = False
    code = 0
    try:
        procs = start([
            [PY, "manage.py", "runserver", f"{HOST}:{PORT}", "--noreload", "--skip-checks"],
            [PY, "manage.py", "qcluster", "--skip-checks"],
            [PY, "manage.py", "falai_dispatch_wakes", "--skip-checks"],
        ])
        ready = wait_for_server(procs)
        if all(proc.poll() is None for proc in procs):
            if not ready:
                print(f"run_demo: {HOST}:{PORT} does not answer yet; still waiting.", file=sys.stderr, flush=True)
            print(banner(password), flush=True)
            shown = True
        while all(proc.poll() is None for proc in procs):
            time.sleep(0.3)
        failed = next(proc for proc in procs if proc.poll() is not None)
        print(f"run_demo: `{' '.join(failed.args[1:3])}` exited ({failed.returncode}); stopping the others.",
              file=sys.stderr, flush=True)
        code = 1
    except KeyboardInterrupt:
        print("\nrun_demo: stopping the web server, the worker and the dispatcher...", flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not orphan the children
        stop(procs)
        if password and not shown:  # never lose the one chance to see it
            print(f"  Password   : {password}   <- shown once; change it in the admin", flush=True)
    print("run_demo: all stopped.", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
