"""SQLiteStore specifics: table shape, path vs connection clients, the caller's transaction."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from falai_django.engine.errors import SessionConflictError
from falai_django.stores.sqlite import SQLiteStore

from .contract import bare, full_session


def test_initialize_creates_the_table(tmp_path):
    conn = sqlite3.connect(tmp_path / "a.db")
    SQLiteStore(client=conn, tables={"sessions": "ana_sessions"}).initialize()
    info = conn.execute("PRAGMA table_info(ana_sessions)").fetchall()
    assert [(c[1], c[2], c[3], c[5]) for c in info] == [
        ("id", "TEXT", 0, 1),
        ("version", "INTEGER", 1, 0),
        ("blob", "TEXT", 1, 0),
        ("created_at", "TEXT", 1, 0),
        ("updated_at", "TEXT", 1, 0),
    ]


def test_default_table_is_agent_sessions(tmp_path):
    store = SQLiteStore(client=str(tmp_path / "a.db"))
    store.initialize()
    store.save(bare("s1"), 0)
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("SELECT id, version FROM agent_sessions").fetchall() == [("s1", 1)]


def test_the_row_holds_compact_blob_text_and_wall_clock_bookkeeping(tmp_path):
    conn = sqlite3.connect(tmp_path / "a.db")
    store = SQLiteStore(client=conn)
    store.initialize()
    session = full_session("s1")
    v1 = store.save(session, 0)
    blob, created, updated = conn.execute("SELECT blob, created_at, updated_at FROM agent_sessions").fetchone()
    assert blob == v1.to_json_text()
    assert '"nome":"João Ñandú 🚀"' in blob  # compact, non-ASCII kept as JSON.stringify writes it
    assert created == updated and created.endswith("Z") and len(created) == 24
    store.save(v1, 1)
    created2, updated2 = conn.execute("SELECT created_at, updated_at FROM agent_sessions").fetchone()
    assert created2 == created
    assert updated2 >= updated


def test_a_shared_in_memory_database_works_across_threads():
    store = SQLiteStore(client=":memory:")
    store.initialize()
    store.save(bare("s1"), 0)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(store.load("s1")))
    thread.start()
    thread.join()
    assert seen[0].version == 1


def test_a_save_inside_the_callers_transaction_is_theirs_to_commit(tmp_path):
    conn = sqlite3.connect(tmp_path / "a.db", check_same_thread=False)
    store = SQLiteStore(client=conn)
    store.initialize()
    conn.execute("BEGIN")
    store.save(bare("s1"), 0)
    assert conn.in_transaction  # the store did not commit the caller's transaction
    conn.rollback()
    assert store.load("s1") is None
    store.save(bare("s2"), 0)  # no transaction open: the store commits its own statement
    assert not conn.in_transaction
    assert sqlite3.connect(tmp_path / "a.db").execute("SELECT id FROM agent_sessions").fetchall() == [("s2",)]


def test_a_conflict_leaves_the_connection_clean(tmp_path):
    conn = sqlite3.connect(tmp_path / "a.db")
    store = SQLiteStore(client=conn)
    store.initialize()
    store.save(bare("s1"), 0)
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 0)
    assert caught.value.actual_version == 1
    assert not conn.in_transaction
