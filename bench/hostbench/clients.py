"""What the bench client processes run (see pool.py): each function is `func(state, **kwargs)`.

Host clients drive `falai_django.host.handle` on conversations of their own (`prefix`), with the
bench settings' zero-latency scripted provider; store writers loop compare-and-swap saves, or a
plain one-row UPDATE of the same blob through the same driver, on rows of their own.
"""

from __future__ import annotations

import os
import time
from typing import Any

from . import percentile
from .pool import wait_until


def init_django(index: int) -> dict[str, Any]:
    """Django set up in this worker (settings and database from the inherited environment)."""
    from . import setup_django

    setup_django(migrate=False, truncate=False)
    return {"index": index}


def init_plain(index: int) -> dict[str, Any]:
    return {"index": index}


# -- host clients ------------------------------------------------------------------------------


def warm_host(state: dict[str, Any], *, prefix: str, conversations: int) -> int:
    """Open `conversations` conversations (one message each) and warm the code paths."""
    from falai_django import host

    state["sids"] = [f"{prefix}{n}" for n in range(conversations)]
    state["n"] = 0
    for sid in state["sids"]:
        result = host.handle(sid, {"message": "oi", "id": f"{sid}.warm"})
        assert result.status == "done", result
    return len(state["sids"])


def grow_host(state: dict[str, Any], *, turns_per_conversation: int) -> int:
    """Bring this worker's conversations to their steady size before anything is timed: each
    answers "ainda não" `turns_per_conversation` times (the session's run reaches the spec's caps
    of 50 inputs and outcomes; the transcript passes HISTORY_LIMIT items). Every timed round, at 2
    clients or 4, then runs on conversations of the same size."""
    turns = turns_per_conversation * len(state["sids"])
    for _ in range(turns):
        _next_turn(state)
    return turns


def _next_turn(state: dict[str, Any]) -> None:
    """One inbound message on this worker's next conversation (round robin); a turn that does not
    end `done` stops the bench."""
    from falai_django import host

    n = state["n"]
    state["n"] = n + 1
    sid = state["sids"][n % len(state["sids"])]
    result = host.handle(sid, {"message": "ainda não", "id": f"{sid}.{os.getpid()}.{n}"})
    if result.status != "done":
        raise RuntimeError(f"turn on {sid} ended {result.status}: {result.error}")


def host_turns(state: dict[str, Any], *, start_at: float, seconds: float, worker: int,
               rate: float | None = None, stop_file: str | None = None) -> dict[str, Any]:
    """Inbound message turns through `host.handle`, round robin over this worker's conversations,
    from `start_at` for `seconds` (or until `stop_file` exists): as fast as possible, or paced at
    `rate` turns/s (open loop: the k-th turn is due at start + k / rate; a late client catches up
    at full speed). Counts the turns that finished inside the window."""
    wait_until(start_at)
    end = start_at + seconds
    done, latencies, behind = 0, [], 0.0
    while True:
        now = time.monotonic()
        if stop_file and os.path.exists(stop_file):
            end = min(end, now)
            break
        if rate:
            due = start_at + done / rate
            if due >= end:
                break
            if due > now:
                time.sleep(due - now)
            else:
                behind = max(behind, now - due)
        elif now >= end:
            break
        t0 = time.monotonic()
        _next_turn(state)
        t1 = time.monotonic()
        if t1 > end:
            break
        done += 1
        latencies.append(t1 - t0)
    seconds = min(seconds, max(1e-9, end - start_at))
    return {"turns": done, "seconds": seconds, "p50_ms": round(percentile(latencies, 50) * 1000, 3),
            "p99_ms": round(percentile(latencies, 99) * 1000, 3), "max_behind_s": round(behind, 3)}


# -- store writers -----------------------------------------------------------------------------


def _blob_session(session_id: str):
    import json
    from pathlib import Path

    from falai_django.engine.session import Session

    root = Path(__file__).resolve().parents[2]
    blob = json.loads((root / "tests" / "fixtures" / "legacy-blobs" / "v4.json").read_text())
    blob["id"], blob["version"] = session_id, 0
    return Session.from_json(blob, session_id)


def migrate(state: dict[str, Any]) -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0, skip_checks=True)


def prepare_writer(state: dict[str, Any], *, store: str, prefix: str, dsn: str | None = None,
                   table: str | None = None) -> str:
    """Two rows for this writer in the store's table, both written by the store itself:
    `<prefix><index>` (the compare-and-swap row) and `<prefix><index>-plain` (the plain UPDATE's).

    "django": `DjangoStore` on Django's connection (the app's sessions table); the plain UPDATE
    goes through a Django cursor. "postgres": `PostgresStore` on a psycopg autocommit connection
    of this process; the plain UPDATE through the same connection."""
    index = state["index"]
    sid, plain = f"{prefix}{index}", f"{prefix}{index}-plain"
    if store == "django":
        from django.db import connection

        from falai_django.stores.django import DjangoStore

        instance = DjangoStore()
        model = DjangoStore.get_model_class()
        quote = connection.ops.quote_name
        update_sql = (f"UPDATE {quote(model._meta.db_table)} SET {quote('blob')} = %s::jsonb, "
                      f"{quote('updated_at')} = NOW() WHERE {quote('id')} = %s")

        def plain_update(text: str) -> None:
            with connection.cursor() as cursor:
                cursor.execute(update_sql, [text, plain])

        def cleanup() -> None:
            model.objects.filter(pk__in=[sid, plain]).delete()
    else:
        import psycopg

        from falai_django.stores.postgres import PostgresStore

        conn = psycopg.connect(dsn, autocommit=True)
        instance = PostgresStore(client=conn, tables={"sessions": table})
        update_sql = f"UPDATE {table} SET blob = %s::jsonb, updated_at = NOW() WHERE id = %s"

        def plain_update(text: str) -> None:
            conn.execute(update_sql, (text, plain))

        def cleanup() -> None:
            conn.close()

    saved = instance.save(_blob_session(sid), 0)
    instance.save(_blob_session(plain), 0)
    state.setdefault("writers", {})[store] = {"store": instance, "session": saved, "text": saved.to_json_text(),
                                              "plain_update": plain_update, "cleanup": cleanup}
    return sid


def write_loop(state: dict[str, Any], *, start_at: float, seconds: float, worker: int, store: str,
               mode: str) -> int:
    """`mode` "store": `store.save(session, session.version)` in a loop (each save the next
    compare-and-swap); "plain": the plain one-row UPDATE of the same blob text. Operations done."""
    writer = state["writers"][store]
    instance, plain_update, text = writer["store"], writer["plain_update"], writer["text"]
    wait_until(start_at)
    end = start_at + seconds
    done = 0
    if mode == "store":
        session = writer["session"]
        while time.monotonic() < end:
            session = instance.save(session, session.version)
            done += 1
        writer["session"] = session
    else:
        while time.monotonic() < end:
            plain_update(text)
            done += 1
    return done


def cleanup_writers(state: dict[str, Any]) -> None:
    for writer in state.pop("writers", {}).values():
        writer["cleanup"]()
