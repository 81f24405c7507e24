"""RedisStore specifics, on the real server: key layout, hash fields, TTL, script answers."""

from __future__ import annotations

import uuid

import pytest
import redis

from falai_django.engine.errors import InvalidSessionError, SessionConflictError
from falai_django.stores.redis import DEFAULT_SESSION_TTL, RedisStore

from .contract import bare

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix(redis_client):
    value = f"test:{uuid.uuid4().hex[:10]}:"
    yield value
    keys = list(redis_client.scan_iter(match=value + "*"))
    if keys:
        redis_client.delete(*keys)


def test_default_key_prefix_and_ttl(redis_client):
    store = RedisStore(client=redis_client)
    assert store.key("s1") == "agent:session:s1"
    assert store.session_ttl == DEFAULT_SESSION_TTL == 604800


def test_the_hash_holds_version_blob_and_bookkeeping(redis_client, prefix):
    store = RedisStore(client=redis_client, key_prefix=prefix, session_ttl=60)
    v1 = store.save(bare("s1"), 0)
    row = {k.decode(): v.decode() for k, v in redis_client.hgetall(f"{prefix}session:s1").items()}
    assert set(row) == {"version", "blob", "createdAt", "updatedAt"}
    assert row["version"] == "1"
    assert row["blob"] == v1.to_json_text()
    assert row["createdAt"] == row["updatedAt"] and row["createdAt"].endswith("Z")
    assert 0 < redis_client.ttl(f"{prefix}session:s1") <= 60
    store.save(v1, 1)
    row2 = {k.decode(): v.decode() for k, v in redis_client.hgetall(f"{prefix}session:s1").items()}
    assert row2["createdAt"] == row["createdAt"]  # HSETNX: set once
    assert row2["version"] == "2"


def test_every_save_resets_the_ttl_and_zero_never_expires(redis_client, prefix):
    store = RedisStore(client=redis_client, key_prefix=prefix, session_ttl=100)
    v1 = store.save(bare("s1"), 0)
    redis_client.expire(f"{prefix}session:s1", 5)
    store.save(v1, 1)
    assert redis_client.ttl(f"{prefix}session:s1") > 5
    forever = RedisStore(client=redis_client, key_prefix=prefix, session_ttl=0)
    forever.save(bare("s2"), 0)
    assert redis_client.ttl(f"{prefix}session:s2") == -1


def test_an_expired_session_is_gone(redis_client, prefix):
    store = RedisStore(client=redis_client, key_prefix=prefix, session_ttl=1)
    v1 = store.save(bare("s1"), 0)
    redis_client.pexpire(f"{prefix}session:s1", 1)
    import time

    time.sleep(0.05)
    assert store.load("s1") is None
    with pytest.raises(SessionConflictError) as caught:
        store.save(v1, 1)
    assert caught.value.actual_version is None


def test_a_hash_without_a_blob_is_invalid(redis_client, prefix):
    redis_client.hset(f"{prefix}session:s1", mapping={"version": "3"})
    with pytest.raises(InvalidSessionError, match="expected an object, got missing"):
        RedisStore(client=redis_client, key_prefix=prefix).load("s1")


def test_a_decoding_client_works_too(redis_url, prefix):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisStore(client=client, key_prefix=prefix)
    v1 = store.save(bare("s1", nome="Zoë"), 0)
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("s1"), 0)
    assert caught.value.actual_version == 1
    with pytest.raises(SessionConflictError) as caught:
        store.save(bare("nope"), 4)
    assert caught.value.actual_version is None
    assert store.save(v1, 1).version == 2
    assert store.load("s1").data == {"nome": "Zoë"}
    client.close()


@pytest.mark.parametrize("ttl", [-1, 1.5, True, "60"])
def test_a_bad_ttl_is_refused(redis_client, ttl):
    with pytest.raises(ValueError, match="session_ttl"):
        RedisStore(client=redis_client, session_ttl=ttl)
