"""Session stores: `MemoryStore`, `PostgresStore`, `SQLiteStore`, `RedisStore`, `MongoStore`,
`PrismaStore`, `OpenSearchStore` (and the host's `DjangoStore`). The contract is in `base.py`;
each backend is one module.

Names resolve lazily, so importing this package imports no driver and needs no Django setup.
"""

from __future__ import annotations

from falai_django._lazy import lazy_exports

__all__ = [
    "DjangoStore", "MemoryStore", "MongoStore", "OpenSearchStore", "PostgresStore", "PrismaStore", "RedisStore",
    "SQLiteStore", "Store",
]

_BACKENDS = {
    "Store": "falai_django.stores.base",
    "MemoryStore": "falai_django.stores.memory",
    "PostgresStore": "falai_django.stores.postgres",
    "SQLiteStore": "falai_django.stores.sqlite",
    "RedisStore": "falai_django.stores.redis",
    "MongoStore": "falai_django.stores.mongo",
    "PrismaStore": "falai_django.stores.prisma",
    "OpenSearchStore": "falai_django.stores.opensearch",
    "DjangoStore": "falai_django.stores.django",
}


__getattr__ = lazy_exports(__name__, globals(), _BACKENDS)
