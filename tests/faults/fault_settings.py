"""Django settings for the fault-test subprocesses (load driver, qcluster, dispatcher).

The project's settings with DATABASE_URL pointing at the private PostgreSQL cluster, plus the
fault agent and the channel sender of faults/fault_agent.py, and a django-q2 cluster on a
private Redis database (FAULT_Q_REDIS) under a name the test picks (FAULT_Q_NAME).
"""

import os

from project.settings import *  # noqa: F403

DEBUG = False
ALLOWED_HOSTS = ["*"]

FALAI = {
    "AGENT": "faults.fault_agent.agent",
    "SENDER": "faults.fault_agent.channel_send",
    "SEND_LEASE_S": 1.5,
    "SEND_RETRY_BASE_S": 0.1,
    "SEND_RETRY_MAX": 50,
    "SEND_SWEEP_AFTER_S": 0.5,
    "TURN_RETRY_BASE_S": 0.05,
    "TURN_RETRY_CAP_S": 0.5,
    "TURN_RETRY_MAX": 60,
    "DISPATCH_POLL_S": 0.05,
    "DISPATCH_LEASE_S": 2.0,
    "MAX_REPLAYS": 50,
    # The kill tests kill django-q2 workers mid-send, so sends must run in the workers: one task
    # per turn ("queue"), not the dispatcher's NOTIFY pool (tests/host/test_pg_write_path.py).
    "SEND_HANDOFF": os.environ.get("FAULT_SEND_HANDOFF", "queue"),
    "WEBHOOK_SECRET": os.environ.get("FAULT_WEBHOOK_SECRET", ""),
}
if os.environ.get("FAULT_WHATSAPP_SECRET"):  # the webhook takes messages; the fault channel sends
    FALAI["WHATSAPP"] = {"PHONE_NUMBER_ID": "106540352242922", "ACCESS_TOKEN": "unused",  # tests/whatsapp/payloads.py's
                         "APP_SECRET": os.environ["FAULT_WHATSAPP_SECRET"], "VERIFY_TOKEN": "unused"}

Q_CLUSTER = {
    "name": os.environ.get("FAULT_Q_NAME", "falai-faults"),
    "workers": int(os.environ.get("FAULT_Q_WORKERS", "2")),
    "timeout": 30,
    "retry": 40,
    "poll": 0.05,
    "catch_up": False,
    "log_level": "ERROR",
    "max_attempts": 1,
}
if os.environ.get("FAULT_Q_REDIS"):
    Q_CLUSTER["redis"] = os.environ["FAULT_Q_REDIS"]
else:
    Q_CLUSTER["orm"] = "default"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "ERROR"},
    # A test that reads the dispatcher's "lost the database" / "is back" lines raises this.
    "loggers": {"falai_django": {"level": os.environ.get("FAULT_FALAI_LOG_LEVEL", "ERROR")}},
}
