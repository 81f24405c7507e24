"""Settings for a real `manage.py qcluster` started by tests/host/test_pg_cluster.py.

The project's settings, plus: the test agent and a sender that appends to a file (the test reads
it), and a django-q2 cluster whose name (queue and signing salt) the test picks.
"""

import os

from project.settings import *  # noqa: F403

FALAI = {
    "AGENT": "host.agents.cluster_agent",
    "SENDER": "host.senders.file_sender",
    "SEND_LEASE_S": 2.0,
    "SEND_RETRY_BASE_S": 0.2,
}

Q_CLUSTER = {
    "name": os.environ.get("FALAI_TEST_Q_NAME", "falai-test"),
    "workers": int(os.environ.get("FALAI_TEST_Q_WORKERS", "2")),
    "timeout": 30,
    "retry": 60,
    "poll": 0.05,
    "catch_up": False,
    "log_level": "WARNING",
}
if os.environ.get("FALAI_TEST_Q_REDIS"):
    Q_CLUSTER["redis"] = os.environ["FALAI_TEST_Q_REDIS"]
else:
    Q_CLUSTER["orm"] = "default"
