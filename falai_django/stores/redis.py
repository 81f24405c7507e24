"""RedisStore: one hash per session, saved by one Lua compare-and-swap script.

    store = RedisStore(client=redis.Redis.from_url(url), key_prefix="agent:", session_ttl=604800)

The key is `<key_prefix>session:<id>` (`agent:session:s1` by default) and holds the fields
`version`, `blob` (JSON text), `createdAt` and `updatedAt`. Every save resets the TTL
(`session_ttl` seconds, default 7 days; 0 never expires). An expired hash takes its parked
runs and claims with it: set the TTL above the longest wait (event waits default to 30
days), or to 0.
"""

from __future__ import annotations

from typing import Any

from falai_django.engine.errors import SessionConflictError
from falai_django.engine.jstime import to_iso, utc_now
from falai_django.engine.session import Session

from .base import MISSING, Store, read_blob, stamped

__all__ = ["CAS_SCRIPT", "DEFAULT_KEY_PREFIX", "DEFAULT_SESSION_TTL", "RedisStore"]

DEFAULT_KEY_PREFIX = "agent:"
DEFAULT_SESSION_TTL = 7 * 24 * 60 * 60

# KEYS[1] the hash; ARGV: expected, next, blob, now (ISO), ttl (seconds).
# Returns nil on success, else the stored version, or "missing" when there is no row.
CAS_SCRIPT = """
local current = redis.call('HGET', KEYS[1], 'version')
if ARGV[1] == '0' then
  if current then return current end
elseif current ~= ARGV[1] then
  if current then return current end
  return 'missing'
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'blob', ARGV[3], 'updatedAt', ARGV[4])
redis.call('HSETNX', KEYS[1], 'createdAt', ARGV[4])
if tonumber(ARGV[5]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[5])
end
return nil
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStore(Store):
    """Sessions in Redis hashes; `client` is a `redis.Redis` (bytes or decoded responses)."""

    def __init__(self, client: Any, key_prefix: str = DEFAULT_KEY_PREFIX,
                 session_ttl: int = DEFAULT_SESSION_TTL) -> None:
        if isinstance(session_ttl, bool) or not isinstance(session_ttl, int) or session_ttl < 0:
            raise ValueError(f"[RedisStore] session_ttl must be whole seconds ≥ 0 (0 never expires), got {session_ttl!r}.")
        self.client = client
        self.key_prefix = key_prefix
        self.session_ttl = session_ttl
        # redis-py: a registered script (EVALSHA, falling back to EVAL); a bare client with only
        # `eval(script, numkeys, *keys_and_args)` (upstream's RedisClient shape) works too
        register = getattr(client, "register_script", None)
        self._cas = register(CAS_SCRIPT) if callable(register) else None

    def key(self, session_id: str) -> str:
        """The Redis key of a session's hash."""
        return f"{self.key_prefix}session:{session_id}"

    def load(self, session_id: str) -> Session | None:
        row = self.client.hgetall(self.key(session_id))
        if not row:
            return None
        return read_blob(row.get(b"blob", row.get("blob", MISSING)), session_id)

    async def aload(self, session_id: str) -> Session | None:
        """See load()."""
        return await super().aload(session_id)

    def save(self, session: Session, expected_version: int) -> Session:
        saved, text = stamped(session, expected_version)
        key = self.key(saved.id)
        args = [str(expected_version), str(saved.version), text, to_iso(utc_now()), str(self.session_ttl)]
        if self._cas is not None:
            answer = self._cas(keys=[key], args=args)
        else:
            answer = self.client.eval(CAS_SCRIPT, 1, key, *args)
        if answer is not None:
            answer = _text(answer)
            raise SessionConflictError(saved.id, expected_version, None if answer == "missing" else int(answer))
        return saved

    async def asave(self, session: Session, expected_version: int) -> Session:
        """See save()."""
        return await super().asave(session, expected_version)

    def initialize(self) -> None:
        """Nothing to create: a hash appears on its first save."""

    async def ainitialize(self) -> None:
        """See initialize()."""

    def disconnect(self) -> None:
        """Close the client passed in (`close()`, or `quit()` on clients that only have that)."""
        close = getattr(self.client, "close", None) or getattr(self.client, "quit", None)
        if callable(close):
            close()
