"""A package's door without its weight: names exported from ``__init__`` load their module on
first use (PEP 562), so importing one module of a package does not import all the others, and
the doors add no import cycles."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``: each name of ``exports`` from its module
    (relative to the package), cached in the package's namespace once loaded."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
