"""Django settings for the host benches: the project's, on PostgreSQL, with the bench agent."""

import os

from project.settings import *  # noqa: F403

FALAI = {
    "AGENT": "bench.hostbench.agents.agent",
    "SENDER": "bench.hostbench.agents.null_sender",
}
DEBUG = False
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
Q_CLUSTER = {
    "name": "falai-bench",
    "workers": int(os.environ.get("FALAI_BENCH_WORKERS", "6")),
    "timeout": 60,
    "retry": 120,
    "poll": 0.02,
    # the pusher takes up to this many tasks per poll of the ORM broker (django-q2's default is 1)
    "bulk": int(os.environ.get("FALAI_BENCH_BULK", "5")),
    "catch_up": False,
    "orm": "default",
    "log_level": "WARNING",
    "save_limit": -1,
}

# Persistent connections: django-q2's ORM broker calls close_old_connections() on every enqueue,
# which with the default CONN_MAX_AGE = 0 closes the connection and forces a reconnect per turn.
DATABASES["default"]["CONN_MAX_AGE"] = 300  # noqa: F405
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # noqa: F405
