#!/usr/bin/env bash
# Make sure the PostgreSQL and Redis servers the tests use are up on 127.0.0.1.
# On this kind of machine both are started before a session; elsewhere start what is missing.
# Exit status: 0 when both answer, 1 otherwise (CI treats 1 as a failure; outside CI the
# PostgreSQL/Redis tests then skip with a loud reason).
set -u
ok=0
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "services: starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start >/dev/null 2>&1 || true
  fi
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && break; sleep 0.5; done
fi
pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || { echo "services: PostgreSQL is NOT available on 127.0.0.1:5432" >&2; ok=1; }

if ! (command -v redis-cli >/dev/null 2>&1 && redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1); then
  if command -v redis-server >/dev/null 2>&1; then
    echo "services: starting Redis" >&2
    mkdir -p /tmp/falai-redis
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /tmp/falai-redis --logfile /tmp/falai-redis/redis.log >/dev/null 2>&1 || true
    for _ in $(seq 1 20); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.25; done
  fi
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || { echo "services: Redis is NOT available on 127.0.0.1:6379" >&2; ok=1; }
exit $ok
