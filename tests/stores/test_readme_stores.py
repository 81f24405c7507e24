"""The README's MongoStore, PrismaStore and OpenSearchStore setup runs as written.

The block is executed with the clients it builds pointed at test ones: `pymongo.MongoClient`
swapped for `mongomock.MongoClient` (no server here), a generated `prisma.Prisma` for the
recording fake (no `prisma generate` here), and `opensearchpy.OpenSearch` built on the fake
cluster's address (no cluster here). The stores it leaves behind then save and load a session.
"""

from __future__ import annotations

import re
from pathlib import Path

import mongomock
import opensearchpy
import prisma
import pymongo
import pytest

from falai_django import MongoStore, OpenSearchStore, PrismaStore, SessionConflictError

from .contract import bare
from .fake_opensearch import FakeOpenSearch
from .prisma_fake import FakePrisma

README = Path(__file__).resolve().parents[2] / "README.md"


class GeneratedPrisma(FakePrisma):
    """`Prisma()` as generated with interface = "sync": no arguments, `connect()` before use."""

    def __init__(self) -> None:
        super().__init__()
        self.connected = False

    def connect(self) -> None:
        self.connected = True


@pytest.fixture
def cluster():
    with FakeOpenSearch() as fake:
        yield fake


def test_the_readme_store_setup_runs_as_written(monkeypatch, cluster):
    block = re.search(r"<!-- readme-stores:start -->\n```python\n(.*?)```\n<!-- readme-stores:end -->",
                      README.read_text(encoding="utf-8"), re.DOTALL)
    assert block, "the README lost its marked store setup"
    urls = []
    monkeypatch.setattr(pymongo, "MongoClient", lambda url: urls.append(url) or mongomock.MongoClient())
    monkeypatch.setitem(vars(prisma), "Prisma", GeneratedPrisma)  # the ungenerated package raises on getattr
    hosts: list = []
    real = opensearchpy.OpenSearch
    monkeypatch.setattr(opensearchpy, "OpenSearch", lambda **kw: hosts.append(kw["hosts"]) or real(hosts=[cluster.url]))
    scope: dict = {"__name__": "readme_stores"}
    exec(compile(block.group(1), str(README), "exec"), scope)

    mongo_store, prisma_store, search_store = scope["mongo_store"], scope["prisma_store"], scope["search_store"]
    assert isinstance(mongo_store, MongoStore) and isinstance(prisma_store, PrismaStore)
    assert isinstance(search_store, OpenSearchStore)
    assert urls == ["mongodb://127.0.0.1:27017"]
    assert hosts == [["http://127.0.0.1:9200"]]
    assert [(r.method, r.path) for r in cluster.requests] == [("HEAD", "/agent_sessions"), ("PUT", "/agent_sessions")]
    assert (mongo_store.database_name, mongo_store.collection_name) == ("falai", "agent_sessions")
    assert scope["db"].connected
    for store in (mongo_store, prisma_store, search_store):
        saved = store.save(bare("5511", nome="Ana"), 0)
        assert store.load("5511").data == {"nome": "Ana"}
        with pytest.raises(SessionConflictError):
            store.save(saved, 0)
    assert prisma_store.delegate is scope["db"].agentsession
