"""A private, throw-away PostgreSQL cluster for tests and benches (never the shared server).

    with PrivatePostgres(settings=["autovacuum=off"]) as pg:   # initdb in a temp dir, a free port
        dsn = pg.create_database("faults")
        pg.restart(mode="immediate")                          # a crash-like restart

initdb refuses to run as root, so as root every server command runs as the `postgres` user
(`runuser -u postgres`); the data and socket directories are handed to it first. Durability is
off (`fsync=off`): these clusters hold nothing worth keeping.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def server_binary(name: str) -> str:
    """A PostgreSQL server program (initdb, pg_ctl, pg_waldump …), newest version first."""
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
        server_binary("initdb")
        server_binary("pg_ctl")
    except FileNotFoundError as exc:
        return str(exc)
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PrivatePostgres:
    """One cluster in a temporary directory; `settings` are extra `-c name=value` server options."""

    def __init__(self, *, prefix: str = "falai-pg-", settings: list[str] | tuple[str, ...] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.settings = list(settings)
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
            os.chmod(self.root, 0o755)

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = list(args)
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)

    def init(self) -> None:
        self._run(server_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--locale=C")

    def _options(self) -> str:
        options = [f"-p {self.port}", f"-k {self.root}", "-c listen_addresses=127.0.0.1", "-c fsync=off"]
        return " ".join(options + [f"-c {setting}" for setting in self.settings])

    def start(self) -> None:
        self._run(server_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", self._options(), "-w",
                  "-t", "30", "start")
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        self._run(server_binary("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")

    def restart(self, mode: str = "immediate") -> None:
        """Stop (immediate: no checkpoint, clients cut, crash recovery on start) and start again."""
        self._run(server_binary("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "-o",
                  self._options(), "-l", str(self.log), "restart")
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

    def connect(self, database: str) -> Any:
        import psycopg

        return psycopg.connect(self.dsn(database), autocommit=True)

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def log_text(self, start: int = 0) -> str:
        with open(self.log, "rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", "replace")

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop(mode="immediate")
        except Exception:  # noqa: BLE001 - best effort: the directory goes anyway
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        try:
            self.init()
            self.start()
        except BaseException:
            self.destroy()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()
