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

from falai_django.testing import postgres
from falai_django.testing.postgres import available as unavailable
from falai_django.testing.postgres import server_binary

__all__ = ["PrivateCluster", "unavailable"]

LOG_PREFIX = "%m [%p] db=%d "


class PrivateCluster(postgres.PrivatePostgres):
    def __init__(self, *, log_statements: bool = True) -> None:
        settings = [
            "max_connections=40", "autovacuum=off", "shared_preload_libraries=pg_stat_statements",
            "pg_stat_statements.track=top", "pg_stat_statements.track_utility=on", f"log_line_prefix='{LOG_PREFIX}'",
        ]
        if log_statements:
            settings.append("log_statement=all")
        super().__init__(prefix="falai-bench-pg-", settings=settings)
        self.log_statements = log_statements

    def wal_commits(self, start_lsn: str, end_lsn: str) -> int:
        """COMMIT records in the WAL between two LSNs (pg_waldump): the transactions that wrote."""
        if start_lsn == end_lsn:
            return 0
        out = self._run(server_binary("pg_waldump"), "-p", str(self.data / "pg_wal"), "-s", start_lsn, "-e",
                        end_lsn, "-r", "Transaction").stdout
        return sum(1 for line in out.splitlines() if "desc: COMMIT" in line)

    def create_database(self, name: str, template: str | None = None) -> str:
        import psycopg

        dsn = super().create_database(name, template)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return dsn
