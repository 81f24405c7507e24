"""`make run`: migrate, make sure a demo admin exists, then run the web server, the django-q2
worker and the wake dispatcher together until Ctrl-C (which stops all of them)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HOST = os.environ.get("FALAI_DEMO_HOST", "127.0.0.1")
PORT = os.environ.get("FALAI_DEMO_PORT", "8000")


def manage(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "manage.py", *args], cwd=ROOT, check=True, **kw)


def ensure_admin() -> str | None:
    """Create the `admin` superuser once, with a random password printed only then."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    User = get_user_model()
    if User.objects.filter(username="admin").exists():
        return None
    password = secrets.token_urlsafe(12)
    User.objects.create_superuser("admin", "admin@example.com", password)
    return password


def main() -> int:
    manage("migrate", "--noinput", stdout=subprocess.DEVNULL)
    password = ensure_admin()
    commands = [
        [PY, "manage.py", "runserver", f"{HOST}:{PORT}", "--noreload"],
        [PY, "manage.py", "qcluster"],
    ]
    if (ROOT / "falai_django" / "management" / "commands" / "falai_dispatch_wakes.py").exists():
        commands.append([PY, "manage.py", "falai_dispatch_wakes"])
    procs = [subprocess.Popen(cmd, cwd=ROOT) for cmd in commands]
    base = f"http://{HOST}:{PORT}"
    print("\n" + "=" * 64)
    print(f"  falai_django demo is up: Ana is listening.")
    print(f"  Playground : {base}/falai/playground/")
    print(f"  Admin      : {base}/admin/   (user: admin)")
    if password:
        print(f"  Password   : {password}   <- shown once; change it in the admin")
    print(f"  API        : {base}/falai/")
    print("  Ctrl-C stops the web server, the worker and the wake dispatcher.")
    print("=" * 64 + "\n", flush=True)

    def stop(*_: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.time() + 10
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()

    signal.signal(signal.SIGTERM, lambda *a: (stop(), sys.exit(0)))
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        print("run_demo: a process exited; stopping the others.", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
