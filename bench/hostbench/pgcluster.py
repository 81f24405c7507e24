"""A private PostgreSQL cluster for counting what the server sees (never the shared :5432).

    with PrivateCluster(log_statements=True) as pg:   # initdb in a temp dir, start on a free port
        dsn = pg.create_database("falai_sql")
        ...
        pg.log_lines()                                # the server log (log_statement = all)

The cluster loads `pg_stat_statements` (the shared server does not) and logs every statement
the clients send, so a bench can count statements, round trips and commits from the server
itself. Autovacuum is off so `pg_stat_database.xact_commit` moves only for the bench's clients.
As root, every server command runs as the `postgres` user (initdb refuses root).
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
LOG_PREFIX = "%m [%p] db=%d "


def _bin(name: str) -> str:
    for directory in BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found under /usr/lib/postgresql/*/bin or on PATH")
    return found


def unavailable() -> str | None:
    """None when a private cluster can be made here, else why not."""
    try:
        _bin("initdb")
        _bin("pg_ctl")
    except FileNotFoundError as exc:
        return str(exc)
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateCluster:
    def __init__(self, *, log_statements: bool = True) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="falai-bench-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.log_statements = log_statements
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
            os.chmod(self.root, 0o755)

    def _run(self, *args: str, timeout: float = 60) -> str:
        command = list(args)
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout).stdout

    def wal_commits(self, start_lsn: str, end_lsn: str) -> int:
        """COMMIT records in the WAL between two LSNs (pg_waldump): the transactions that wrote."""
        if start_lsn == end_lsn:
            return 0
        out = self._run(_bin("pg_waldump"), "-p", str(self.data / "pg_wal"), "-s", start_lsn, "-e", end_lsn,
                        "-r", "Transaction")
        return sum(1 for line in out.splitlines() if "desc: COMMIT" in line)

    def _options(self) -> str:
        options = [
            f"-p {self.port}", f"-k {self.root}", "-c listen_addresses=127.0.0.1", "-c fsync=off",
            "-c max_connections=40", "-c autovacuum=off", "-c shared_preload_libraries=pg_stat_statements",
            "-c pg_stat_statements.track=top", "-c pg_stat_statements.track_utility=on",
            f"-c log_line_prefix='{LOG_PREFIX}'",
        ]
        if self.log_statements:
            options.append("-c log_statement=all")
        return " ".join(options)

    def start(self) -> None:
        self._run(_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--locale=C")
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", self._options(), "-w",
                  "-t", "30", "start")
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30) -> None:
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

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(self.dsn(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return self.dsn(name)

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def log_text(self, start: int = 0) -> str:
        with open(self.log, "rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", "replace")

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")
        except Exception:  # noqa: BLE001 - best effort: the directory goes anyway
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivateCluster:
        try:
            self.start()
        except BaseException:
            self.destroy()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()
