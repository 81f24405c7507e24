"""Settings for `falai_replay` run as its own process by tests/host/test_replay.py: the demo's,
with the host tests' Ana (the recorded conversation's agent, on its scripted provider)."""

from project.settings import *  # noqa: F403

FALAI = {**FALAI, "AGENT": "host.test_replay.recorded_ana"}  # noqa: F405
