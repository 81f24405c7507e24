"""The optional stores need no driver: `from falai_django import MongoStore, PrismaStore,
OpenSearchStore` works with pymongo, bson, prisma and opensearch-py blocked, and each store then
saves and loads through a plain client of the right shape, since it only calls what it is given.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
for name in ('pymongo', 'bson', 'prisma', 'opensearchpy'):
    sys.modules[name] = None
from falai_django import MongoStore, OpenSearchStore, PrismaStore, Session

class Col:
    def __init__(self): self.docs = {}
    def insert_one(self, d): self.docs[d['_id']] = d
    def find_one(self, q, *a): return self.docs.get(q['_id'])
class Mongo:
    col = Col()
    def get_database(self, n): return self
    def get_collection(self, n): return self.col

class Missing(Exception):
    status_code = 404
class Indices:
    def exists(self, index): return True
    def create(self, index, body): raise AssertionError('the index exists')
class Search:
    indices = Indices()
    docs = {}
    def get(self, index, id):
        if id not in self.docs: raise Missing()
        return {'_source': self.docs[id]}
    def index(self, index, id, body, op_type, refresh): self.docs[id] = body
    def update(self, index, id, body, retry_on_conflict, refresh): raise AssertionError('no update here')

class Delegate:
    rows = {}
    def create(self, data): self.rows[data['id']] = data
    def find_unique(self, where): return self.rows.get(where['id'])
    def update_many(self, where, data): raise AssertionError('no update here')
class Prisma:
    agentsession = Delegate()

for store in (MongoStore(client=Mongo(), database_name='falai'), OpenSearchStore(Search()),
              PrismaStore(prisma=Prisma())):
    store.initialize()
    store.save(Session.fresh('s1'), 0)
    print(type(store).__name__, store.load('s1').version, store.load('s2'))
"""


def test_the_stores_resolve_and_run_without_their_drivers():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["MongoStore 1 None", "OpenSearchStore 1 None", "PrismaStore 1 None"]
