"""Test doubles: `fake_clock`, `MemoryScheduler` and `mock_provider`; `replay_case`, which
replays a conversation exported with `manage.py falai_replay --export` (no database).

    from falai_django.testing import fake_clock, MemoryScheduler, mock_provider, replay_case
"""

from __future__ import annotations

from falai_django._lazy import lazy_exports

from .clock import FakeClock, fake_clock
from .scheduler import MemoryScheduler, ScheduledWake

__all__ = ["FakeClock", "MemoryScheduler", "MockProvider", "ScheduledWake", "fake_clock", "mock_provider",
           "replay_case"]

_LAZY = {"mock_provider": "falai_django.testing.mock", "MockProvider": "falai_django.testing.mock",
         "replay_case": "falai_django.replay.cases"}


__getattr__ = lazy_exports(__name__, globals(), _LAZY)
