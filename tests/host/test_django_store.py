"""DjangoStore through the shared store contract (tests/stores/contract.py), plus the host's
derived columns. On SQLite here; tests/host/test_postgres.py runs this file on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import close_old_connections, connection
from stores.contract import *  # noqa: F403 - the suite itself
from stores.contract import StoreHarness

from falai_django.engine.session import Session
from falai_django.stores.django import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)


class _ThreadSafeStore(DjangoStore):
    """Closes the thread's connection after each call (contract racers are plain threads)."""

    def save(self, session, expected_version):
        try:
            return super().save(session, expected_version)
        finally:
            close_old_connections()


def django_harness() -> StoreHarness:
    from falai_django.models import Conversation

    table = connection.ops.quote_name(Conversation._meta.db_table)
    cast = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"

    def put_raw(sid: str, text: str) -> None:
        Conversation.objects.filter(pk=sid).delete()
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} (id, version, blob, created_at, updated_at) "
                           f"VALUES (%s, 1, {cast}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)", [sid, text])

    db = connection.settings_dict
    if connection.vendor == "postgresql":
        dsn = f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
        env = {"DJANGO_SETTINGS_MODULE": "project.settings", "DATABASE_URL": dsn}
    else:
        env = {"DJANGO_SETTINGS_MODULE": "project.settings", "SQLITE_PATH": str(db["NAME"])}
    return StoreHarness(
        spawn=("django", env),
        store=DjangoStore(),
        new_store=_ThreadSafeStore,
        put_raw=put_raw,
        delete=lambda sid: Conversation.objects.filter(pk=sid).delete(),
        extra={"raw_is_json_column": True},  # JSONField: a CHECK (SQLite) or jsonb (PostgreSQL)
    )


@pytest.fixture
def store_factory():
    yield django_harness()


def test_every_save_refreshes_the_admin_columns():
    from falai_django.models import Conversation

    store = DjangoStore()
    session = Session.from_json({
        "id": "cols", "v": 4, "version": 0, "data": {}, "claims": {}, "inputs": [],
        "metadata": {"handoff": {"reason": "human", "owner": "maria", "mode": "stop"}},
        "lastUserAt": "2026-09-20T10:00:00.000Z", "lastAssistantAt": "2026-09-20T10:00:01.000Z",
        "runs": [
            {"id": "t#m1", "flowId": "t", "anchor": "cols", "dedupeKey": "t:cols:", "stepId": "quem",
             "status": "asking", "trigger": {"kind": "message", "key": "m1"}, "hop": 0,
             "startedAt": "2026-09-20T10:00:00.000Z", "asked": {}, "visits": {"quem": 1}, "outcomes": []},
            {"id": "r#m1", "flowId": "r", "anchor": "cols", "dedupeKey": "r:cols:", "stepId": "w1",
             "status": "waiting", "trigger": {"kind": "message", "key": "m1"}, "hop": 0,
             "startedAt": "2026-09-20T10:00:00.000Z", "asked": {}, "visits": {"w1": 1}, "outcomes": [],
             "waiting": {"kind": "timer", "key": "r#m1:w1:1", "until": "2026-09-21T10:00:00.000Z",
                         "setAt": "2026-09-20T10:00:00.000Z"}},
        ],
    })
    saved = store.save(session, 0)
    row = Conversation.objects.get(pk="cols")
    assert (row.asking_flow, row.asking_step, row.silenced_reason, row.human_owner, row.run_count) == (
        "t", "quem", "human", "maria", 2)
    assert row.waiting_until.isoformat().startswith("2026-09-21T10:00:00")
    assert row.last_assistant_at.isoformat().startswith("2026-09-20T10:00:01")
    saved.runs = []
    saved.metadata = {}
    store.save(saved, 1)
    row.refresh_from_db()
    assert (row.asking_flow, row.waiting_until, row.silenced_reason, row.human_owner, row.run_count) == (
        None, None, None, None, 0)
