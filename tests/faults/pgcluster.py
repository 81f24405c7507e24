"""The fault tests' private PostgreSQL cluster: never the shared server on 127.0.0.1:5432.

    with PrivatePostgres() as pg:          # initdb into a temp dir, start on a free port
        pg.create_database("faults")
        pg.restart(mode="immediate")       # a crash-like restart while clients are connected
"""

from __future__ import annotations

from falai_django.testing import postgres
from falai_django.testing.postgres import available, free_port

__all__ = ["PrivatePostgres", "available", "free_port"]


class PrivatePostgres(postgres.PrivatePostgres):
    def __init__(self) -> None:
        super().__init__(prefix="falai-faults-pg-", settings=["full_page_writes=off", "max_connections=60"])
