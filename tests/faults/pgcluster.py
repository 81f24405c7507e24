"""A private PostgreSQL cluster for fault tests: never the shared server on 127.0.0.1:5432.

    with PrivatePostgres() as pg:          # initdb into a temp dir, start on a free port
        pg.create_database("faults")
        dsn = pg.dsn("faults")
        pg.restart(mode="immediate")       # a crash-like restart while clients are connected
    # stopped and removed

initdb refuses to run as root, so as root every server command runs as the `postgres` user
(`runuser -u postgres`); the data and socket directories are handed to it first.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _bin(name: str) -> str:
    for directory in BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found under /usr/lib/postgresql/*/bin or on PATH")
    return found


def available() -> str | None:
    """None when a private cluster can be made here, else why not."""
    try:
        _bin("initdb")
        _bin("pg_ctl")
    except FileNotFoundError as exc:
        return str(exc)
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="falai-faults-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
            os.chmod(self.root, 0o755)

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        command = list(args)
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)

    def init(self) -> None:
        self._run(_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--locale=C")

    def _options(self) -> str:
        return (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c full_page_writes=off -c max_connections=60")

    def start(self) -> None:
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", self._options(), "-w",
                  "-t", "30", "start")
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")

    def restart(self, mode: str = "immediate") -> None:
        """Stop (immediate: no checkpoint, clients cut, crash recovery on start) and start again."""
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "-o", self._options(),
                  "-l", str(self.log), "restart")
        self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, template: str | None = None) -> str:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            extra = f' TEMPLATE "{template}"' if template else ""
            conn.execute(f'CREATE DATABASE "{name}"{extra}')
        return self.dsn(name)

    def connect(self, database: str):
        import psycopg

        return psycopg.connect(self.dsn(database), autocommit=True)

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop(mode="immediate")
        except Exception:  # noqa: BLE001 - best effort: the directory goes anyway
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        self.init()
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()
