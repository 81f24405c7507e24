"""Demo test setup: the `demo_settings` fixture (the demo agent offline, django-q2 in-line) and
the file SQLite database both come from tests/conftest.py. Helpers the demo's tests share."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
