"""Test doubles: `fake_clock`, `MemoryScheduler` and `mock_provider`.

    from falai_django.testing import fake_clock, MemoryScheduler, mock_provider
"""

from __future__ import annotations

import importlib
from typing import Any

from .clock import FakeClock, fake_clock
from .scheduler import MemoryScheduler, ScheduledWake

__all__ = ["FakeClock", "MemoryScheduler", "MockProvider", "ScheduledWake", "fake_clock", "mock_provider"]

_LAZY = {"mock_provider": "falai_django.testing.mock", "MockProvider": "falai_django.testing.mock"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'falai_django.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
