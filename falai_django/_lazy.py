"""One lazy-export helper for the package `__init__` modules: a name resolves (and is cached
in the package's namespace) on first use, so importing a package pulls in no SDK, driver or
Django module it does not need."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` resolving `name` from `table[name]`: a module path (the
    attribute of the same name there) or `"module:attribute"` (exported under another name)."""

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        namespace[name] = value
        return value

    return __getattr__
