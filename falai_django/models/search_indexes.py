"""The indexes only PostgreSQL gets (migration 0016), kept out of the models' state because SQLite
has no equivalent: the conversation list's order and the admin / API search.

- `falai_sess_recent`: `(last_user_at DESC NULLS LAST, id)` — the order the admin's list and
  `GET sessions` show (newest customer message first, conversations without one last, id to
  break ties), so a page is an index walk that stops after it; it replaces `falai_sess_last_user`
  (`DESC`, NULLs first) on PostgreSQL.
- `falai_sess_id_trgm`, `falai_sess_data_trgm`: `pg_trgm` GIN indexes on the conversation id (a
  phone number) and on the collected values as text (`(blob -> 'data')::text`, a customer's
  name), which serve `ILIKE '%…%'` for a search of three characters or more.
- `falai_hist_words`: a full-text GIN index on the transcript (`to_tsvector('simple', content)`),
  which serves the search for words from the transcript.

`pg_trgm` is a trusted extension (PostgreSQL 13+): a database owner may create it. Where it cannot
be created, the trigram indexes are left out with a warning and check `falai_django.W190` says so;
the search still works, by scanning the table.

Each index is built `CONCURRENTLY` (the migration is not atomic), so a live table keeps taking
writes while it builds; every statement is `IF NOT EXISTS`, so a migration that was interrupted
runs again.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("falai_django")

TRIGRAM = ("falai_sess_id_trgm", "falai_sess_data_trgm")
DATA_TEXT = "((blob -> 'data')::text)"  # the search's expression must be this, to the character
WORDS = "to_tsvector('simple'::regconfig, content)"

INDEXES = {
    "falai_sess_recent": "ON agent_sessions (last_user_at DESC NULLS LAST, id)",
    "falai_sess_id_trgm": "ON agent_sessions USING gin (id gin_trgm_ops)",
    "falai_sess_data_trgm": f"ON agent_sessions USING gin ({DATA_TEXT} gin_trgm_ops)",
    "falai_hist_words": f"ON falai_history USING gin ({WORDS})",
}
REPLACED = ("falai_sess_last_user", 'ON agent_sessions (last_user_at DESC)')


def trigram_available(cursor: Any) -> bool:
    """Whether `pg_trgm` is installed in this database (or could be created now)."""
    cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
    if cursor.fetchone():
        return True
    try:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except Exception as exc:  # noqa: BLE001 - no privilege, or the contrib package is not installed
        logger.warning("falai: pg_trgm cannot be created (%s): the conversation search will scan the table; "
                       "ask a superuser to run CREATE EXTENSION pg_trgm, then migrate again", exc)
        return False
    return True


def create(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        trigram = trigram_available(cursor)
        for name, definition in INDEXES.items():
            if name in TRIGRAM and not trigram:
                continue
            cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" {definition}')
        cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{REPLACED[0]}"')


def drop(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{REPLACED[0]}" {REPLACED[1]}')
        for name in INDEXES:
            cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
