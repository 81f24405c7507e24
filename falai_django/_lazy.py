"""One lazy-export helper for the package `__init__` modules: a name resolves (and is cached
in the package's namespace) on first use, so importing a package pulls in no SDK, driver or
Django module it does not need."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` resolving `name` from `table[name]`, the module path that
    defines an attribute of that name."""

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where), name)
        namespace[name] = value
        return value

    return __getattr__
